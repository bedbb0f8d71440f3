//! `minfer bench`: prompt processing and generation speed with
//! llama-bench's conventions — `pp` evaluates a batch of prompt tokens and
//! `tg` generates tokens one at a time, each test from an empty cache (or
//! one holding `-d` tokens), repeated and reported as mean ± standard
//! deviation.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use minfer_engine::{Device, LoadedModel, Store, SyntheticTokens};

use crate::runtime::{self, RuntimeArgs};

/// Arguments of `minfer bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Model file, known name or hf:OWNER/REPO/FILE.gguf.
    #[arg(default_value = "qwen2.5-coder-0.5b-instruct")]
    model: String,
    /// Prompt tokens evaluated in one batch (0 skips the pp test).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Tokens generated one at a time (0 skips the tg test).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Tokens already in the cache when each test starts (llama-bench's
    /// `-d`): they are evaluated before the timing, so `tg128 @ d2048`
    /// measures decoding with 2048 tokens of context to attend over.
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    n_depth: usize,
    /// Repetitions of each test (reported as mean ± standard deviation,
    /// as llama-bench does).
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    reps: usize,
    /// Batched decoding instead, as llama-batched-bench measures it: for
    /// each N in the list, N sequences prefill `-p` tokens each, then decode
    /// `-n` tokens each in lock-step (one batch of N rows per step). With
    /// --draft or --lookup: N generations of the prompt set at once, their
    /// aggregate rate with and without speculation.
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    parallel: Vec<usize>,
    /// Output format: md, csv or json.
    #[arg(short = 'o', long = "output", default_value = "md", value_parser = ["md", "csv", "json"])]
    output: String,
    /// With --draft or --lookup: the directory of `.txt` prompts to run
    /// instead of the shipped set (bench/spec-prompts).
    #[arg(long = "spec-prompts", value_name = "DIR")]
    spec_prompts: Option<std::path::PathBuf>,
    #[command(flatten)]
    spec: crate::spec::SpecArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

struct Row {
    test: String,
    n: usize,
    samples: Vec<f64>,
}

impl Row {
    fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len().max(1) as f64
    }
    fn stddev(&self) -> f64 {
        let n = self.samples.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.samples.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
}

pub fn run(store: &Store, mut args: Args) -> Result<()> {
    anyhow::ensure!(args.reps > 0, "-r must be at least 1");
    args.spec.check()?;
    let diag = crate::trace::Diag::start(&args.runtime.diag)?;
    let loaded = runtime::load(store, &args.model)?;
    let cfg = args.runtime.engine_config()?;
    if diag.dump_graphs(&loaded, cfg, args.n_prompt.max(2))? {
        return Ok(());
    }
    if args.spec.enabled() {
        let opts = crate::bench_spec::Opts {
            spec: &args.spec,
            runtime: &args.runtime,
            n_gen: args.n_gen,
            reps: args.reps,
            output: &args.output,
            prompts_dir: args.spec_prompts.as_deref(),
            parallel: &args.parallel,
        };
        crate::bench_spec::run(store, &loaded, &opts)?;
        return diag.finish();
    }
    if !args.parallel.is_empty() {
        let opts = crate::bench_parallel::Opts {
            npl: &args.parallel,
            n_prompt: args.n_prompt,
            n_gen: args.n_gen,
            reps: args.reps,
            output: &args.output,
        };
        crate::bench_parallel::run(&loaded, &args.runtime, &opts)?;
        return diag.finish();
    }
    // Both tests start from a cache holding `n_depth` tokens; the context
    // only needs to hold those and the longer test.
    args.runtime.n_ctx = args
        .runtime
        .n_ctx
        .max((args.n_depth + args.n_prompt.max(args.n_gen) + 1) as u32);
    let mut engine = runtime::engine(&loaded, &args.runtime)?;
    // Deterministic pseudo-random tokens, as llama-bench uses random ones.
    let mut synthetic = SyntheticTokens::new(0x2545_f491_4f6c_dd1d, engine.n_vocab());
    let depth: Vec<u32> = synthetic.by_ref().take(args.n_depth).collect();
    let suffix = if args.n_depth > 0 {
        format!(" @ d{}", args.n_depth)
    } else {
        String::new()
    };
    // Empties the cache and fills in the depth tokens (not timed).
    let start = |engine: &mut minfer_engine::Engine| -> Result<()> {
        engine.reset();
        if !depth.is_empty() {
            engine.eval(&depth, false)?;
        }
        Ok(())
    };
    let mut rows = Vec::new();
    if args.n_prompt > 0 {
        let tokens: Vec<u32> = synthetic.by_ref().take(args.n_prompt).collect();
        // Warm-up run, not measured: builds the graph and faults the weights in.
        start(&mut engine)?;
        engine.eval(&tokens, false)?;
        let mut row = Row {
            test: format!("pp{}{suffix}", args.n_prompt),
            n: args.n_prompt,
            samples: vec![],
        };
        for _ in 0..args.reps {
            start(&mut engine)?;
            let t = Instant::now();
            engine.eval(&tokens, false)?;
            row.samples
                .push(args.n_prompt as f64 / t.elapsed().as_secs_f64());
        }
        rows.push(row);
    }
    if args.n_gen > 0 {
        let tokens: Vec<u32> = synthetic.by_ref().take(args.n_gen).collect();
        start(&mut engine)?;
        engine.eval(&tokens[..1], false)?;
        let mut row = Row {
            test: format!("tg{}{suffix}", args.n_gen),
            n: args.n_gen,
            samples: vec![],
        };
        for _ in 0..args.reps {
            start(&mut engine)?;
            let t = Instant::now();
            for &tok in &tokens {
                engine.eval(&[tok], false)?;
            }
            row.samples
                .push(args.n_gen as f64 / t.elapsed().as_secs_f64());
        }
        rows.push(row);
    }
    let backend = backend_label(engine.runtime());
    let threads = engine.config().n_threads;
    print_rows(&args, &loaded, &backend, threads, &rows)?;
    if args.output == "md" {
        print_machine_report(&engine, &loaded, &rows, threads)?;
        print_first_token(&rows, args.n_prompt)?;
    }
    runtime::log_kv_usage(engine.runtime());
    diag.finish()
}

