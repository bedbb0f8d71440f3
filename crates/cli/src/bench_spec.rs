//! `minfer bench --draft/--lookup`: generation speed with and without
//! speculative decoding on a fixed prompt set, llama-bench's table style.
//!
//! Every prompt is answered greedily through the chat template, once per
//! method per round, the methods alternated so that a noisy machine slows
//! both alike; a warm-up round fills the prefix caches (so every measured
//! run decodes from a cached prompt) and builds the graphs. The speed is the
//! decode rate (tokens after the first over the time after it); medians are
//! reported, and the speed-up is the ratio of the medians. Each speculative
//! answer is checked against the plain one: they must be the same tokens.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use minfer_engine::{
    Event, GenerateConfig, GenerationStats, LoadedModel, PromptMode, SamplingParams, Scheduler,
    SpecStats, Store,
};

use crate::runtime::RuntimeArgs;
use crate::spec::SpecArgs;

/// The prompt set shipped with minfer (`bench/spec-prompts`).
const PROMPTS: [(&str, &str); 3] = [
    (
        "code-complete",
        include_str!("../../../bench/spec-prompts/code-complete.txt"),
    ),
    (
        "code-edit",
        include_str!("../../../bench/spec-prompts/code-edit.txt"),
    ),
    (
        "prose",
        include_str!("../../../bench/spec-prompts/prose.txt"),
    ),
];

/// What to run.
pub struct Opts<'a> {
    pub spec: &'a SpecArgs,
    pub runtime: &'a RuntimeArgs,
    pub n_gen: usize,
    pub reps: usize,
    pub output: &'a str,
    pub prompts_dir: Option<&'a Path>,
    /// Concurrent generations to measure aggregate throughput at (empty:
    /// one generation at a time, per prompt).
    pub parallel: &'a [usize],
}

/// One method's runs on one prompt.
#[derive(Default)]
struct Runs {
    rates: Vec<f64>,
    tokens: usize,
    spec: SpecStats,
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The prompts: the shipped set, or the `.txt` files of `dir` by name.
fn prompts(dir: Option<&Path>) -> Result<Vec<(String, String)>> {
    let Some(dir) = dir else {
        return Ok(PROMPTS
            .iter()
            .map(|(n, t)| (n.to_string(), t.trim().to_string()))
            .collect());
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "txt") {
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let name = p
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push((name, text.trim().to_string()));
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no .txt prompt files in {}", dir.display());
    }
    Ok(out)
}

/// Generates greedily until done; the stats.
fn answer(s: &mut Scheduler, prompt: &[u32], cfg: &GenerateConfig) -> Result<GenerationStats> {
    let id = s.submit(prompt, cfg)?;
    loop {
        s.step()?;
        while let Some(ev) = s.next_event(id) {
            if let Event::Done(st) = ev {
                return Ok(st);
            }
        }
    }
}

/// Runs the benchmark and prints the table.
pub fn run(store: &Store, loaded: &LoadedModel, o: &Opts) -> Result<()> {
    anyhow::ensure!(o.n_gen > 1, "-n must be at least 2 for a decode rate");
    let mut engine = o.runtime.engine_config()?;
    let prompts = prompts(o.prompts_dir)?;
    let ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|(_, text)| loaded.prompt(None, text, PromptMode::Chat, engine.n_ctx))
        .collect::<std::result::Result<_, _>>()?;
    let longest = ids.iter().map(Vec::len).max().unwrap_or(0);
    engine.n_ctx = engine.n_ctx.max((longest + o.n_gen + 8) as u32);
    let mut sched = loaded.scheduler(engine)?;
    let mut spec = o.spec.speculation(store, loaded, engine)?;
    let cfg = GenerateConfig {
        max_tokens: o.n_gen,
        sampler: SamplingParams::greedy(),
        ..GenerateConfig::default()
    };
    if !o.parallel.is_empty() {
        return run_parallel(loaded, o, &mut sched, spec, &ids, &cfg);
    }
    let mut plain: Vec<Runs> = prompts.iter().map(|_| Runs::default()).collect();
    let mut fast: Vec<Runs> = prompts.iter().map(|_| Runs::default()).collect();
    for round in 0..=o.reps {
        for (k, ids) in ids.iter().enumerate() {
            let a = answer(&mut sched, ids, &cfg)?;
            sched.set_speculation(spec.take());
            let b = answer(&mut sched, ids, &cfg);
            spec = sched.take_speculation();
            let b = b?;
            if a.tokens != b.tokens {
                bail!(
                    "prompt {}: the speculative answer differs from the plain one at token {}",
                    prompts[k].0,
                    a.tokens
                        .iter()
                        .zip(&b.tokens)
                        .take_while(|(x, y)| x == y)
                        .count()
                );
            }
            if round == 0 {
                continue;
            }
            for (runs, st) in [(&mut plain[k], &a), (&mut fast[k], &b)] {
                // The first token's time is the prefill's.
                runs.rates
                    .push(rate(st.generated_tokens.saturating_sub(1), st.decode_secs));
                runs.tokens = st.generated_tokens;
                runs.spec.add(&st.spec);
            }
        }
    }
    print(loaded, o, &engine_threads(&sched), &prompts, &plain, &fast)
}

