//! `minfer bench --parallel`: batched decoding with llama-batched-bench's
//! conventions. For each N, N sequences each prefill `-p` tokens (all of
//! them in shared steps), then decode `-n` tokens each in lock-step, one
//! batch of N rows per step, so every weight byte read serves N tokens.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use minfer_engine::{BatchEntry, LoadedModel, Runtime, SeqId, SyntheticTokens};

use crate::runtime::RuntimeArgs;

/// What to measure.
pub struct Opts<'a> {
    /// Sequence counts to try.
    pub npl: &'a [usize],
    /// Prompt tokens per sequence.
    pub n_prompt: usize,
    /// Generated tokens per sequence.
    pub n_gen: usize,
    /// Repetitions of each N (the figures are means).
    pub reps: usize,
    /// md, csv or json.
    pub output: &'a str,
}

/// One N's figures.
struct Row {
    n_seq: usize,
    n_kv: usize,
    t_pp: f64,
    t_tg: f64,
}

impl Row {
    fn s_pp(&self, n_prompt: usize) -> f64 {
        rate(self.n_seq * n_prompt, self.t_pp)
    }
    fn s_tg(&self, n_gen: usize) -> f64 {
        rate(self.n_seq * n_gen, self.t_tg)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// The model's file name, for tables.
pub fn file_name(loaded: &LoadedModel) -> String {
    loaded
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Prefills every sequence's prompt (as many whole prompts per step as fit
/// in a micro-batch), then decodes `n_gen` tokens each in lock-step.
/// Returns (prefill seconds, decode seconds).
fn measure(rt: &mut Runtime, n_seq: usize, opts: &Opts) -> Result<(f64, f64)> {
    rt.clear();
    let n_vocab = rt.n_vocab();
    let seqs: Vec<SeqId> = (0..n_seq)
        .map(|_| rt.new_sequence())
        .collect::<Result<_, _>>()?;
    let prompts: Vec<Vec<u32>> = (0..n_seq)
        .map(|i| {
            SyntheticTokens::new(0x9e37_79b9 + i as u64, n_vocab)
                .take(opts.n_prompt.max(1))
                .collect()
        })
        .collect();
    let t0 = Instant::now();
    let entries: Vec<BatchEntry> = seqs
        .iter()
        .zip(&prompts)
        .map(|(&s, p)| BatchEntry::last(s, p))
        .collect();
    rt.step(&entries)?;
    let t_pp = t0.elapsed().as_secs_f64();
    let gen: Vec<Vec<u32>> = (0..n_seq)
        .map(|i| {
            SyntheticTokens::new(0x51ed_2701 + i as u64, n_vocab)
                .take(opts.n_gen)
                .collect()
        })
        .collect();
    let t1 = Instant::now();
    for step in 0..opts.n_gen {
        let entries: Vec<BatchEntry> = seqs
            .iter()
            .zip(&gen)
            .map(|(&s, g)| BatchEntry::last(s, &g[step..step + 1]))
            .collect();
        rt.step(&entries)?;
    }
    Ok((t_pp, t1.elapsed().as_secs_f64()))
}

/// Runs the batched benchmark and prints its table.
pub fn run(loaded: &LoadedModel, args: &RuntimeArgs, opts: &Opts) -> Result<()> {
    anyhow::ensure!(
        opts.npl.iter().all(|&n| (1..=64).contains(&n)),
        "--parallel takes sequence counts from 1 to 64"
    );
    let max_n = opts.npl.iter().copied().max().unwrap_or(1);
    let mut cfg = args.engine_config()?;
    let need = max_n * (opts.n_prompt.max(1) + opts.n_gen);
    cfg.n_ctx = cfg.n_ctx.max(need as u32);
    cfg.n_batch = cfg.n_batch.max(max_n * opts.n_prompt.max(1));
    let threads = cfg.n_threads;
    let mut rt = loaded.runtime(cfg)?;
    // Warm-up, not measured: builds graphs and faults the weights in.
    measure(
        &mut rt,
        1,
        &Opts {
            n_gen: opts.n_gen.min(2),
            ..*opts
        },
    )?;
    let mut rows = Vec::new();
    for &n in opts.npl {
        let (mut t_pp, mut t_tg) = (0.0, 0.0);
        for _ in 0..opts.reps {
            let (a, b) = measure(&mut rt, n, opts)?;
            t_pp += a;
            t_tg += b;
        }
        let reps = opts.reps as f64;
        rows.push(Row {
            n_seq: n,
            n_kv: n * (opts.n_prompt.max(1) + opts.n_gen),
            t_pp: t_pp / reps,
            t_tg: t_tg / reps,
        });
    }
    print(loaded, threads, opts, &rows)
}

/// A row's measured columns as the md and csv tables show them: B, N_KV,
/// T_PP, S_PP, T_TG, S_TG and S_TG per sequence.
fn columns(r: &Row, pp: usize, tg: usize) -> [String; 7] {
    [
        r.n_seq.to_string(),
        r.n_kv.to_string(),
        format!("{:.3}", r.t_pp),
        format!("{:.2}", r.s_pp(pp)),
        format!("{:.3}", r.t_tg),
        format!("{:.2}", r.s_tg(tg)),
        format!("{:.2}", r.s_tg(tg) / r.n_seq as f64),
    ]
}

fn print(loaded: &LoadedModel, threads: usize, opts: &Opts, rows: &[Row]) -> Result<()> {
    let name = file_name(loaded);
    let base = rows
        .iter()
        .find(|r| r.n_seq == 1)
        .map(|r| r.s_tg(opts.n_gen));
    let (pp, tg) = (opts.n_prompt, opts.n_gen);
    let mut out = std::io::stdout().lock();
    match opts.output {
        "json" => {
            let v: Vec<_> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "model": name, "threads": threads, "pp": pp, "tg": tg, "pl": r.n_seq,
                        "n_kv": r.n_kv, "t_pp": r.t_pp, "speed_pp": r.s_pp(pp),
                        "t_tg": r.t_tg, "speed_tg": r.s_tg(tg),
                        "speed_tg_per_seq": r.s_tg(tg) / r.n_seq as f64,
                        "speedup_tg": base.map(|b| r.s_tg(tg) / b),
                    })
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
        "csv" => {
            writeln!(
                out,
                "model,threads,PP,TG,B,N_KV,T_PP,S_PP,T_TG,S_TG,S_TG_per_seq,speedup"
            )?;
            for r in rows {
                let speedup = base.map_or(0.0, |b| r.s_tg(tg) / b);
                let cols = columns(r, pp, tg).join(",");
                writeln!(out, "{name},{threads},{pp},{tg},{cols},{speedup:.2}")?;
            }
        }
        _ => {
            writeln!(out, "{name}, {threads} threads")?;
            writeln!(out)?;
            writeln!(
                out,
                "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | per seq t/s | vs B=1 |"
            )?;
            writeln!(
                out,
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            )?;
            for r in rows {
                let speedup = base.map_or("-".to_string(), |b| format!("{:.2}×", r.s_tg(tg) / b));
                let cols = columns(r, pp, tg).join(" | ");
                writeln!(out, "| {pp} | {tg} | {cols} | {speedup} |")?;
            }
        }
    }
    Ok(())
}