/// Under the markdown table: the weights a token reads and, with a tg
/// test, the share of the machine's read bandwidth that draws, then the
/// kernel choices measured on this machine.
fn print_machine_report(
    engine: &minfer_engine::Engine,
    loaded: &minfer_engine::LoadedModel,
    rows: &[Row],
    threads: usize,
) -> Result<()> {
    let tg = rows
        .iter()
        .find(|r| r.test.starts_with("tg"))
        .map(|r| (r.test.as_str(), r.mean()));
    // Layers on a GPU read its memory, which the CPU's probe does not
    // measure; the CPU's kernel choices matter only where it runs layers.
    let plan = engine.runtime().offload();
    let last = engine.runtime().model().hparams.n_layer.saturating_sub(1);
    let on_gpu = plan.output_device() == Device::Gpu || plan.layer_device(last) == Device::Gpu;
    let cpu_layers = plan.layer_device(0) == Device::Cpu;
    let peak = (tg.is_some() && !on_gpu)
        .then(|| (crate::bench_bandwidth::read_bandwidth(threads), threads));
    let w = loaded.model().weight_bytes();
    let mut report = crate::bench_bandwidth::report(w, tg, peak);
    let choices = engine.runtime().kernel_choices();
    if cpu_layers && !choices.is_empty() {
        report.push_str(&format!(
            "\nkernel choices for one sequence's decode, measured on this machine: {}",
            choices.join("; ")
        ));
    }
    // Through the same error path as the table: a closed pipe ends the
    // command quietly instead of panicking.
    writeln!(std::io::stdout().lock(), "\n{report}")?;
    Ok(())
}

/// With both tests: the time to the first token of a prompt of the pp
/// test's length (at the same depth), the prefill at the pp rate then one
/// decode step at the tg rate: what a chat or an agent waits for before
/// its answer starts (`-p 10000 -n 1` for an agent-sized prompt).
fn print_first_token(rows: &[Row], n_prompt: usize) -> Result<()> {
    let rate = |prefix: &str| {
        rows.iter()
            .find(|r| r.test.starts_with(prefix))
            .map(|r| (r.test.as_str(), r.mean()))
    };
    if let (Some((pp, pp_ts)), Some((_, tg_ts))) = (rate("pp"), rate("tg")) {
        let at = pp.split_once(" @ d").map_or(String::new(), |(_, d)| {
            format!(" after {d} tokens of context")
        });
        let secs = n_prompt as f64 / pp_ts + 1.0 / tg_ts;
        writeln!(
            std::io::stdout().lock(),
            "time to first token of a {n_prompt}-token prompt{at}: {secs:.2} s"
        )?;
    }
    Ok(())
}

/// The backend column: `CPU`, or the GPU adapter with the layers it runs
/// (llama-bench prints the backend and `ngl`).
pub fn backend_label(rt: &minfer_engine::Runtime) -> String {
    match (rt.offload(), rt.gpu_name()) {
        (
            minfer_engine::BackendPlan::Gpu {
                first_gpu_layer,
                output,
            },
            Some(name),
        ) => {
            let n = rt.model().hparams.n_layer as u32 - first_gpu_layer + u32::from(output);
            format!("GPU {name}, ngl {n}")
        }
        _ => "CPU".to_string(),
    }
}

fn print_rows(
    args: &Args,
    loaded: &LoadedModel,
    backend: &str,
    threads: usize,
    rows: &[Row],
) -> Result<()> {
    let name = crate::bench_parallel::file_name(loaded);
    let size = minfer_store::fmt_bytes(loaded.file().file_size());
    let mut out = std::io::stdout().lock();
    match args.output.as_str() {
        "json" => {
            let v: Vec<_> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "model": name, "backend": backend, "threads": threads, "test": r.test, "n_tokens": r.n,
                        "avg_ts": r.mean(), "stddev_ts": r.stddev(), "samples_ts": r.samples,
                    })
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
        "csv" => {
            writeln!(out, "model,size,backend,threads,test,avg_ts,stddev_ts")?;
            for r in rows {
                writeln!(
                    out,
                    "{name},{size},\"{backend}\",{threads},{},{:.2},{:.2}",
                    r.test,
                    r.mean(),
                    r.stddev()
                )?;
            }
        }
        _ => {
            writeln!(out, "| model | size | backend | threads | test | t/s |")?;
            writeln!(out, "| --- | ---: | --- | ---: | ---: | ---: |")?;
            for r in rows {
                writeln!(
                    out,
                    "| {name} | {size} | {backend} | {threads} | {} | {:.2} ± {:.2} |",
                    r.test,
                    r.mean(),
                    r.stddev()
                )?;
            }
        }
    }
    Ok(())
}
