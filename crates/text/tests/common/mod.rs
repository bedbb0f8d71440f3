//! Shared helpers for the real-model tests.

#![allow(dead_code)]

use std::path::PathBuf;

use minfer_gguf::GgufFile;
use serde_json::Value;

/// The two real models, with the name their golden files use.
pub const MODELS: [(&str, &str); 2] = [
    (minfer_testutil::QWEN, "qwen2.5"),
    (minfer_testutil::SMOLLM, "smollm2"),
];

/// Opens a real model, or `None` (after the loud skip message) when it is
/// absent and not required.
pub fn open_model(file: &str) -> Option<GgufFile> {
    let path = minfer_testutil::require_model(file)?;
    Some(GgufFile::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())))
}

/// Parses a golden file.
pub fn golden(name: &str) -> Value {
    let path: PathBuf = minfer_testutil::golden_dir().join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Token ids of a golden JSON array.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// Describes the first difference between two id sequences.
pub fn first_difference(got: &[u32], want: &[u32]) -> Option<String> {
    if got == want {
        return None;
    }
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    Some(format!(
        "first difference at position {i}: got {:?}, want {:?} (lengths {} vs {})",
        got.get(i),
        want.get(i),
        got.len(),
        want.len()
    ))
}
