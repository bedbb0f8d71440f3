//! Step time by rows of one sequence, every row's logits returned (the
//! shape of a speculative check), medians over rounds.
//!
//! `cargo run --release -p minfer-engine --example rows_cost -- MODEL.gguf [THREADS] [MAX_ROWS]`

use std::time::Instant;

use minfer_engine::{BatchEntry, EngineConfig, LoadedModel};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("a model file");
    let threads: usize = args.get(2).map_or(2, |s| s.parse().expect("threads"));
    let max_rows: usize = args.get(3).map_or(9, |s| s.parse().expect("rows"));
    let m = LoadedModel::open(std::path::Path::new(path)).expect("model");
    let cfg = EngineConfig {
        n_ctx: 2048,
        n_threads: threads,
        ..EngineConfig::default()
    };
    let mut rt = m.runtime(cfg).expect("runtime");
    let seq = rt.new_sequence().expect("sequence");
    let prompt: Vec<u32> = (0..256).map(|i| 1000 + i).collect();
    rt.step(&[BatchEntry::last(seq, &prompt)]).expect("prefill");
    let base = rt.n_past(seq).unwrap();
    let rounds = 7;
    let mut times = vec![Vec::new(); max_rows + 1];
    let mut last = vec![Vec::new(); max_rows + 1];
    for _ in 0..rounds + 1 {
        for r in 1..=max_rows {
            let toks: Vec<u32> = (0..r as u32).map(|i| 2000 + i).collect();
            let t = Instant::now();
            rt.step(&[BatchEntry::all(seq, &toks)]).expect("step");
            times[r].push(t.elapsed().as_secs_f64());
            rt.rollback(seq, base).unwrap();
            let t = Instant::now();
            rt.step(&[BatchEntry::last(seq, &toks)]).expect("step");
            last[r].push(t.elapsed().as_secs_f64());
            rt.rollback(seq, base).unwrap();
        }
    }
    let t1 = {
        let mut v = times[1][1..].to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let median = |v: &[f64]| {
        let mut v = v[1..].to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("rows  all_rows_ms  ratio_to_1  last_row_ms");
    for r in 1..=max_rows {
        let med = median(&times[r]);
        println!(
            "{r:4}  {:11.2}  {:10.2}  {:11.2}",
            med * 1e3,
            med / t1,
            median(&last[r]) * 1e3
        );
    }
}
