//! Tokenization against llama.cpp's output on the real models.

mod common;

use common::{explain, first_difference, golden, ids, tokenizer, MODELS};

#[test]
fn golden_tokenization_matches_llama_cpp() {
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        let (failures, n) = common::golden_failures(&t, name, &format!("tokenize-{name}.json"));
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!("{name}: {n} golden strings identical");
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
fn eleven_kilobytes_round_trip() {
    for (file, name) in MODELS {
        let Some(t) = tokenizer(file) else { continue };
        common::long_text_round_trip(&t, name, true);
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
