//! What the handlers share: the configuration, the models, metrics; and
//! what a loaded model is to them.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use crate::config::ServerConfig;
use crate::http::{ApiError, Cors};
use crate::metrics::Metrics;
use crate::models::{Model, Models};

/// State shared by every handler.
pub struct Shared {
    /// The server's settings.
    pub cfg: ServerConfig,
    /// The models: the catalog and those loaded.
    pub models: Models,
    /// Set when shutdown begins: new generations are refused.
    pub draining: AtomicBool,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The origins allowed to call from a browser (`--cors-origins`).
    pub cors: Cors,
}

impl Shared {
    /// Shared state over `models`.
    pub fn new(cfg: ServerConfig, models: Models, metrics: Arc<Metrics>) -> Shared {
        Shared {
            cors: Cors::new(&cfg.cors_origins),
            cfg,
            models,
            draining: AtomicBool::new(false),
            metrics,
        }
    }

    /// The model a request names when it is loaded, without loading or
    /// waiting (endpoints that only describe a model).
    ///
    /// # Errors
    /// As [`Models::current`].
    pub fn current(&self, name: &str) -> Result<Arc<Model>, ApiError> {
        self.models.current(name)
    }
}

/// A request being prepared off the async workers: the shared state, and
/// whether its client has gone (its handler was dropped), which a wait
/// for a model to load watches.
pub struct Preparing {
    shared: Arc<Shared>,
    gone: Arc<AtomicBool>,
}

impl std::ops::Deref for Preparing {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl Preparing {
    /// The model a request names, loaded (see [`Models::get`]), as long
    /// as the client waits; `autoload` as the server's setting.
    ///
    /// # Errors
    /// As [`Models::get`].
    pub fn model(&self, name: &str) -> Result<Arc<Model>, ApiError> {
        let gone = || self.gone.load(Relaxed);
        self.models.get(name, self.cfg.models.autoload, &gone)
    }
}

/// Sets its call's `gone` when dropped: a handler dropped before its
/// preparation finished had its client go away.
pub struct PreparingGuard(Arc<AtomicBool>);

impl Drop for PreparingGuard {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// A call on `shared`, and the guard that marks it gone when dropped.
pub fn preparing(shared: &Arc<Shared>) -> (Preparing, PreparingGuard) {
    let gone = Arc::new(AtomicBool::new(false));
    (
        Preparing {
            shared: shared.clone(),
            gone: gone.clone(),
        },
        PreparingGuard(gone),
    )
}
