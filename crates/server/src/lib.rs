//! `minfer serve`: an OpenAI-compatible HTTP server over the engine.
//!
//! One dedicated thread owns the model's [`Scheduler`](minfer_engine::Scheduler)
//! and steps every admitted request together (continuous batching, prefix
//! reuse and chunked prefill come from the scheduler). The HTTP side runs on
//! tokio and axum; its handlers parse and check requests, then talk to the
//! model thread only through channels. Up to `n_parallel` requests
//! generate at once, up to `queue` more wait, and past that a request gets
//! 503. A client that goes away cancels its generation before the next
//! step. On shutdown `/health` turns 503 and new generations are refused
//! (a router's health check takes the replica out), connections are still
//! accepted while running requests finish, for at most `drain_timeout`;
//! then the server stops accepting, cancels what is left and returns.
//!
//! # Modules
//!
//! A request flows in a straight line: `router` → the API's folder →
//! `http` (body, admission: the one check of the prompt against the
//! context, then a place in the queue) → `worker` (the model thread) →
//! the engine's scheduler; the answer comes back as typed `events` that
//! each API renders in its own shape.
//!
//! - APIs, one folder each: `openai` (chat and text completions,
//!   embeddings, models; its request types are the base the others
//!   translate into), `anthropic` (Messages), `responses` (OpenAI
//!   Responses), `ollama`, `llama` (llama-server's `/health`,
//!   `/metrics`, `/tokenize`, `/detokenize` and the page at `/`).
//! - `router` wires paths to handlers; `guard` is what every request
//!   passes first (CORS preflight, API key, request counting).
//! - `http`: what every API's handlers share about HTTP (body, JSON
//!   errors, off-thread preparation, CORS, admission).
//! - Below the APIs: `translate` (what Messages and Responses share:
//!   answer blocks and their SSE stream), `gather` (a whole answer),
//!   `output` (splitting an answer into reasoning, content and calls),
//!   `calls` (tool-call syntaxes and parsers), `tools` (a request's
//!   tools and their constraint), `template` (chat templates and what
//!   they can do), `state` (what handlers share, admission counts),
//!   `worker` and `events` (the model thread and what it sends),
//!   `metrics`, `config`.

mod anthropic;
mod calls;
mod config;
mod events;
mod gather;
mod guard;
mod http;
mod llama;
mod metrics;
mod metrics_llama;
mod ollama;
mod openai;
mod output;
mod responses;
mod router;
mod state;
mod template;
#[cfg(test)]
mod testing;
mod tools;
mod translate;
mod worker;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use minfer_engine::{LoadedModel, Store};
use tokio::net::TcpListener;

pub use config::ServerConfig;
pub use http::ApiError;
pub use metrics::Metrics;
pub use template::TemplateChoice;

use state::{Served, Shared};
use worker::{Cmd, Worker};

/// Why a server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The model could not be loaded.
    #[error(transparent)]
    Engine(#[from] minfer_engine::EngineError),
    /// The HTTP server or the runtime failed.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
    /// A setting is out of range.
    #[error("invalid server setting: {0}")]
    Config(String),
}

/// What the server tells its caller once the model is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The bound address.
    pub addr: SocketAddr,
    /// The model id clients use.
    pub model: String,
}

/// Binds `host:port` and serves until Ctrl-C or SIGTERM, then drains and
/// returns. Prints one line with the address and the model when ready.
///
/// # Errors
/// [`ServeError`] when the address cannot be bound, the model cannot be
/// loaded, or a setting is invalid.
pub fn serve(store: Store, host: &str, port: u16, cfg: ServerConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("minfer-http")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let addr = format!("{host}:{port}");
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let on_ready = |r: &Ready| {
            println!(
                "minfer serve: listening on http://{} with model {}",
                r.addr, r.model
            );
        };
        run(listener, store, cfg, shutdown_signal(), on_ready).await
    })
}

/// Resolves when the process gets Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// The id a model is served under: a known name as given, a file's stem.
fn model_id(spec: &str) -> String {
    let p = std::path::Path::new(spec);
    if spec.ends_with(".gguf") {
        if let Some(stem) = p.file_stem() {
            return stem.to_string_lossy().into_owned();
        }
    }
    spec.rsplit('/').next().unwrap_or(spec).to_string()
}

