//! What sampling costs per token on a real vocabulary: the grammar mask
//! (JSON) and the sampler chain, medians over many tokens.
//!
//! ```sh
//! cargo run --release -p minfer-engine --example sampling_cost -- \
//!     ~/.cache/minfer/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
//! ```

use std::time::Instant;

use minfer_engine::{token_vocab, Constraint, SamplingParams, Store, StoreConfig};
use minfer_sampler::Sampler;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A JSON document the mask is walked along, token by token.
const DOC: &str = r#"{"name": "Ada Lovelace", "born": 1815, "fields": ["mathematics", "computing"], "notes": {"first_program": true, "machine": "Analytical Engine", "year": 1843}, "quote": "That brain of mine is something more than merely mortal; as time will show."}"#;

fn median_us(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2] * 1e6
}

fn main() -> anyhow::Result<()> {
    let spec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "qwen2.5-coder-0.5b-instruct".into());
    let store = Store::new(StoreConfig::from_env());
    let tok = minfer_engine::load_tokenizer(&store, &spec)?;
    let n_vocab = tok.n_vocab();
    let t = Instant::now();
    let vocab = token_vocab(&tok)?;
    let vocab_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut rng = ChaCha8Rng::seed_from_u64(1);

    // The mask along the document's own tokens, for the JSON-object
    // constraint and for llama.cpp's json.gbnf.
    let ids = tok.encode(DOC, false, false);
    let gbnf = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/grammars/json.gbnf"),
    )?;
    let mut walks = Vec::new();
    for (name, c) in [
        ("JSON object", Constraint::JsonObject),
        ("json.gbnf", Constraint::Gbnf(gbnf)),
    ] {
        let cfg = SamplingParams {
            constraint: Some(c),
            ..SamplingParams::default()
        };
        let t = Instant::now();
        let mut s = Sampler::with_vocab(cfg, &vocab)?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let (mut mask, mut chain_masked) = (Vec::new(), Vec::new());
        let mut history = Vec::new();
        for &id in &ids {
            let mut logits: Vec<f32> = (0..n_vocab).map(|_| rng.gen_range(-5.0..5.0)).collect();
            logits[id as usize] = 50.0;
            let t = Instant::now();
            s.prepare()?;
            mask.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let got = s.sample(&logits, &history)?;
            chain_masked.push(t.elapsed().as_secs_f64());
            anyhow::ensure!(
                got == id,
                "{name}: the grammar refused token {id} of the document"
            );
            history.push(id);
        }
        let mean = mask.iter().sum::<f64>() / mask.len() as f64 * 1e6;
        let max = mask.iter().copied().fold(0.0, f64::max) * 1e6;
        walks.push((
            name,
            compile_ms,
            median_us(mask),
            mean,
            max,
            median_us(chain_masked),
        ));
    }

    // The chain alone: llama.cpp's defaults, and with top-k off.
    let mut chain = |cfg: SamplingParams| -> anyhow::Result<f64> {
        let mut s = Sampler::with_vocab(cfg, &vocab)?;
        let mut times = Vec::new();
        let mut history: Vec<u32> = (0..64).map(|_| rng.gen_range(0..n_vocab as u32)).collect();
        for _ in 0..200 {
            let logits: Vec<f32> = (0..n_vocab)
                .map(|_| rng.gen_range(-5.0f32..5.0).powi(3))
                .collect();
            let t = Instant::now();
            let id = s.sample(&logits, &history)?;
            times.push(t.elapsed().as_secs_f64());
            history.push(id);
        }
        Ok(median_us(times))
    };
    let default_us = chain(SamplingParams::default())?;
    let penalties_us = chain(SamplingParams {
        repeat_penalty: 1.1,
        frequency_penalty: 0.1,
        presence_penalty: 0.1,
        dry_multiplier: 0.8,
        typical_p: 0.95,
        xtc_probability: 0.5,
        ..SamplingParams::default()
    })?;
    let no_top_k_us = chain(SamplingParams {
        top_k: 0,
        ..SamplingParams::default()
    })?;
    let greedy_us = chain(SamplingParams::greedy())?;

    println!("vocabulary: {n_vocab} tokens; sampler vocabulary built in {vocab_ms:.1} ms; document: {} tokens", ids.len());
    println!("| grammar | compile ms (first includes the token trie) | mask µs median | mean | max | chain with mask µs |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, compile, med, mean, max, chain) in walks {
        println!("| {name} | {compile:.1} | {med:.0} | {mean:.0} | {max:.0} | {chain:.0} |");
    }
    println!("| chain, per token (median) | µs |");
    println!("|---|---:|");
    println!("| llama.cpp defaults | {default_us:.0} |");
    println!("| + penalties, DRY, typical, XTC | {penalties_us:.0} |");
    println!("| top-k off | {no_top_k_us:.0} |");
    println!("| greedy | {greedy_us:.0} |");
    Ok(())
}
