//! Bad input through the real binary: every case exits non-zero with one
//! line on stderr that names the problem — no panic, no backtrace, nothing
//! on stdout. Runtime errors exit 1; values clap rejects exit 2, as clap's
//! usage errors do.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_one_line_error, minfer, minfer_stdin};
use minfer_gguf::{GgmlType, GgufWriter};
use minfer_testutil::{require_model, SMOLLM};

/// A small valid GGUF with architecture `arch` and one F32 tensor.
fn small_gguf(arch: &str) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", arch);
    w.add_tensor("w", GgmlType::F32, &[256, 4], vec![0; 4096])
        .unwrap();
    w.to_bytes()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn missing_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let out = minfer(&["run", s(&missing), "hello"], dir.path());
    assert_one_line_error(&out, 1, &["model file not found", s(&missing)]);
}

#[test]
fn missing_model_file_without_prompt_is_not_taken_for_a_prompt() {
    // A lone argument that names a .gguf file is the model, even when the
    // file does not exist: answering it as a prompt with the default model
    // would hide the typo (and pull a model).
    let dir = tempfile::tempdir().unwrap();
    let out = minfer_stdin(&["run", "missing.gguf"], dir.path(), "hello");
    assert_one_line_error(&out, 1, &["model file not found: missing.gguf"]);
}

#[test]
fn directory_as_model() {
    let dir = tempfile::tempdir().unwrap();
    let out = minfer(&["run", s(dir.path()), "hello"], dir.path());
    assert_one_line_error(
        &out,
        1,
        &[s(dir.path()), "is a directory, not a model file"],
    );
    let out = minfer(&["inspect", s(dir.path())], dir.path());
    assert_one_line_error(&out, 1, &["is a directory, not a model file"]);
}

#[test]
fn file_that_is_not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "notes.txt",
        b"these are not the weights you are looking for\n",
    );
    let out = minfer(&["run", s(&path), "hello"], dir.path());
    assert_one_line_error(&out, 1, &["cannot load", "notes.txt", "not a GGUF file"]);
    let empty = write(dir.path(), "empty.gguf", b"");
    let out = minfer(&["run", s(&empty), "hello"], dir.path());
    assert_one_line_error(&out, 1, &["cannot load", "empty.gguf", "truncated"]);
}

#[test]
fn truncated_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = small_gguf("llama");
    let cut = write(dir.path(), "cut.gguf", &bytes[..bytes.len() - 100]);
    let out = minfer(&["run", s(&cut), "hello"], dir.path());
    assert_one_line_error(&out, 1, &["cannot load", "cut.gguf", "truncated"]);
}

#[test]
fn truncated_real_model() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&model).unwrap();
    // Cut inside the metadata (the vocabulary) and inside the tensor data.
    for (name, len) in [("head.gguf", 64 << 10), ("half.gguf", bytes.len() / 2)] {
        let cut = write(dir.path(), name, &bytes[..len]);
        let out = minfer(&["run", s(&cut), "hello"], dir.path());
        assert_one_line_error(&out, 1, &["cannot load", name, "truncated"]);
    }
}

#[test]
fn unknown_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "mamba.gguf", &small_gguf("mamba9"));
    let out = minfer(&["run", s(&path), "hello"], dir.path());
    assert_one_line_error(
        &out,
        1,
        &[
            "unknown model architecture \"mamba9\"",
            "supported: ",
            "llama",
        ],
    );
    // Inspecting reads only the file, so it still works.
    let out = minfer(&["inspect", s(&path)], dir.path());
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("mamba9"),
        "{out:?}"
    );
}

#[test]
fn prompt_longer_than_the_context() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prompt = "The quick brown fox jumps over the lazy dog. ".repeat(4);
    let out = minfer(
        &["run", s(&model), &prompt, "--no-template", "--n-ctx", "16"],
        dir.path(),
    );
    assert_one_line_error(
        &out,
        1,
        &[
            "the prompt has",
            "does not fit in the context of 16",
            "--n-ctx",
        ],
    );
}

#[test]
fn empty_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "m.gguf", &small_gguf("llama"));
    let out = minfer_stdin(&["run", s(&path)], dir.path(), "");
    assert_one_line_error(&out, 1, &["the prompt is empty"]);
}

#[test]
fn missing_prompt_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "m.gguf", &small_gguf("llama"));
    let out = minfer(&["run", s(&path), "-f", "no-such-prompt.txt"], dir.path());
    assert_one_line_error(&out, 1, &["cannot read prompt file no-such-prompt.txt"]);
}

