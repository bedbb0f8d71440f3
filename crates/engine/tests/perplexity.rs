//! Perplexity on the Apache-2.0 license text against llama-perplexity's
//! numbers (`golden/perplexity.json`, `-c 512 -b 512`).

mod common;

use std::time::Instant;

use common::{engine, golden, load};
use minfer_engine::perplexity;
use minfer_text::Tokenizer;

/// Largest relative difference allowed from llama.cpp's PPL. The golden
/// numbers are not reproducible to better than about half a percent: a
/// build of the same llama.cpp commit, run on this machine type with the
/// same settings, measures 3.0945 for Qwen2.5-0.5B (golden 3.08, 0.47 %
/// away) and 15.9411 for SmolLM2 (golden 15.9289). Rounding differences
/// are amplified by the 8-bit activation quantization before every matmul
/// (see `greedy_golden.rs`). One percent accepts that spread; a defect in
/// the forward pass moves PPL by far more.
const REL_TOL: f64 = 0.01;

fn check(model_file: &str) {
    let Some(model) = load(model_file) else {
        return;
    };
    let g = golden("perplexity.json");
    let want = g["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["model"].as_str() == Some(model_file))
        .expect("golden result for the model");
    let (want_ppl, want_stderr) = (
        want["ppl"].as_f64().expect("ppl"),
        want["stderr"].as_f64().expect("stderr"),
    );
    let text = std::fs::read_to_string(minfer_testutil::golden_dir().join("apache-2.0.txt"))
        .expect("golden text");
    let tok = Tokenizer::from_gguf(model.file().metadata()).expect("tokenizer");
    // llama-perplexity tokenizes with the model's special-token rules and
    // without parsing special tokens in the text.
    let tokens = tok.encode(&text, true, false);
    let bos = if tok.add_bos() { tok.bos() } else { None };
    let mut eng = engine(&model, 512);
    let t = Instant::now();
    let r = perplexity(&mut eng, &tokens, 512, bos, |c, n, p| {
        println!("{model_file}: chunk {}/{n}: running ppl {p:.4}", c + 1);
    })
    .expect("perplexity");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{model_file}: {} tokens, {} chunks, PPL {:.4} +/- {:.5} (llama.cpp {want_ppl} +/- {want_stderr}), \
         {:.1} tokens/s",
        tokens.len(),
        r.chunks,
        r.ppl,
        r.stderr,
        (r.chunks * 512) as f64 / secs
    );
    assert_eq!(r.chunks as u64, want["chunks"].as_u64().expect("chunks"));
    let rel = (r.ppl - want_ppl).abs() / want_ppl;
    assert!(
        rel <= REL_TOL,
        "PPL {:.4} differs from llama.cpp's {want_ppl} by {:.2} %",
        r.ppl,
        rel * 100.0
    );
}

#[test]
fn perplexity_matches_llama_cpp_qwen2_5() {
    check(minfer_testutil::QWEN);
}

#[test]
fn perplexity_matches_llama_cpp_smollm2() {
    check(minfer_testutil::SMOLLM);
}

#[test]
fn perplexity_matches_llama_cpp_gemma3() {
    check(minfer_testutil::GEMMA3);
}

#[test]
fn perplexity_matches_llama_cpp_qwen2_5_1_5b() {
    check(minfer_testutil::QWEN_1_5B);
}
