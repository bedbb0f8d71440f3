//! The server's settings.

use std::path::PathBuf;
use std::time::Duration;

use minfer_engine::EngineConfig;

use crate::template::TemplateChoice;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The model loaded at start and used by requests that name no other
    /// (a path, a known name or `hf:…`); none: every model is loaded when
    /// a request names it.
    pub model: Option<String>,
    /// What every model runs with, unless its preset says otherwise.
    pub per_model: ModelConfig,
    /// Which models the server can load and how many stay loaded.
    pub models: ModelsConfig,
    /// Largest request body in bytes; larger ones get 413.
    pub max_body: usize,
    /// When set, every endpoint but `/health` needs `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// How long shutdown lets running requests finish before cancelling them.
    pub drain_timeout: Duration,
    /// How long a streamed answer may stay silent (a long prompt being
    /// prefilled) before a keep-alive event goes out.
    pub keep_alive: Duration,
    /// Refuse requests whose `model` is no model's id or alias (otherwise
    /// any name is the model loaded at start).
    pub strict_model: bool,
    /// Answer llama-server's `GET /slots` (off: 501, as llama-server's
    /// `--no-slots`).
    pub slots: bool,
    /// Serve the chat page at `/` (off: 404, as llama-server's `--no-ui`).
    pub ui: bool,
    /// Origins allowed to call the server from a browser (`*` for any);
    /// empty: no CORS headers.
    pub cors_origins: Vec<String>,
}

/// What one model runs with: the server's flags, or its preset's.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Requests that generate at once.
    pub n_parallel: usize,
    /// Requests that may wait for a slot; more get 503.
    pub queue: usize,
    /// Most tokens an answer generates when its request sets no limit
    /// (llama-server's `--n-predict`); 0: until the model stops or the
    /// context is full.
    pub n_predict: usize,
    /// The id `/v1/models` lists (default: the model's name or file stem);
    /// several, comma-separated, are all names of the model, the first in
    /// sorted order its id.
    pub alias: Option<String>,
    /// Labels `/v1/models` lists for the model.
    pub tags: Vec<String>,
    /// The temperature a request that sets none gets (`--temp`).
    pub temp: Option<f32>,
    /// The seed a request that sets none gets (`--seed`; none: a fresh
    /// one per request).
    pub seed: Option<u64>,
    /// A chat template in place of the model's own.
    pub chat_template: Option<TemplateChoice>,
    /// Thinking for a request that does not say (`--reasoning on|off`):
    /// the template's `enable_thinking`, and with off a thinking block
    /// the template opens is closed; none: the template's default.
    pub reasoning: Option<bool>,
    /// The engine's settings (context, threads, kernels).
    pub engine: EngineConfig,
    /// Speculative decoding, when on: a draft model (path, known name or
    /// `hf:…`; it runs with the engine's settings) and the settings.
    pub speculation: Option<(Option<String>, minfer_engine::SpecConfig)>,
    /// Never unloaded for being idle or to make room (a preset's
    /// `pinned`; the model loaded at start is).
    pub pinned: bool,
}

/// Which models a server can load, and how many it keeps loaded.
#[derive(Debug, Clone)]
pub struct ModelsConfig {
    /// A directory whose `*.gguf` files (and folders of them) are models
    /// by their file stems (`--models-dir`).
    pub dir: Option<PathBuf>,
    /// An INI file of named models with their own settings
    /// (`--models-preset`, llama-server's format).
    pub preset: Option<PathBuf>,
    /// List and load the store's models too (off for a server of the one
    /// model it was started with, which lists that model alone, as
    /// llama-server does).
    pub store: bool,
    /// Most models loaded at once (`--models-max`; Ollama's 3).
    pub max: usize,
    /// Most bytes the loaded models' weights and caches may take; the
    /// least recently used idle model is unloaded to stay under it.
    pub memory: Option<u64>,
    /// Load a model when a request names it (off: only `/models/load`
    /// does, as llama-server's `--no-models-autoload`).
    pub autoload: bool,
    /// How long a model stays loaded after its last request, unless the
    /// request says (`keep_alive`); none: for ever. Ollama's 5 minutes.
    pub idle: Option<Duration>,
    /// How long a request waits for its model to load (or for room to
    /// load it) before a 503 with `Retry-After`.
    pub load_wait: Duration,
    /// Where `/slots/{id}?action=save|restore` read and write their files
    /// (`--slot-save-path`); none: the actions are off.
    pub slot_save_path: Option<PathBuf>,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            dir: None,
            preset: None,
            store: true,
            max: 3,
            memory: None,
            autoload: true,
            idle: Some(Duration::from_secs(300)),
            load_wait: Duration::from_secs(600),
            slot_save_path: None,
        }
    }
}

impl ServerConfig {
    /// The settings `minfer serve` starts with by default, for `model`
    /// (none: each model loads when a request names it) run with
    /// `per_model`.
    pub fn new(model: Option<String>, per_model: ModelConfig) -> ServerConfig {
        ServerConfig {
            model,
            per_model,
            models: ModelsConfig::default(),
            max_body: 8 << 20,
            api_key: None,
            drain_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(5),
            strict_model: false,
            slots: true,
            ui: false,
            cors_origins: Vec::new(),
        }
    }
}

impl ModelConfig {
    /// The settings `minfer serve` gives a model by default (4 requests
    /// at once, 64 waiting, no token limit), on `engine`.
    pub fn new(engine: EngineConfig) -> ModelConfig {
        ModelConfig {
            n_parallel: 4,
            queue: 64,
            n_predict: 0,
            alias: None,
            tags: Vec::new(),
            temp: None,
            seed: None,
            chat_template: None,
            reasoning: None,
            engine,
            speculation: None,
            pinned: false,
        }
    }

    /// What a request of this model gets for the fields it does not set.
    pub fn defaults(&self) -> RequestDefaults {
        RequestDefaults {
            max_tokens: self.n_predict,
            temp: self.temp,
            seed: self.seed,
        }
    }
}

/// What a request gets for the fields it does not set: the server's `-n`
/// (0: no limit), `--temp` and `--seed` (none: llama.cpp's temperature
/// and a fresh seed per request).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestDefaults {
    /// The most tokens of an answer.
    pub max_tokens: usize,
    /// The temperature.
    pub temp: Option<f32>,
    /// The seed.
    pub seed: Option<u64>,
}

#[cfg(test)]
impl RequestDefaults {
    /// Only a token limit (0: none).
    pub fn max(max_tokens: usize) -> RequestDefaults {
        RequestDefaults {
            max_tokens,
            ..RequestDefaults::default()
        }
    }
}

/// `--reasoning`: `on`, `off` or `auto` (none: the template decides).
///
/// # Errors
/// A message naming the accepted values.
pub fn parse_reasoning(v: &str) -> Result<Option<bool>, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "1" | "true" => Ok(Some(true)),
        "off" | "0" | "false" => Ok(Some(false)),
        "auto" => Ok(None),
        _ => Err(format!("`{v}` is not on, off or auto")),
    }
}

/// llama-server's `--reasoning-budget`: -1 leaves thinking to the
/// template, 0 turns it off; minfer has no budget between.
///
/// # Errors
/// Any other number.
pub fn reasoning_budget(n: i64) -> Result<Option<bool>, String> {
    match n {
        -1 => Ok(None),
        0 => Ok(Some(false)),
        _ => Err(format!(
            "a reasoning budget of {n} tokens: only -1 (unrestricted) and 0 (off) are supported"
        )),
    }
}