/// Runs `n` generations together (the prompts in turn) until all are
/// done; the tokens they generated and the seconds it took.
fn together(
    s: &mut Scheduler,
    ids: &[Vec<u32>],
    n: usize,
    cfg: &GenerateConfig,
) -> Result<(Vec<GenerationStats>, f64)> {
    let t = std::time::Instant::now();
    let gens: Vec<_> = (0..n)
        .map(|k| s.submit(&ids[k % ids.len()], cfg))
        .collect::<std::result::Result<_, _>>()?;
    let mut done: Vec<Option<GenerationStats>> = vec![None; n];
    while done.iter().any(Option::is_none) {
        s.step()?;
        for (k, &g) in gens.iter().enumerate() {
            while let Some(ev) = s.next_event(g) {
                if let Event::Done(st) = ev {
                    done[k] = Some(st);
                }
            }
        }
    }
    Ok((
        done.into_iter().flatten().collect(),
        t.elapsed().as_secs_f64(),
    ))
}

/// Aggregate throughput of N concurrent generations, with and without
/// speculation, rounds alternated.
fn run_parallel(
    loaded: &LoadedModel,
    o: &Opts,
    sched: &mut Scheduler,
    mut spec: Option<minfer_engine::Speculation>,
    ids: &[Vec<u32>],
    cfg: &GenerateConfig,
) -> Result<()> {
    let name = crate::bench_parallel::file_name(loaded);
    let threads = engine_threads(sched);
    let method = method_label(o.spec);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "| model | threads | N | method | t/s | accepted | speed-up |"
    )?;
    writeln!(out, "| --- | ---: | ---: | --- | ---: | ---: | ---: |")?;
    for &n in o.parallel {
        anyhow::ensure!(
            (1..=sched.runtime().max_sequences()).contains(&n),
            "--parallel {n}: from 1 to {} generations",
            sched.runtime().max_sequences()
        );
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut counts = SpecStats::default();
        for round in 0..=o.reps {
            let (pa, ta) = together(sched, ids, n, cfg)?;
            sched.set_speculation(spec.take());
            let r = together(sched, ids, n, cfg);
            spec = sched.take_speculation();
            let (pb, tb) = r?;
            for (x, y) in pa.iter().zip(&pb) {
                if x.tokens != y.tokens {
                    bail!("N = {n}: a speculative answer differs from the plain one");
                }
            }
            if round == 0 {
                continue;
            }
            let total = |v: &[GenerationStats]| v.iter().map(|s| s.generated_tokens).sum::<usize>();
            a.push(rate(total(&pa), ta));
            b.push(rate(total(&pb), tb));
            for st in &pb {
                counts.add(&st.spec);
            }
        }
        let (ma, mb) = (median(&a), median(&b));
        writeln!(
            out,
            "| {name} | {threads} | {n} | plain | {ma:.2} | - | 1.00 |"
        )?;
        writeln!(
            out,
            "| {name} | {threads} | {n} | {method} | {mb:.2} | {}/{} ({:.0}%) | {:.2} |",
            counts.accepted,
            counts.drafted,
            100.0 * counts.acceptance(),
            if ma > 0.0 { mb / ma } else { 0.0 }
        )?;
    }
    Ok(())
}

fn method_label(spec: &SpecArgs) -> String {
    match (&spec.draft, spec.lookup) {
        (Some(d), Some(n)) => format!("draft {d} + lookup {n}"),
        (Some(d), None) => format!("draft {d}"),
        (None, Some(n)) => format!("lookup {n}"),
        (None, None) => "plain".into(),
    }
}

fn engine_threads(s: &Scheduler) -> String {
    s.runtime().config().n_threads.to_string()
}

fn print(
    loaded: &LoadedModel,
    o: &Opts,
    threads: &str,
    prompts: &[(String, String)],
    plain: &[Runs],
    fast: &[Runs],
) -> Result<()> {
    let name = crate::bench_parallel::file_name(loaded);
    let method = method_label(o.spec);
    let mut out = std::io::stdout().lock();
    let rows = prompts
        .iter()
        .zip(plain.iter().zip(fast))
        .map(|((p, _), (a, b))| {
            let (ma, mb) = (median(&a.rates), median(&b.rates));
            (p, a, b, ma, mb, if ma > 0.0 { mb / ma } else { 0.0 })
        });
    match o.output {
        "json" => {
            let v: Vec<_> = rows
                .map(|(p, a, b, ma, mb, up)| {
                    serde_json::json!({
                        "model": name, "threads": threads, "prompt": p, "method": method,
                        "n_tokens": b.tokens, "plain_ts": ma, "spec_ts": mb, "speedup": up,
                        "plain_samples_ts": a.rates, "spec_samples_ts": b.rates,
                        "drafted": b.spec.drafted, "accepted": b.spec.accepted,
                        "acceptance": b.spec.acceptance(),
                    })
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
        "csv" => {
            writeln!(
                out,
                "model,threads,prompt,method,n_tokens,plain_ts,spec_ts,acceptance,speedup"
            )?;
            for (p, _, b, ma, mb, up) in rows {
                writeln!(
                    out,
                    "{name},{threads},{p},\"{method}\",{},{ma:.2},{mb:.2},{:.3},{up:.3}",
                    b.tokens,
                    b.spec.acceptance()
                )?;
            }
        }
        _ => {
            writeln!(
                out,
                "| model | threads | prompt | method | n | t/s | accepted | speed-up |"
            )?;
            writeln!(
                out,
                "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"
            )?;
            for (p, a, b, ma, mb, up) in rows {
                writeln!(
                    out,
                    "| {name} | {threads} | {p} | plain | {} | {ma:.2} | - | 1.00 |",
                    a.tokens
                )?;
                writeln!(
                    out,
                    "| {name} | {threads} | {p} | {method} | {} | {mb:.2} | {}/{} ({:.0}%) | {up:.2} |",
                    b.tokens,
                    b.spec.accepted,
                    b.spec.drafted,
                    100.0 * b.spec.acceptance()
                )?;
            }
        }
    }
    Ok(())
}
