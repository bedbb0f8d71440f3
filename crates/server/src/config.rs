//! The server's settings.

use std::time::Duration;

use minfer_engine::EngineConfig;

use crate::template::TemplateChoice;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The model: a path, a known name or `hf:…`.
    pub model: String,
    /// Requests that generate at once.
    pub n_parallel: usize,
    /// Requests that may wait for a slot; more get 503.
    pub queue: usize,
    /// Largest request body in bytes; larger ones get 413.
    pub max_body: usize,
    /// When set, every endpoint but `/health` needs `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// How long shutdown lets running requests finish before cancelling them.
    pub drain_timeout: Duration,
    /// How long a streamed answer may stay silent (a long prompt being
    /// prefilled) before a keep-alive event goes out.
    pub keep_alive: Duration,
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
    /// Refuse requests whose `model` is not this model's id or alias
    /// (otherwise any name is the one model served).
    pub strict_model: bool,
    /// Answer llama-server's `GET /slots` (off: 501, as llama-server's
    /// `--no-slots`).
    pub slots: bool,
    /// Serve the chat page at `/` (off: 404, as llama-server's `--no-ui`).
    pub ui: bool,
    /// Origins allowed to call the server from a browser (`*` for any);
    /// empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// A chat template in place of the model's own.
    pub chat_template: Option<TemplateChoice>,
    /// The engine's settings (context, threads, kernels).
    pub engine: EngineConfig,
    /// Speculative decoding, when on: a draft model (path, known name or
    /// `hf:…`; it runs with the engine's settings) and the settings.
    pub speculation: Option<(Option<String>, minfer_engine::SpecConfig)>,
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
