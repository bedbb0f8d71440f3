//! `minfer`: run, inspect and manage GGUF models from the command line.

mod inspect;
mod store_cmds;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use minfer_store::{Store, StoreConfig};

/// A local LLM inference engine for GGUF models.
///
/// MODEL arguments accept a file path, a known model name (see `minfer
/// list`), or `hf:OWNER/REPO/FILE.gguf`. Known and Hugging Face models are
/// pulled into the store on first use.
///
/// Environment: MINFER_HOME (store location, default ~/.cache/minfer),
/// HF_ENDPOINT and HF_TOKEN (Hugging Face downloads), MINFER_PYTHON (the
/// Python used to fetch wheels, default python3).
#[derive(Parser)]
#[command(name = "minfer", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a model's architecture, hyperparameters, tokenizer and tensors.
    Inspect(inspect::Args),
    /// Download models into the store and verify them.
    Pull(store_cmds::PullArgs),
    /// List the known models and the models in the store.
    List(store_cmds::ListArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut cfg = StoreConfig::from_env();
    cfg.progress = std::io::stderr().is_terminal();
    let store = Store::new(cfg);
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(&store, args),
        Command::Pull(args) => store_cmds::pull(&store, args),
        Command::List(args) => store_cmds::list(&store, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
