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

/// The tokenizer of a real model, or `None` when the model is absent and
/// not required. Prints how long it took to build and llama.cpp-style
/// warnings (Qwen's plain `</s>` is promoted to an end-of-generation
/// control token, as llama.cpp does too).
pub fn tokenizer(file: &str) -> Option<minfer_text::Tokenizer> {
    let f = open_model(file)?;
    let start = std::time::Instant::now();
    let t = minfer_text::Tokenizer::from_gguf(f.metadata()).expect("tokenizer loads");
    eprintln!(
        "{file}: tokenizer built in {:.0} ms ({} tokens, {} merges)",
        start.elapsed().as_secs_f64() * 1e3,
        t.n_vocab(),
        t.n_merges()
    );
    for w in t.warnings() {
        eprintln!("{file}: warning: {w}");
    }
    Some(t)
}

/// Shows what a mismatching case looks like, token by token.
pub fn explain(t: &minfer_text::Tokenizer, got: &[u32], want: &[u32]) -> String {
    let show = |ids: &[u32]| -> Vec<String> {
        ids.iter()
            .map(|&id| format!("{id}:{:?}", t.token_text(id)))
            .collect()
    };
    format!("\n  got:  {:?}\n  want: {:?}", show(got), show(want))
}

/// Encodes every case of the golden tokenization file `file` (with BOS
/// where the model adds it, special tokens parsed) and returns one line per
/// case that differs from llama.cpp's ids, and the number of cases.
pub fn golden_failures(t: &minfer_text::Tokenizer, name: &str, file: &str) -> (Vec<String>, usize) {
    let g = golden(file);
    let cases = g["cases"].as_array().expect("cases");
    let failures = cases
        .iter()
        .filter_map(|case| {
            let text = case["text"].as_str().expect("text");
            let want = ids(&case["ids"]);
            let got = t.encode(text, true, true);
            first_difference(&got, &want)
                .map(|diff| format!("{name} {text:?}: {diff}{}", explain(t, &got, &want)))
        })
        .collect();
    (failures, cases.len())
}

/// Tokenizes the 11 KB Apache license text and checks that it decodes
/// back to itself (`special` as [`minfer_text::Tokenizer::decode`] takes
/// it: whether control tokens render as their text); prints how long encoding took (a figure to read, not a
/// bound: the machine is shared).
pub fn long_text_round_trip(t: &minfer_text::Tokenizer, name: &str, special: bool) {
    let text = std::fs::read_to_string(minfer_testutil::golden_dir().join("apache-2.0.txt"))
        .expect("apache-2.0.txt");
    let _ = t.encode(&text, true, true); // warm the Unicode tables
    let start = std::time::Instant::now();
    let ids = t.encode(&text, true, true);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "{name}: {} bytes -> {} tokens in {ms:.1} ms",
        text.len(),
        ids.len()
    );
    assert_eq!(t.decode(&ids, special), text.as_bytes(), "{name}");
}
