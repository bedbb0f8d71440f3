//! `minfer serve`: the OpenAI-compatible HTTP server.

use std::time::Duration;

use anyhow::Result;
use minfer_engine::Store;
use minfer_server::{ModelConfig, ModelsConfig, ServerConfig, TemplateChoice};

use crate::run::DEFAULT_MODEL;
use crate::runtime::RuntimeArgs;

/// Arguments of `minfer serve`. The context defaults to 8192 tokens here:
/// the requests running together share it.
#[derive(clap::Args)]
#[command(mut_arg("n_ctx", |a| a.default_value("8192")))]
pub struct Args {
    /// The model: a file, a known name or hf:… (default
    /// qwen2.5-coder-0.5b-instruct, pulled on first use; none with
    /// --models-dir or --models-preset: each model loads when a request
    /// names it). Requests that name no model, or an unknown one, get it.
    /// Given alone, it is the one model served (as llama-server); without
    /// it the store's pulled models are served too (as Ollama's).
    #[arg(value_name = "MODEL")]
    model: Option<String>,
    /// A directory of models: each `*.gguf` file (and each folder of
    /// them) is a model, named by its stem, loaded when a request names
    /// it (as llama-server's router).
    #[arg(long = "models-dir", value_name = "DIR")]
    models_dir: Option<std::path::PathBuf>,
    /// An INI file of named models with their own settings (context,
    /// threads, -np, draft, template, `pinned`, `load-on-startup`), in
    /// llama-server's `--models-preset` format.
    #[arg(long = "models-preset", value_name = "FILE")]
    models_preset: Option<std::path::PathBuf>,
    /// Most models loaded at once; the least recently used idle one is
    /// unloaded to make room (Ollama's default, 3).
    #[arg(long = "models-max", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    models_max: u32,
    /// Most memory the loaded models' weights and caches may take (a
    /// size such as 16GiB; default: 80 % of this machine's memory).
    #[arg(long = "models-memory", value_name = "SIZE", value_parser = parse_size)]
    models_memory: Option<usize>,
    /// A directory for llama-server's slot files: `POST
    /// /slots/{id}?action=save|restore|erase` with `{"filename": …}` saves the cached tokens
    /// of the last request that named `id_slot` {id}, or puts a saved
    /// file's tokens back in the cache (off without it).
    #[arg(long = "slot-save-path", value_name = "DIR")]
    slot_save_path: Option<std::path::PathBuf>,
    /// Load a model only on POST /models/load, never because a request
    /// names it (llama-server's flag).
    #[arg(long = "no-models-autoload")]
    no_models_autoload: bool,
    /// How long a model loaded on request stays loaded once idle
    /// (seconds or a duration such as 5m; -1: for ever; a request's
    /// `keep_alive` overrides it). The model given at start stays.
    #[arg(long = "keep-alive", value_name = "DURATION", default_value = "5m", allow_hyphen_values = true, value_parser = parse_keep)]
    keep_alive_models: KeepAlive,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port; the ready line names it).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests that generate together; more wait in the queue.
    /// (`-np N` is accepted too, as llama-server spells it.)
    #[arg(long = "np", alias = "parallel", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    np: u32,
    /// Most tokens an answer generates when its request sets no
    /// `max_tokens` (-1: until the model stops or the context is full, as
    /// llama-server's default).
    #[arg(short = 'n', long = "n-predict", default_value_t = -1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(-1..))]
    n_predict: i64,
    /// Requests that may wait for a slot; past that a request gets 503.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Largest request body (bytes, or with a KiB/MiB suffix); larger ones get 413.
    #[arg(long = "max-body", default_value = "8MiB", value_parser = parse_size)]
    max_body: usize,
    /// Require `Authorization: Bearer KEY` on every endpoint but /health.
    #[arg(long = "api-key", env = "MINFER_API_KEY")]
    api_key: Option<String>,
    /// Seconds that running requests get to finish after SIGTERM or
    /// Ctrl-C before they are cancelled.
    #[arg(long = "drain-timeout", default_value_t = 10.0, value_parser = parse_secs)]
    drain_timeout: f64,
    /// Seconds a streamed answer may stay silent before a keep-alive event
    /// goes out (Anthropic `ping`, Responses `response.in_progress`, an SSE
    /// comment for chat completions): agents abort a stream that says
    /// nothing while a long prompt is prefilled.
    #[arg(long = "sse-keepalive", default_value_t = 5.0, value_parser = parse_secs)]
    keep_alive: f64,
    /// The model id `/v1/models` lists and responses name (default: the
    /// model's name or file stem). Several, comma-separated, are all
    /// names of the model, the first in sorted order its id (as
    /// llama-server's `--alias`).
    #[arg(long)]
    alias: Option<String>,
    /// Labels `/v1/models` lists for the model (comma-separated), as
    /// llama-server's `--tags`.
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// The temperature of a request that sets none (llama-server's
    /// `--temp`; default llama.cpp's 0.8).
    #[arg(long = "temp", alias = "temperature", value_parser = parse_temp)]
    temp: Option<f32>,
    /// The seed of a request that sets none, so that the same request
    /// gives the same answer (llama-server's `--seed`; -1 or none: a
    /// fresh seed per request).
    #[arg(long = "seed", allow_negative_numbers = true)]
    seed: Option<i64>,
    /// Answer 404 to requests whose `model` is not this model's id or
    /// alias (by default any name, or none, means the one model served).
    #[arg(long = "strict-model")]
    strict_model: bool,
    /// Turn off llama-server's `GET /slots` (what each of the `-np`
    /// places is doing; on by default, as in llama-server).
    #[arg(long = "no-slots")]
    no_slots: bool,
    /// Serve no chat page at `/` (404 there; the APIs are unchanged), as
    /// llama-server's `--no-ui`.
    #[arg(long = "no-ui", alias = "no-webui")]
    no_ui: bool,
    /// Origins whose pages may call the server (comma-separated, `*` for
    /// any, `localhost` for any page of this machine on any port, as
    /// llama-server's keyword); default none: no CORS headers.
    #[arg(long = "cors-origins", value_delimiter = ',')]
    cors_origins: Vec<String>,
    /// A chat template in place of the model's own: a built-in name
    /// (`chatml`: ChatML with `<tool_call>` tools; llama.cpp's `llama3`,
    /// `llama2`, `mistral-v7`, `phi3`, `phi4`, `gemma`, `zephyr`,
    /// `vicuna`, `deepseek`, `command-r`, … rendered as llama-server
    /// renders them) or the Jinja text.
    #[arg(long = "chat-template", conflicts_with = "chat_template_file")]
    chat_template: Option<String>,
    /// A chat template file (Jinja) in place of the model's own.
    #[arg(long = "chat-template-file")]
    chat_template_file: Option<std::path::PathBuf>,
    /// Thinking for requests that do not say (llama-server's): on, off or
    /// auto (the template's default). Off sets the template's
    /// `enable_thinking` to false and closes a thinking block the template
    /// opens by itself (DeepSeek R1, QwQ, Command R7B).
    #[arg(long = "reasoning", value_enum, default_value_t = Reasoning::Auto)]
    reasoning: Reasoning,
    /// llama-server's older switch: -1 leaves thinking to the template, 0
    /// is `--reasoning off`.
    #[arg(
        long = "reasoning-budget",
        value_name = "N",
        allow_negative_numbers = true,
        conflicts_with = "reasoning"
    )]
    reasoning_budget: Option<i64>,
    #[command(flatten)]
    spec: crate::spec::SpecArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `--reasoning`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Reasoning {
    On,
    Off,
    Auto,
}

