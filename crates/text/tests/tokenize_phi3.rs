//! SentencePiece tokenization with Phi-3's vocabulary against llama.cpp.
//!
//! The vocabulary is llama.cpp's own vocab-only test file
//! (`tests/models/ggml-vocab-phi-3.gguf`, with its `.inp`/`.out` test pair),
//! carried by the repository, so these tests never skip.

mod common;

use common::{explain, first_difference, golden_failures};
use minfer_gguf::GgufFile;
use minfer_text::Tokenizer;

const VOCAB: &str = "ggml-vocab-phi-3.gguf";

/// The separator line of llama.cpp's `.inp` files.
const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn tokenizer() -> Tokenizer {
    let path = minfer_testutil::repo_model(VOCAB);
    let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let t = Tokenizer::from_gguf(f.metadata()).expect("tokenizer loads");
    for w in t.warnings() {
        eprintln!("{VOCAB}: warning: {w}");
    }
    t
}

/// llama.cpp's test pair, parsed as `read_tests` in
/// `tests/test-tokenizer-0.cpp` does: inputs split at the separator line
/// (no empty input after the last one), one line of space-separated ids
/// per input.
fn test_pair() -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let path = minfer_testutil::repo_model(&format!("{VOCAB}.{ext}"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    };
    let (inp, out) = (read("inp"), read("out"));
    let mut texts: Vec<&str> = inp.split(SEPARATOR).collect();
    if inp.ends_with(SEPARATOR) {
        texts.pop();
    }
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(texts.len(), lines.len(), "inputs and output lines");
    texts
        .iter()
        .zip(lines)
        .map(|(t, line)| {
            let ids = line
                .split_whitespace()
                .map(|x| x.parse().expect("id"))
                .collect();
            (t.to_string(), ids)
        })
        .collect()
}

#[test]
fn vocabulary_is_phi3_spm() {
    let t = tokenizer();
    assert_eq!(t.model_name(), "llama");
    assert_eq!(t.n_vocab(), 32064);
    assert_eq!(t.bos(), t.token_id("<s>"));
    assert_eq!(t.eos(), t.token_id("<|endoftext|>"));
    assert!(t.add_bos() && !t.add_eos());
    for text in ["<|end|>", "<|endoftext|>", "</s>"] {
        let id = t.token_id(text).expect("token exists");
        assert!(t.is_eog(id), "{text} not EOG");
    }
}

/// llama.cpp's own cases (`add_special = false`, `parse_special = false`,
/// as test-tokenizer-0 tokenizes them).
#[test]
fn llama_cpp_test_pair_matches() {
    let t = tokenizer();
    let pair = test_pair();
    assert!(pair.len() >= 40, "{} cases", pair.len());
    let failures: Vec<String> = pair
        .iter()
        .filter_map(|(text, want)| {
            let got = t.encode(text, false, false);
            first_difference(&got, want)
                .map(|diff| format!("{text:?}: {diff}{}", explain(&t, &got, want)))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{VOCAB}: {} test-pair cases identical", pair.len());
}

/// The corpus every tokenizer is checked on, with BOS and special tokens.
#[test]
fn golden_corpus_matches_llama_cpp() {
    let t = tokenizer();
    let (failures, n) = golden_failures(&t, "phi3", "tokenize-phi3.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("phi3: {n} golden strings identical");
}

/// Phi-3's turn markers: llama.cpp swallows the whitespace after every
/// special token except `<unk>`, `<s>` and `<|endoftext|>` for a model
/// named Phi-3 (its RSTRIP attribute).
#[test]
fn special_token_strings_match_llama_cpp() {
    let t = tokenizer();
    let (failures, n) = golden_failures(&t, "phi3", "tokenize-phi3-special.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("phi3: {n} special-token strings identical");
}

#[test]
fn decode_inverts_encode_without_specials() {
    let t = tokenizer();
    for (text, _) in test_pair() {
        let ids = t.encode(&text, false, false);
        // SentencePiece adds a space in front; decoding keeps it.
        let mut want = b" ".to_vec();
        want.extend_from_slice(text.as_bytes());
        let got = t.decode(&ids, false);
        assert!(
            got == want || (text.is_empty() && got.is_empty()),
            "{text:?} decoded to {:?}",
            String::from_utf8_lossy(&got)
        );
    }
}
