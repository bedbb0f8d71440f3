//! SentencePiece tokenization of Gemma 3 against llama.cpp's output.

mod common;

use std::time::Instant;

use common::{first_difference, golden, ids, open_model};
use minfer_text::Tokenizer;

fn tokenizer() -> Option<Tokenizer> {
    let f = open_model(minfer_testutil::GEMMA3)?;
    let start = Instant::now();
    let t = Tokenizer::from_gguf(f.metadata()).expect("tokenizer loads");
    eprintln!(
        "gemma3: tokenizer built in {:.0} ms ({} tokens)",
        start.elapsed().as_secs_f64() * 1e3,
        t.n_vocab()
    );
    for w in t.warnings() {
        eprintln!("gemma3: warning: {w}");
    }
    Some(t)
}

fn explain(t: &Tokenizer, got: &[u32], want: &[u32]) -> String {
    let show = |ids: &[u32]| -> Vec<String> {
        ids.iter()
            .map(|&id| format!("{id}:{:?}", t.token_text(id)))
            .collect()
    };
    format!("\n  got:  {:?}\n  want: {:?}", show(got), show(want))
}

#[test]
fn golden_tokenization_matches_llama_cpp() {
    let Some(t) = tokenizer() else { return };
    assert_eq!(t.model_name(), "llama");
    let g = golden("tokenize-gemma3.json");
    let mut failures = Vec::new();
    let cases = g["cases"].as_array().expect("cases");
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want = ids(&case["ids"]);
        let got = t.encode(text, true, true);
        if let Some(diff) = first_difference(&got, &want) {
            failures.push(format!("{text:?}: {diff}{}", explain(&t, &got, &want)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("gemma3: {} golden strings identical", cases.len());
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
            explain(&t, &got, &want)
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
fn tokenizing_eleven_kilobytes_is_fast() {
    let Some(t) = tokenizer() else { return };
    let text = std::fs::read_to_string(minfer_testutil::golden_dir().join("apache-2.0.txt"))
        .expect("apache-2.0.txt");
    let _ = t.encode(&text, true, true);
    let start = Instant::now();
    let ids = t.encode(&text, true, true);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "gemma3: {} bytes -> {} tokens in {ms:.1} ms",
        text.len(),
        ids.len()
    );
    assert_eq!(t.decode(&ids, false), text.as_bytes());
    assert!(ms < 100.0, "{ms:.1} ms");
}
