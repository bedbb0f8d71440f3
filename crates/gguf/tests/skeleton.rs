//! `scripts/gpu/skeleton.py`, which carries a model's shape to a machine its
//! weights cannot reach: packed and unpacked, a file has the original's
//! header, tensor table and size, and each tensor repeats its first whole
//! blocks (at most 4 KiB) to its full length, so that an engine loads it and
//! does the real model's work.

use std::path::Path;
use std::process::Command;

use minfer_gguf::GgufFile;
use minfer_testutil::{repo_model, workspace_root};

fn skeleton(args: &[&Path]) {
    let script = workspace_root().join("scripts/gpu/skeleton.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "skeleton.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn round_trip(file: &str) {
    let original = repo_model(file);
    let dir = tempfile::tempdir().unwrap();
    let skel = dir.path().join("model.skel");
    let copy = dir.path().join("model.gguf");
    skeleton(&[Path::new("pack"), &original, &skel]);
    skeleton(&[Path::new("unpack"), &skel, &copy]);

    let a = GgufFile::open(&original).unwrap();
    let b = GgufFile::open(&copy).unwrap();
    assert_eq!(a.file_size(), b.file_size());
    assert!(
        std::fs::metadata(&skel).unwrap().len() * 2 < a.file_size(),
        "the skeleton is not much smaller than the model"
    );
    assert_eq!(a.metadata().len(), b.metadata().len());
    assert_eq!(a.tensors().len(), b.tensors().len());
    for (ta, tb) in a.tensors().iter().zip(b.tensors()) {
        assert_eq!(ta.info, tb.info);
        let (da, db) = (a.tensor_data(ta), b.tensor_data(tb));
        let block = ta.info.ggml_type.type_size() as usize;
        let kept = (4096 / block).max(1) * block;
        let kept = kept.min(da.len());
        assert_eq!(&da[..kept], &db[..kept], "{}: kept bytes", ta.info.name);
        for (i, &byte) in db.iter().enumerate() {
            assert_eq!(byte, da[i % kept], "{}: byte {i}", ta.info.name);
        }
    }
}

#[test]
fn a_skeleton_unpacks_to_the_models_shape_with_its_blocks_tiled() {
    round_trip("qwen3-tiny-q8_0.gguf");
    round_trip("qwen3moe-mxfp4-tiny.gguf");
}
