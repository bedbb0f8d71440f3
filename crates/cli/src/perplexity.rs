//! `minfer perplexity`: llama-perplexity's measurement on a text file.

use std::io::Write;

use anyhow::{Context, Result};
use minfer_engine::perplexity;
use minfer_engine::Store;

use crate::runtime::{self, RuntimeArgs};

/// Arguments of `minfer perplexity`. `-c` is the chunk size here, as in
/// llama-perplexity (the context is set to it), so the runtime options'
/// `-c` short form of `--n-ctx` is taken away.
#[derive(clap::Args)]
#[command(mut_arg("n_ctx", |a| a.short(None)))]
pub struct Args {
    /// Model file, known name or hf:OWNER/REPO/FILE.gguf.
    #[arg(default_value = "qwen2.5-coder-0.5b-instruct")]
    model: String,
    /// The text to score.
    #[arg(short = 'f', long = "file")]
    file: std::path::PathBuf,
    /// Tokens per chunk; each chunk is scored from an empty cache on the
    /// predictions of its second half.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx: usize,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

pub fn run(store: &Store, mut args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let loaded = runtime::load(store, &args.model)?;
    let tokens = loaded.tokenizer().encode(&text, true, false);
    anyhow::ensure!(
        tokens.len() >= 2 * args.ctx,
        "{} has {} tokens; perplexity with -c {} needs at least {}",
        args.file.display(),
        tokens.len(),
        args.ctx,
        2 * args.ctx
    );
    args.runtime.n_ctx = args.ctx as u32;
    let mut engine = runtime::engine(&loaded, &args.runtime)?;
    let bos = if loaded.tokenizer().add_bos() {
        loaded.tokenizer().bos()
    } else {
        None
    };
    eprintln!(
        "perplexity: {} tokens, {} chunks of {}",
        tokens.len(),
        tokens.len() / args.ctx,
        args.ctx
    );
    let result = perplexity(&mut engine, &tokens, args.ctx, bos, |chunk, _n, ppl| {
        eprint!("[{}]{:.4},", chunk + 1, ppl);
    })?;
    eprintln!();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Final estimate: PPL = {:.4} +/- {:.5}",
        result.ppl, result.stderr
    )?;
    Ok(())
}