/// Serves on `listener` until `shutdown` resolves, then drains and returns.
/// The model loads on its own thread while `/health` answers 503;
/// `on_ready` is called once it is loaded.
///
/// # Errors
/// [`ServeError::Engine`] when the model cannot be loaded;
/// [`ServeError::Config`] for `n_parallel` 0 or a bad engine setting.
pub async fn run(
    listener: TcpListener,
    store: Store,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(&Ready),
) -> Result<(), ServeError> {
    if cfg.n_parallel == 0 {
        return Err(ServeError::Config("-np must be at least 1".into()));
    }
    let addr = listener.local_addr()?;
    let metrics = Arc::new(Metrics::default());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    metrics.started_unix.store(
        now.map_or(0, |d| d.as_secs()),
        std::sync::atomic::Ordering::Relaxed,
    );
    let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
    let shared = Arc::new(Shared::new(cfg.clone(), cmd_tx, metrics.clone()));
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();

    let thread_shared = shared.clone();
    let model_thread = std::thread::Builder::new()
        .name("minfer-model".into())
        .spawn(move || {
            let loaded = match load(&store, &thread_shared.cfg) {
                Ok(l) => l,
                Err(e) => {
                    let _ = loaded_tx.send(Err(e));
                    return;
                }
            };
            let (served, sched) = loaded;
            let id = served.id.clone();
            let _ = thread_shared.served.set(served);
            let _ = loaded_tx.send(Ok(id));
            let n_parallel = thread_shared.cfg.n_parallel;
            Worker::new(sched, n_parallel, metrics).run(cmd_rx);
        })?;

    // Shutdown: refuse new generations and answer 503 on `/health` (a
    // router's health check takes the replica out), keep accepting
    // connections while admitted generations finish, then stop accepting;
    // after the drain period cancel whatever still runs so the
    // connections close.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let drain_shared = shared.clone();
    let drain = cfg.drain_timeout;
    let graceful = async move {
        let mut stop_rx = stop_rx;
        tokio::select! {
            _ = shutdown => {}
            _ = stop_rx.wait_for(|s| *s) => {}
        }
        drain_shared.draining.store(true, Relaxed);
        let s = drain_shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(drain).await;
            s.send(Cmd::CancelAll);
        });
        drained(&drain_shared.metrics, drain).await;
    };
    let app = router::router(shared.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(graceful)
            .await
    });

    let load_result = match loaded_rx.await {
        Ok(r) => r,
        Err(_) => Err(ServeError::Config(
            "the model thread stopped while loading".into(),
        )),
    };
    match &load_result {
        Ok(model) => on_ready(&Ready {
            addr,
            model: model.clone(),
        }),
        Err(_) => {
            let _ = stop_tx.send(true);
        }
    }
    let served = server
        .await
        .map_err(|e| ServeError::Config(format!("server task: {e}")));
    shared.send(Cmd::CancelAll);
    shared.send(Cmd::Shutdown);
    // The model thread ends within one step once told.
    let _ = tokio::task::spawn_blocking(move || model_thread.join()).await;
    load_result?;
    served??;
    Ok(())
}

/// Resolves once no generation has run or waited for three polls in a row
/// (a request admitted just before the drain began reaches the model
/// thread's counts within a poll), or after `limit`. Connections still
/// open then are waited for by the HTTP server's own graceful shutdown.
async fn drained(metrics: &Metrics, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    let mut idle_polls = 0;
    while idle_polls < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if metrics.active.load(Relaxed) + metrics.queued.load(Relaxed) == 0 {
            idle_polls += 1;
        } else {
            idle_polls = 0;
        }
    }
}

/// Loads the model and starts its scheduler (on the model thread).
fn load(
    store: &Store,
    cfg: &ServerConfig,
) -> Result<(Served, minfer_engine::Scheduler), ServeError> {
    let loaded = LoadedModel::load(store, &cfg.model)?;
    let template = match &cfg.chat_template {
        Some(choice) => Some(choice.load().map_err(ServeError::Config)?),
        None => loaded.template().cloned(),
    };
    if let (Some(choice), Some(t)) = (&cfg.chat_template, &template) {
        template::check(t).map_err(|e| ServeError::Config(format!("{choice}: {e}")))?;
    }
    let abilities = template
        .as_ref()
        .map(|t| template::abilities(t, loaded.tokenizer()))
        .unwrap_or_default();
    let mut sched = loaded.scheduler(cfg.engine)?;
    if let Some((draft, spec)) = &cfg.speculation {
        let draft = match draft {
            Some(name) => {
                let d = LoadedModel::load(store, name)?;
                Some(
                    minfer_engine::DraftModel::new(
                        d.runtime(cfg.engine)?,
                        d.tokenizer(),
                        loaded.tokenizer(),
                        loaded.model().n_vocab(),
                    )
                    .map_err(|e| ServeError::Config(format!("--draft {name}: {e}")))?,
                )
            }
            None => None,
        };
        let spec = minfer_engine::Speculation::new(*spec, draft)
            .map_err(|e| ServeError::Config(e.to_string()))?;
        sched.set_speculation(Some(spec));
    }
    // llama-server keeps its aliases in a sorted set: the first is the id.
    let given: std::collections::BTreeSet<String> = cfg
        .alias
        .iter()
        .flat_map(|a| a.split(','))
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    let given: Vec<String> = given.into_iter().collect();
    let id = given
        .first()
        .cloned()
        .unwrap_or_else(|| model_id(&cfg.model));
    let mut aliases = vec![cfg.model.clone(), loaded.name(), model_id(&cfg.model)];
    aliases.extend(given.iter().cloned());
    aliases.retain(|a| a != &id);
    aliases.sort();
    aliases.dedup();
    let served = Served {
        loaded: Arc::new(loaded),
        id,
        aliases,
        named: (given, cfg.tags.clone()),
        template,
        abilities,
        strict_model: cfg.strict_model,
        defaults: config::RequestDefaults {
            max_tokens: cfg.n_predict,
            temp: cfg.temp,
            seed: cfg.seed,
        },
    };
    Ok((served, sched))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids() {
        assert_eq!(model_id("smollm2-135m-instruct"), "smollm2-135m-instruct");
        assert_eq!(model_id("/x/y/qwen-q4.gguf"), "qwen-q4");
        assert_eq!(model_id("hf:o/r/f.gguf"), "f");
    }
}
