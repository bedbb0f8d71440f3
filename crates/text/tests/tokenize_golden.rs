//! Tokenization against llama.cpp's output on the real models.

mod common;

use std::time::Instant;

use common::{first_difference, golden, ids, open_model, MODELS};
use minfer_text::Tokenizer;

fn tokenizer(file: &str) -> Option<Tokenizer> {
    let f = open_model(file)?;
    let start = Instant::now();
    let t = Tokenizer::from_gguf(f.metadata()).expect("tokenizer loads");
    eprintln!(
        "{file}: tokenizer built in {:.0} ms ({} tokens, {} merges)",
        start.elapsed().as_secs_f64() * 1e3,
        t.n_vocab(),
        t.n_merges()
    );
    // llama.cpp warns too: Qwen's plain `</s>` token is promoted to an
    // end-of-generation control token.
    for w in t.warnings() {
        eprintln!("{file}: warning: {w}");
    }
    Some(t)
}

/// Shows what a mismatching case looks like, token by token.
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
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let g = golden(&format!("tokenize-{name}.json"));
        let mut failures = Vec::new();
        let cases = g["cases"].as_array().expect("cases");
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let want = ids(&case["ids"]);
            let got = t.encode(text, true, true);
            if let Some(diff) = first_difference(&got, &want) {
                failures.push(format!(
                    "{name} {text:?}: {diff}{}",
                    explain(&t, &got, &want)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!("{name}: {} golden strings identical", cases.len());
    }
}

#[test]
fn greedy_prompts_tokenize_like_llama_cpp() {
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let g = golden(&format!("greedy-{name}.json"));
        let mut failures = Vec::new();
        for case in g["cases"].as_array().expect("cases") {
            let prompt = case["prompt"].as_str().expect("prompt");
            let want = ids(&case["prompt_ids"]);
            let got = t.encode(prompt, true, true);
            if let Some(diff) = first_difference(&got, &want) {
                failures.push(format!("{name} {prompt:?}: {diff}"));
            }
            // A greedy run shorter than its budget stopped on an
            // end-of-generation token.
            let greedy = ids(&case["greedy_ids"]);
            if let Some(&last) = greedy.last().filter(|_| greedy.len() < 64) {
                assert!(
                    t.is_eog(last),
                    "{name}: run stopped on {last}, not an EOG token"
                );
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn decode_inverts_encode() {
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let g = golden(&format!("tokenize-{name}.json"));
        for case in g["cases"].as_array().expect("cases") {
            let text = case["text"].as_str().expect("text");
            // Neither model adds BOS/EOS, so `add_special` adds nothing and
            // special-token texts decode back to themselves.
            let ids = t.encode(text, true, true);
            assert_eq!(t.decode(&ids, true), text.as_bytes(), "{name} {text:?}");
            let plain = t.encode(text, false, false);
            assert_eq!(t.decode(&plain, false), text.as_bytes(), "{name} {text:?}");
        }
    }
}

#[test]
fn control_tokens_need_parse_special() {
    let Some(t) = tokenizer(minfer_testutil::QWEN) else {
        return;
    };
    let im_start = t.token_id("<|im_start|>").expect("<|im_start|> exists");
    assert_eq!(t.encode("<|im_start|>", false, true), [im_start]);
    let plain = t.encode("<|im_start|>", false, false);
    assert!(plain.len() > 1 && !plain.contains(&im_start), "{plain:?}");
    // Rendering: control tokens show only when asked for.
    assert_eq!(t.decode_token(im_start), b"<|im_start|>");
    assert_eq!(t.token_piece(im_start, false), b"");
    assert_eq!(t.decode_token(u32::MAX), b"");
    assert_eq!(t.token_text(u32::MAX), "");
}

#[test]
fn end_of_generation_sets() {
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let eog: Vec<String> = t
            .eog_ids()
            .iter()
            .map(|&id| format!("{id} {:?}", t.token_text(id)))
            .collect();
        eprintln!(
            "{name}: bos {:?} eos {:?} eot {:?} add_bos {} add_eos {} pre {}; EOG = {eog:?}",
            t.bos(),
            t.eos(),
            t.eot(),
            t.add_bos(),
            t.add_eos(),
            t.pre_tokenizer()
        );
        let eos = t.eos().expect("eos");
        assert!(t.is_eog(eos));
        for text in ["<|im_end|>", "<|endoftext|>"] {
            if name == "qwen2.5" {
                let id = t.token_id(text).expect("token exists");
                assert!(t.is_eog(id), "{name}: {text} not EOG");
            }
        }
        if name == "qwen2.5" {
            assert_eq!(t.eos(), t.token_id("<|im_end|>"));
            assert_eq!(t.pre_tokenizer(), "qwen2");
        } else {
            assert_eq!(t.pre_tokenizer(), "smollm");
        }
        assert!(!t.add_bos() && !t.add_eos());
    }
}

#[test]
fn tokenizing_eleven_kilobytes_is_fast() {
    let text = std::fs::read_to_string(minfer_testutil::golden_dir().join("apache-2.0.txt"))
        .expect("apache-2.0.txt");
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let _ = t.encode(&text, true, true); // warm the Unicode tables
        let start = Instant::now();
        let ids = t.encode(&text, true, true);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        eprintln!(
            "{name}: {} bytes -> {} tokens in {ms:.1} ms",
            text.len(),
            ids.len()
        );
        assert_eq!(t.decode(&ids, true), text.as_bytes());
        assert!(ms < 100.0, "{name}: {ms:.1} ms");
    }
}

/// Extra strings (random mixes of scripts, whitespace, contractions,
/// special-token texts, Unicode 16 characters) with the ids llama.cpp gave
/// at the golden commit, for both flag settings.
#[test]
fn extra_strings_match_llama_cpp() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama-cpp-extra.json");
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read extra cases"))
            .expect("parse extra cases");
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let mut failures = Vec::new();
        let cases = g["cases"].as_array().expect("cases");
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let add = case["add_special"].as_bool().expect("flag");
            let parse = case["parse_special"].as_bool().expect("flag");
            let want = ids(&case[name]);
            let got = t.encode(text, add, parse);
            if let Some(diff) = first_difference(&got, &want) {
                failures.push(format!(
                    "{name} {text:?} (add_special {add}, parse_special {parse}): {diff}{}",
                    explain(&t, &got, &want)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!("{name}: {} extra strings identical", cases.len());
    }
}
