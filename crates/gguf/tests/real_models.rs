//! The two real models open, with every tensor and the expected
//! hyperparameters. A missing model fails the test unless
//! `MINFER_REQUIRE_MODELS=0` allows a recorded skip.

use minfer_gguf::{GgmlType, GgufFile};
use minfer_testutil::{require_model, QWEN, SMOLLM};

fn hp(f: &GgufFile, key: &str) -> u64 {
    let arch = f.architecture().unwrap();
    f.metadata()
        .get_u64(&format!("{arch}.{key}"))
        .unwrap()
        .unwrap_or_else(|| panic!("{arch}.{key} missing"))
}

fn vocab_size(f: &GgufFile) -> usize {
    f.metadata()
        .get_array("tokenizer.ggml.tokens")
        .unwrap()
        .unwrap()
        .items
        .len()
}

fn check_all_tensors_readable(f: &GgufFile) {
    let mut total = 0u64;
    for t in f.tensors() {
        let data = f.tensor_data(t);
        assert_eq!(data.len() as u64, t.info.n_bytes);
        total += t.info.n_bytes;
    }
    assert!(total < f.file_size());
}

#[test]
fn qwen2_header_and_tensors() {
    let Some(path) = require_model(QWEN) else {
        return;
    };
    let f = GgufFile::open(path).unwrap();
    assert_eq!(f.architecture(), Some("qwen2"));
    assert_eq!(f.tensors().len(), 291);
    assert_eq!(hp(&f, "block_count"), 24);
    assert_eq!(hp(&f, "embedding_length"), 896);
    assert_eq!(hp(&f, "attention.head_count"), 14);
    assert_eq!(hp(&f, "attention.head_count_kv"), 2);
    assert_eq!(vocab_size(&f), 151_936);
    assert!(
        f.tensor("output.weight").is_some(),
        "separate output weight"
    );
    let types: std::collections::BTreeSet<_> = f
        .tensors()
        .iter()
        .map(|t| t.info.ggml_type.name())
        .collect();
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_0,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::F32,
    ] {
        assert!(types.contains(ty.name()), "{ty} missing from {types:?}");
    }
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.info.shape, vec![896, 151_936]);
    check_all_tensors_readable(&f);
}

#[test]
fn llama_smollm2_header_and_tensors() {
    let Some(path) = require_model(SMOLLM) else {
        return;
    };
    let f = GgufFile::open(path).unwrap();
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.tensors().len(), 272);
    assert_eq!(hp(&f, "block_count"), 30);
    assert_eq!(hp(&f, "embedding_length"), 576);
    assert_eq!(hp(&f, "attention.head_count"), 9);
    assert_eq!(hp(&f, "attention.head_count_kv"), 3);
    assert_eq!(vocab_size(&f), 49_152);
    assert!(f.tensor("output.weight").is_none(), "tied embeddings");
    check_all_tensors_readable(&f);
}
