//! SentencePiece tokenization of Gemma 3 against llama.cpp's output.

mod common;

use common::{first_difference, golden, ids};
use minfer_text::Tokenizer;

fn tokenizer() -> Option<Tokenizer> {
    common::tokenizer(minfer_testutil::GEMMA3)
}

#[test]
fn golden_tokenization_matches_llama_cpp() {
    let Some(t) = tokenizer() else { return };
    assert_eq!(t.model_name(), "llama");
    let (failures, n) = common::golden_failures(&t, "gemma3", "tokenize-gemma3.json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("gemma3: {n} golden strings identical");
}

#[test]
fn greedy_prompts_tokenize_like_llama_cpp() {
    let Some(t) = tokenizer() else { return };
    let g = golden("greedy-gemma3.json");
    for case in g["cases"].as_array().expect("cases") {
        let prompt = case["prompt"].as_str().expect("prompt");
        let want = ids(&case["prompt_ids"]);
        let got = t.encode(prompt, true, true);
        assert!(
            first_difference(&got, &want).is_none(),
            "{prompt:?}{}",
            common::explain(&t, &got, &want)
        );
    }
}

#[test]
fn decode_inverts_encode() {
    let Some(t) = tokenizer() else { return };
    let g = golden("tokenize-gemma3.json");
    for case in g["cases"].as_array().expect("cases") {
        let text = case["text"].as_str().expect("text");
        // BOS is a control token: it renders as nothing without `special`.
        let ids = t.encode(text, true, true);
        assert_eq!(t.decode(&ids, false), text.as_bytes(), "{text:?}");
        let plain = t.encode(text, false, false);
        assert_eq!(t.decode(&plain, false), text.as_bytes(), "{text:?}");
    }
}

#[test]
fn special_ids_and_end_of_generation() {
    let Some(t) = tokenizer() else { return };
    assert_eq!(t.bos(), t.token_id("<bos>"));
    assert_eq!(t.eos(), t.token_id("<eos>"));
    assert!(t.add_bos() && !t.add_eos());
    let end_of_turn = t.token_id("<end_of_turn>").expect("<end_of_turn> exists");
    assert!(t.is_eog(end_of_turn) && t.is_eog(t.eos().expect("eos")));
    // Byte fallback: a character with no token of its own becomes its
    // UTF-8 bytes, each through its `<0xXX>` token.
    let bytes = t.encode("\u{10FFFD}", false, false);
    let texts: Vec<&str> = bytes.iter().map(|&id| t.token_text(id)).collect();
    assert_eq!(texts, ["<0xF4>", "<0x8F>", "<0xBF>", "<0xBD>"]);
    assert_eq!(t.decode(&bytes, false), "\u{10FFFD}".as_bytes());
}

#[test]
fn eleven_kilobytes_round_trip() {
    let Some(t) = tokenizer() else { return };
    common::long_text_round_trip(&t, "gemma3", false);
}