#[test]
fn unknown_model_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = minfer(&["run", "no-such-model", "hello"], dir.path());
    assert_one_line_error(
        &out,
        1,
        &[
            "unknown model 'no-such-model'",
            "qwen2.5-coder-0.5b-instruct",
            "smollm2-135m-instruct",
        ],
    );
}

/// Values that can never be right are rejected before anything is
/// loaded, by clap, on one line naming the flag.
#[test]
fn invalid_option_values() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "m.gguf", &small_gguf("llama"));
    let cases: &[(&[&str], &[&str])] = &[
        (&["-t", "0"], &["'0'", "--threads", "must be at least 1"]),
        (&["--threads", "-2"], &["'-2'", "--threads", "whole number"]),
        (
            &["--temp", "-1"],
            &["'-1'", "--temp", "must be a number >= 0"],
        ),
        (&["--temp", "warm"], &["'warm'", "--temp", "not a number"]),
        (&["--top-p", "2"], &["'2'", "--top-p", "must be in (0, 1]"]),
        (&["--top-p", "0"], &["'0'", "--top-p", "must be in (0, 1]"]),
        (
            &["--min-p", "1.5"],
            &["'1.5'", "--min-p", "must be in [0, 1]"],
        ),
        (
            &["--repeat-penalty", "0"],
            &["'0'", "--repeat-penalty", "must be > 0"],
        ),
        (&["--typical", "0"], &["'0'", "--typical", "in (0, 1]"]),
        (
            &["--xtc-probability", "2"],
            &["'2'", "--xtc-probability", "in [0, 1]"],
        ),
        (&["--dry-base", "0.5"], &["'0.5'", "--dry-base", ">= 1"]),
        (&["--mirostat", "3"], &["'3'", "--mirostat", "0..=2"]),
        (
            &["--samplers", "top_k;bogus"],
            &["--samplers", "unknown sampler stage 'bogus'"],
        ),
        (&["-l", "5x"], &["'5x'", "--logit-bias", "TOKEN_ID+BIAS"]),
        (&["--n-ctx", "0"], &["'0'", "--n-ctx", "from 1 to"]),
        (
            &["--kv-type", "q4"],
            &["'q4'", "--kv-type", "unknown KV format"],
        ),
    ];
    for (flags, needles) in cases {
        let mut args = vec!["run", s(&model), "hello"];
        args.extend_from_slice(flags);
        let out = minfer(&args, dir.path());
        assert_one_line_error(&out, 2, needles);
        let err = common::stderr(&out);
        assert!(err.starts_with("error: invalid value "), "{flags:?}: {err}");
    }
}

/// A grammar or schema that cannot work is reported before the model
/// loads (the model here is not even a usable one).
#[test]
fn bad_grammars_and_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "m.gguf", &small_gguf("llama"));
    let cases: &[(&[&str], i32, &[&str])] = &[
        (
            &["--grammar", "root ::= ("],
            1,
            &["GBNF line 1", "expected ')'"],
        ),
        (
            &["--grammar", "root ::= nowhere"],
            1,
            &["undefined rule 'nowhere'"],
        ),
        (
            &["--grammar-file", "no-such.gbnf"],
            1,
            &["cannot read grammar file", "no-such.gbnf"],
        ),
        (
            &["--json-schema", "{bad"],
            1,
            &["--json-schema is not valid JSON"],
        ),
        (
            &["--json-schema", "@no-such.json"],
            1,
            &["cannot read JSON schema file"],
        ),
    ];
    for (flags, code, needles) in cases {
        let mut args = vec!["run", s(&model), "hello"];
        args.extend_from_slice(flags);
        let out = minfer(&args, dir.path());
        assert_one_line_error(&out, *code, needles);
    }
    // Two constraints at once: clap's usage error.
    let out = minfer(
        &[
            "run",
            s(&model),
            "hi",
            "--json",
            "--grammar",
            "root ::= \"a\"",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("cannot be used with"));
}

#[test]
fn runtime_flags_are_checked_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(dir.path(), "m.gguf", &small_gguf("llama"));
    for cmd in ["bench", "perplexity"] {
        let out = minfer(&[cmd, s(&model), "-t", "0"], dir.path());
        assert_one_line_error(&out, 2, &["--threads", "must be at least 1"]);
    }
}
