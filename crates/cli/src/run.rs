//! `minfer run`: one prompt, the answer streamed to stdout.

use std::io::{IsTerminal, Read, Write};

use anyhow::{bail, Context, Result};
use minfer_engine::{Event, PromptMode, Store, Utf8Stream};
use minfer_store::ModelSpec;

use crate::runtime::{self, RuntimeArgs};
use crate::sampling::SamplingArgs;

/// The model used when none is named.
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-0.5b-instruct";

/// Arguments of `minfer run`.
#[derive(clap::Args)]
pub struct Args {
    /// `[MODEL] [PROMPT]`: a model (file, known name or hf:…; default
    /// qwen2.5-coder-0.5b-instruct, pulled on first use) and the prompt. A
    /// single argument is the model if it names one, else the prompt.
    #[arg(num_args = 0..=2, value_name = "MODEL|PROMPT")]
    positional: Vec<String>,
    /// Read the prompt from a file ("-" for stdin).
    #[arg(short = 'f', long = "file")]
    file: Option<std::path::PathBuf>,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// System message (needs a chat template).
    #[arg(long)]
    system: Option<String>,
    /// Send the prompt as it is, without the chat template (special tokens
    /// in it are still parsed).
    #[arg(long)]
    no_template: bool,
    #[command(flatten)]
    spec: crate::spec::SpecArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// Splits `[MODEL] [PROMPT]`.
fn model_and_prompt(store: &Store, positional: &[String]) -> (String, Option<String>) {
    match positional {
        [model, prompt] => (model.clone(), Some(prompt.clone())),
        [one] => {
            // A path counts as the model when it exists or names a .gguf
            // file, so that a mistyped model path is reported as such
            // instead of being answered as a prompt by the default model.
            let is_model = match ModelSpec::parse(one) {
                Ok(ModelSpec::Path(p)) => {
                    p.exists()
                        || p.extension()
                            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
                }
                Ok(_) => true,
                Err(_) => false,
            };
            let _ = store;
            if is_model {
                (one.clone(), None)
            } else {
                (DEFAULT_MODEL.to_string(), Some(one.clone()))
            }
        }
        _ => (DEFAULT_MODEL.to_string(), None),
    }
}

fn read_prompt(arg: Option<String>, file: &Option<std::path::PathBuf>) -> Result<String> {
    if let Some(p) = arg {
        if file.is_some() {
            bail!("give the prompt either as an argument or with -f, not both");
        }
        return Ok(p);
    }
    let mut text = String::new();
    match file {
        Some(f) if f.as_os_str() == "-" => {
            std::io::stdin().read_to_string(&mut text)?;
        }
        Some(f) => {
            text = std::fs::read_to_string(f)
                .with_context(|| format!("cannot read prompt file {}", f.display()))?;
        }
        None if !std::io::stdin().is_terminal() => {
            std::io::stdin().read_to_string(&mut text)?;
        }
        None => bail!("no prompt: pass it as an argument, with -f FILE, or on stdin"),
    }
    Ok(text)
}

pub fn run(store: &Store, args: Args) -> Result<()> {
    // Output paths are checked first: a bad one fails before any work.
    let diag = crate::trace::Diag::start(&args.runtime.diag)?;
    let (model_spec, prompt_arg) = model_and_prompt(store, &args.positional);
    // A model given as a path is checked before the prompt is read: "file
    // not found" is the real problem when both are missing.
    if let Ok(ModelSpec::Path(_)) = ModelSpec::parse(&model_spec) {
        store.resolve(&model_spec)?;
    }
    let prompt = read_prompt(prompt_arg, &args.file)?;
    if prompt.is_empty() {
        bail!("the prompt is empty");
    }
    // Sampling settings, grammar files and schemas are checked before the
    // model takes its seconds to load.
    let cfg = args.sampling.generate_config()?;
    let engine_cfg = args.runtime.engine_config()?;
    args.spec.check()?;
    let loaded = runtime::load(store, &model_spec)?;
    let mode = if args.no_template {
        PromptMode::Raw
    } else {
        PromptMode::Chat
    };
    let ids = loaded.prompt(args.system.as_deref(), &prompt, mode, engine_cfg.n_ctx)?;
    if diag.dump_graphs(&loaded, engine_cfg, ids.len())? {
        return Ok(());
    }
    let mut sched = loaded.scheduler(engine_cfg)?;
    sched.set_speculation(args.spec.speculation(store, &loaded, engine_cfg)?);
    let id = sched.submit(&ids, &cfg)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut utf8 = Utf8Stream::new();
    let mut write_failed = None;
    let stats = 'run: loop {
        sched.step()?;
        while let Some(ev) = sched.next_event(id) {
            match ev {
                Event::Text(bytes) if write_failed.is_none() => {
                    let s = utf8.push(&bytes);
                    if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
                        write_failed = Some(e);
                        sched.cancel(id);
                    }
                    sched.recycle(Event::Text(bytes));
                }
                Event::Text(_) | Event::Logprobs(_) | Event::PromptLogprobs(_) => {}
                Event::Done(stats) => break 'run stats,
            }
        }
    };
    // A closed stdout (`| head`) ends here too; `main` treats that as a
    // quiet success, and the statistics are left out with the rest.
    if let Some(e) = write_failed {
        return Err(e.into());
    }
    write!(out, "{}", utf8.finish())?;
    writeln!(out)?;
    drop(out);
    let rate = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    eprintln!(
        "\nprefill: {} tokens in {:.2} s ({:.1} t/s) | decode: {} tokens in {:.2} s ({:.1} t/s) | stop: {} | graph builds: {}",
        stats.prompt_tokens,
        stats.prefill_secs,
        rate(stats.prompt_tokens, stats.prefill_secs),
        stats.generated_tokens,
        stats.decode_secs,
        rate(stats.generated_tokens, stats.decode_secs),
        stats.stop_reason,
        stats.graph_builds,
    );
    if sched.speculation().is_some() {
        eprintln!("speculation: {}", crate::spec::format_counts(&stats.spec));
    }
    runtime::log_kv_usage(sched.runtime());
    diag.finish()
}