/// `--max-body`: bytes, optionally with a KiB/MiB/GiB (or K/M/G) suffix.
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| "expected a size such as 8MiB".to_string())?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?}")),
    };
    match n.checked_mul(mult) {
        Some(v) if v > 0 => Ok(v),
        _ => Err("must be at least 1 byte".into()),
    }
}

/// `--keep-alive`: a duration, or none for ever.
#[derive(Debug, Clone, Copy)]
struct KeepAlive(Option<Duration>);

fn parse_keep(s: &str) -> Result<KeepAlive, String> {
    let v = match s.trim().parse::<f64>() {
        Ok(n) => serde_json::json!(n),
        Err(_) => serde_json::json!(s.trim()),
    };
    match minfer_server::keep_alive(&v) {
        Ok(Some(k)) => Ok(KeepAlive(k)),
        _ => Err("expected seconds, a duration such as 5m, or -1".into()),
    }
}

/// 80 % of the machine's memory (`/proc/meminfo`), none where unknown.
fn default_memory_budget() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024 / 5 * 4)
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err("must be a number of seconds from 0 to 86400".into()),
    }
}

pub fn run(store: Store, args: Args) -> Result<()> {
    let engine = args.runtime.engine_config()?;
    // Prompt lookup is on unless turned off: a generation's guesses cost
    // a decode step little, the plan stops checking them where they miss,
    // and the answers are the same tokens either way; code edits, which
    // repeat their context, get faster without a flag.
    let spec = args
        .spec
        .with_default_lookup(minfer_engine::spec::DEFAULT_LOOKUP_NGRAM);
    spec.check()?;
    let speculation = if spec.enabled() {
        Some((spec.draft.clone(), spec.config()?))
    } else {
        None
    };
    let diag = crate::trace::Diag::start(&args.runtime.diag)?;
    let routed = args.models_dir.is_some() || args.models_preset.is_some();
    // `minfer serve MODEL` serves that model alone, as llama-server does;
    // without a MODEL, or with a directory or presets, the store's pulled
    // models are served too, as Ollama's are.
    let from_store = args.model.is_none() || routed;
    let model = match args.model {
        Some(m) => Some(m),
        None if routed => None,
        None => Some(DEFAULT_MODEL.to_string()),
    };
    if args.runtime.diag.dump_graph.is_some() {
        let Some(model) = &model else {
            anyhow::bail!("--dump-graph needs a MODEL");
        };
        let loaded = crate::runtime::load(&store, model)?;
        diag.dump_graphs(&loaded, engine, DUMP_PROMPT_TOKENS)?;
        return Ok(());
    }
    let per_model = ModelConfig {
        n_parallel: args.np as usize,
        queue: args.queue,
        // -1 and 0 both mean no limit.
        n_predict: usize::try_from(args.n_predict).unwrap_or(0),
        alias: args.alias,
        tags: args.tags,
        temp: args.temp,
        seed: args.seed.and_then(|s| u64::try_from(s).ok()),
        chat_template: match (args.chat_template, args.chat_template_file) {
            (Some(n), _) => Some(TemplateChoice::Named(n)),
            (None, Some(f)) => Some(TemplateChoice::File(f)),
            (None, None) => None,
        },
        reasoning: match args.reasoning_budget {
            Some(n) => minfer_server::reasoning_budget(n).map_err(anyhow::Error::msg)?,
            None => match args.reasoning {
                Reasoning::On => Some(true),
                Reasoning::Off => Some(false),
                Reasoning::Auto => None,
            },
        },
        engine,
        speculation,
        pinned: false,
    };
    let models = ModelsConfig {
        dir: args.models_dir,
        preset: args.models_preset,
        max: args.models_max as usize,
        memory: args
            .models_memory
            .map(|m| m as u64)
            .or_else(default_memory_budget),
        autoload: !args.no_models_autoload,
        store: from_store,
        slot_save_path: args.slot_save_path,
        idle: args.keep_alive_models.0,
        ..ModelsConfig::default()
    };
    let cfg = ServerConfig {
        model,
        per_model,
        models,
        max_body: args.max_body,
        api_key: args.api_key.filter(|k| !k.is_empty()),
        drain_timeout: Duration::from_secs_f64(args.drain_timeout),
        keep_alive: Duration::from_secs_f64(args.keep_alive.max(0.05)),
        strict_model: args.strict_model,
        slots: !args.no_slots,
        ui: !args.no_ui,
        cors_origins: args.cors_origins,
    };
    minfer_server::serve(store, &args.host, args.port, cfg)?;
    // The trace covers the server's whole life, up to the drained shutdown.
    diag.finish()
}

/// The prompt length of the prefill graph `--dump-graph` shows.
const DUMP_PROMPT_TOKENS: usize = 32;

/// A temperature between 0 and 2, as the APIs take it.
fn parse_temp(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(t),
        _ => Err(format!("`{s}` is not a temperature between 0 and 2")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
