//! Compares greedy decoding with a recorded llama.cpp run
//! (`golden/greedy-*.json`) under the golden README's rule, and writes our
//! own top-5 logits per step as JSON for side-by-side study.
//!
//! Usage: `cargo run --release -p minfer-engine --example golden_compare --
//! MODEL.gguf GOLDEN.json [OUT.json]`. Every step feeds llama.cpp's token
//! (teacher forcing), so one early disagreement does not hide later ones.

use std::sync::Arc;

use minfer_engine::{Engine, EngineConfig};
use minfer_models::Model;

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u32)
                .collect()
        })
        .unwrap_or_default()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        anyhow::bail!("usage: golden_compare MODEL.gguf GOLDEN.json [OUT.json]");
    }
    let model = Arc::new(Model::open(std::path::Path::new(&args[1]))?);
    let golden: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[2])?)?;
    let n_threads = std::env::var("THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let cfg = EngineConfig {
        n_ctx: 4096,
        n_threads,
        ..EngineConfig::default()
    };
    let mut eng = Engine::new(Arc::clone(&model), cfg)?;
    let mut out = serde_json::Map::new();
    let (mut all_err, mut n_err) = (0f64, 0usize);
    for case in golden["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or("?");
        let prompt = ids(&case["prompt_ids"]);
        let greedy = ids(&case["greedy_ids"]);
        let tops = case["top_logits"].as_array().cloned().unwrap_or_default();
        eng.reset();
        let mut logits = eng.eval(&prompt, false)?.to_vec();
        let mut ours = Vec::new();
        let (mut matched, mut stop, mut max_err) = (0usize, String::from("all"), 0f64);
        let mut stopped = false;
        for (step, &want) in greedy.iter().enumerate() {
            let mut idx: Vec<usize> = (0..logits.len()).collect();
            idx.select_nth_unstable_by(5, |&a, &b| logits[b].total_cmp(&logits[a]));
            idx.truncate(5);
            idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
            ours.push(
                idx.iter()
                    .map(|&i| serde_json::json!([i, logits[i]]))
                    .collect::<Vec<_>>(),
            );
            let top: Vec<(usize, f64)> = tops[step]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    (
                        p[0].as_u64().unwrap_or(0) as usize,
                        p[1].as_f64().unwrap_or(0.0),
                    )
                })
                .collect();
            for &(id, l) in &top {
                all_err += (f64::from(logits[id]) - l).abs();
                n_err += 1;
            }
            let err = (f64::from(logits[top[0].0]) - top[0].1).abs();
            max_err = max_err.max(err);
            if !stopped {
                if top[0].1 - top[1].1 < 0.05 {
                    stop = format!("near tie at {step}");
                    stopped = true;
                } else if err > 0.1 {
                    stop = format!("logit error {err:.3} at {step}");
                    stopped = true;
                } else if idx[0] != top[0].0 {
                    stop = format!("argmax differs at {step}");
                    stopped = true;
                } else {
                    matched += 1;
                }
            }
            if step + 1 < greedy.len() {
                logits = eng.eval(&[want], false)?.to_vec();
            }
        }
        println!(
            "{name}: {matched}/{} steps under the rule (stop: {stop}); max |Δ| top-1 {max_err:.4}",
            greedy.len()
        );
        out.insert(name.to_string(), serde_json::Value::from(ours));
    }
    println!("mean |Δ| over top-5: {:.4}", all_err / n_err.max(1) as f64);
    if let Some(path) = args.get(3) {
        std::fs::write(path, serde_json::to_string(&out)?)?;
    }
    Ok(())
}
