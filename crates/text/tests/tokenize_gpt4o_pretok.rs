//! llama.cpp's `gpt-4o` pre-tokenizer (gpt-oss's o200k vocabulary), judged
//! by llama.cpp's own ids. The vocabulary is the random-weight fixture's
//! (SmolLM2's byte-level BPE) relabelled `tokenizer.ggml.pre = gpt-4o` by
//! `scripts/make-pretok-golden.py`, which also wrote the golden ids: the
//! pre-tokenizer does not depend on the vocabulary, and any difference in
//! where words are cut shows up as different merges.

mod common;

use minfer_gguf::GgufFile;

const VOCAB: &str = "gpt4o-pretok-vocab.gguf";
const FIXTURE: &str = "qwen3-tiny-q8_0.gguf";

fn open(file: &str) -> GgufFile {
    let path = minfer_testutil::repo_model(file);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

#[test]
fn vocab_is_the_fixture_with_only_the_pre_key_changed() {
    let (vocab, fixture) = (open(VOCAB), open(FIXTURE));
    let (v, f) = (vocab.metadata(), fixture.metadata());
    assert_eq!(v.get_str("tokenizer.ggml.pre").unwrap(), Some("gpt-4o"));
    assert_eq!(f.get_str("tokenizer.ggml.pre").unwrap(), Some("smollm"));
    assert_eq!(v.len(), f.len());
    for (key, value) in f.iter().filter(|(k, _)| *k != "tokenizer.ggml.pre") {
        assert_eq!(v.get(key), Some(value), "{key}");
    }
}

#[test]
fn gpt4o_pretok_matches_llama_cpp() {
    let vocab = open(VOCAB);
    let t = minfer_text::Tokenizer::from_gguf(vocab.metadata()).expect("tokenizer loads");
    // An unknown name would fall back to `default` with a warning.
    assert!(
        t.warnings().iter().all(|w| !w.contains("pre-tokenizer")),
        "{:?}",
        t.warnings()
    );
    let (failures, n) = common::golden_failures(&t, "gpt-4o", "tokenize-gpt4o-pretok.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(n > 50, "only {n} golden strings");
    eprintln!("gpt-4o: {n} golden strings identical");
}
