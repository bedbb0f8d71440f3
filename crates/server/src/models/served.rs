//! What a loaded model is to the handlers: the model, the names it
//! answers to, its template and what it runs with.

use std::sync::Arc;

use minfer_engine::{ChatTemplate, LoadedModel};

use crate::config::{ModelConfig, RequestDefaults};
use crate::template::Abilities;

/// A loaded model with the names it answers to.
pub struct Served {
    /// The model.
    pub loaded: Arc<LoadedModel>,
    /// The id reported by `/v1/models` (the name or file stem given).
    pub id: String,
    /// Other names a request may use: the spec as given and the model's
    /// own name.
    pub aliases: Vec<String>,
    /// The names given with `--alias`, and the `--tags`, which
    /// `/v1/models` lists.
    pub named: (Vec<String>, Vec<String>),
    /// The chat template in use: `--chat-template` or the model's own.
    pub template: Option<ChatTemplate>,
    /// What the template knows beyond plain turns.
    pub abilities: Abilities,
    /// What it runs with.
    pub cfg: ModelConfig,
}

impl Served {
    /// What a request gets for the limit, temperature and seed it does
    /// not set (`-n`, `--temp`, `--seed`).
    pub fn defaults(&self) -> RequestDefaults {
        self.cfg.defaults()
    }
}
