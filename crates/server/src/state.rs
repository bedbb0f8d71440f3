//! What the handlers share: the configuration, the loaded model (once it
//! is), the channel to the model thread, admission control and metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};

use minfer_engine::{ChatTemplate, LoadedModel};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::config::RequestDefaults;
use crate::config::ServerConfig;
use crate::events::Out;
use crate::http::{ApiError, Cors};
use crate::metrics::Metrics;
use crate::template::Abilities;
use crate::worker::{Cmd, Job, Part};

/// The model, once loaded, with the names it answers to.
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
    /// Whether a request's `model` must name this model (otherwise any
    /// name, or none, is this model, as llama-server allows).
    pub strict_model: bool,
    /// What a request gets for the limit, temperature and seed it does
    /// not set (`-n`, `--temp`, `--seed`).
    pub defaults: RequestDefaults,
}

impl Served {
    /// Checks a request's `model` field (any name passes unless
    /// `--strict-model`).
    ///
    /// # Errors
    /// 404 `model_not_found` for a model this server does not serve.
    pub fn check_model(&self, name: &str) -> Result<(), ApiError> {
        if !self.strict_model || name == self.id || self.aliases.iter().any(|a| a == name) {
            Ok(())
        } else {
            Err(ApiError::unknown_model(name, &self.id))
        }
    }
}

/// State shared by every handler.
pub struct Shared {
    /// The server's settings.
    pub cfg: ServerConfig,
    /// Set by the model thread when the model is loaded.
    pub served: OnceLock<Served>,
    /// Commands to the model thread.
    cmds: Mutex<Sender<Cmd>>,
    /// Requests admitted and not finished (running or queued).
    inflight: AtomicUsize,
    next_id: AtomicU64,
    /// Set when shutdown begins: new generations are refused.
    pub draining: AtomicBool,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The origins allowed to call from a browser (`--cors-origins`).
    pub cors: Cors,
}

impl Shared {
    /// Shared state sending commands on `cmds`.
    pub fn new(cfg: ServerConfig, cmds: Sender<Cmd>, metrics: Arc<Metrics>) -> Shared {
        Shared {
            cors: Cors::new(&cfg.cors_origins),
            cfg,
            served: OnceLock::new(),
            cmds: Mutex::new(cmds),
            inflight: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            draining: AtomicBool::new(false),
            metrics,
        }
    }

    /// The model, or 503 while it is loading.
    ///
    /// # Errors
    /// 503 while the model loads.
    pub fn served(&self) -> Result<&Served, ApiError> {
        self.served
            .get()
            .ok_or_else(|| ApiError::unavailable("the model is still loading"))
    }

    /// Requests admitted and not finished (running or queued).
    pub fn running(&self) -> usize {
        self.inflight.load(Relaxed)
    }

    /// Sends a command to the model thread (a thread that is gone has
    /// nothing left to do with it).
    pub fn send(&self, cmd: Cmd) {
        let tx = self.cmds.lock().unwrap_or_else(|e| e.into_inner());
        let _ = tx.send(cmd);
    }

    /// Takes a place for one generation request and hands it to the
    /// model thread (callers go through
    /// [`admit`](crate::http::admit), which checks the prompts first);
    /// with `score`, each prompt's own log-probabilities (with that many
    /// alternatives) come first.
    ///
    /// # Errors
    /// 503 when `-np` are running and `--queue` are waiting, or when the
    /// server is shutting down.
    pub fn submit(
        self: &Arc<Self>,
        parts: Vec<Part>,
        score: Option<u8>,
    ) -> Result<(Ticket, UnboundedReceiver<Out>), ApiError> {
        if self.draining.load(Relaxed) {
            return Err(ApiError::unavailable("the server is shutting down"));
        }
        let limit = self.cfg.n_parallel + self.cfg.queue;
        let admitted = self
            .inflight
            .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
            .is_ok();
        if !admitted {
            return Err(ApiError::unavailable(format!(
                "the server is busy: {} requests running and {} queued; retry later",
                self.cfg.n_parallel, self.cfg.queue
            ))
            .with_code("queue_full"));
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        let (tx, rx) = unbounded_channel();
        self.send(Cmd::Submit(Box::new(Job {
            id,
            parts,
            score,
            out: tx,
        })));
        let ticket = Ticket {
            shared: self.clone(),
            id,
        };
        Ok((ticket, rx))
    }
}

/// An admitted request. Dropping it (the response finished, or the client
/// went away and the response was dropped) cancels the generation if it is
/// still running and frees its place in the queue.
pub struct Ticket {
    shared: Arc<Shared>,
    id: u64,
}

impl Ticket {
    /// The request's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Ends the generation now as a finished answer: its choices end
    /// normally (the receiver still gets their `Done`), the model stops
    /// computing. For answers known complete before the model says so.
    pub fn stop(&self) {
        self.shared.send(Cmd::Stop(self.id));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A finished request is unknown to the model thread by now, and
        // the cancel does nothing there.
        self.shared.send(Cmd::Cancel(self.id));
        self.shared.inflight.fetch_sub(1, Relaxed);
    }
}
