//! `minfer inspect` through the real binary: the real models show every
//! tensor and their hyperparameters; broken files give a one-line error and
//! a non-zero exit code, never a panic.

use std::path::Path;
use std::process::{Command, Output};

use minfer_gguf::{GgmlType, GgufWriter};
use minfer_testutil::{require_model, QWEN, SMOLLM};

fn minfer(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_minfer"))
        .args(args)
        .env("MINFER_HOME", home)
        .output()
        .expect("run minfer")
}

fn inspect_json(model: &Path) -> serde_json::Value {
    let home = tempfile::tempdir().unwrap();
    let out = minfer(&["inspect", model.to_str().unwrap(), "--json"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn inspect_qwen_json_and_text() {
    let Some(path) = require_model(QWEN) else {
        return;
    };
    let j = inspect_json(&path);
    assert_eq!(j["architecture"], "qwen2");
    assert_eq!(j["tensors"].as_array().unwrap().len(), 291);
    assert_eq!(j["metadata"]["qwen2.block_count"], 24);
    assert_eq!(j["metadata"]["qwen2.embedding_length"], 896);
    assert_eq!(j["metadata"]["qwen2.attention.head_count"], 14);
    assert_eq!(j["metadata"]["qwen2.attention.head_count_kv"], 2);
    assert_eq!(j["tokenizer"]["vocab_size"], 151_936);
    assert_eq!(j["tokenizer"]["has_chat_template"], true);
    // The vocabulary is summarized, not dumped.
    let tokens = &j["metadata"]["tokenizer.ggml.tokens"];
    assert_eq!(tokens["len"], 151_936);
    assert_eq!(tokens["element_type"], "string");
    let emb = j["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "token_embd.weight")
        .unwrap();
    assert_eq!(emb["shape"], serde_json::json!([896, 151936]));
    let bpw = j["totals"]["bits_per_weight"].as_f64().unwrap();
    assert!((4.5..7.0).contains(&bpw), "bpw {bpw}");

    let home = tempfile::tempdir().unwrap();
    let out = minfer(&["inspect", path.to_str().unwrap()], home.path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("architecture:  qwen2"));
    assert!(text.contains("totals: 291 tensors"));
    assert!(text.contains("blk.23.ffn_down.weight"));
}

#[test]
fn inspect_smollm_json() {
    let Some(path) = require_model(SMOLLM) else {
        return;
    };
    let j = inspect_json(&path);
    assert_eq!(j["architecture"], "llama");
    assert_eq!(j["tensors"].as_array().unwrap().len(), 272);
    assert_eq!(j["metadata"]["llama.block_count"], 30);
    assert_eq!(j["metadata"]["llama.embedding_length"], 576);
    assert_eq!(j["metadata"]["llama.attention.head_count"], 9);
    assert_eq!(j["metadata"]["llama.attention.head_count_kv"], 3);
    assert_eq!(j["tokenizer"]["vocab_size"], 49_152);
}

fn assert_clean_failure(out: &Output, needle: &str) {
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn broken_files_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.add_tensor("w", GgmlType::F32, &[256, 4], vec![0; 4096])
        .unwrap();
    let bytes = w.to_bytes();

    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    let out = minfer(&["inspect", truncated.to_str().unwrap()], dir.path());
    assert_clean_failure(&out, "outside the data section");

    let header_cut = dir.path().join("cut.gguf");
    std::fs::write(&header_cut, &bytes[..40]).unwrap();
    let out = minfer(&["inspect", header_cut.to_str().unwrap()], dir.path());
    assert_clean_failure(&out, "cannot fit in the remaining");

    let corrupt = dir.path().join("corrupt.gguf");
    let mut b = bytes.clone();
    b[0..4].copy_from_slice(b"GGML");
    std::fs::write(&corrupt, &b).unwrap();
    let out = minfer(&["inspect", corrupt.to_str().unwrap()], dir.path());
    assert_clean_failure(&out, "not a GGUF file");

    let missing = dir.path().join("missing.gguf");
    let out = minfer(&["inspect", missing.to_str().unwrap()], dir.path());
    assert_clean_failure(&out, "missing.gguf");
}

#[test]
fn unknown_model_name_lists_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = minfer(&["inspect", "no-such-model"], dir.path());
    assert_clean_failure(&out, "qwen2.5-coder-0.5b-instruct");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("smollm2-135m-instruct"), "{err}");
}
