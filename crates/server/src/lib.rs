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
//! - `start` puts a server together (state, start-up loads, the reaper of
//!   idle models); `local` is the server in process, without a socket,
//!   for embedders such as the Python package.

mod anthropic;
mod calls;
mod config;
mod error;
mod events;
mod gather;
mod guard;
mod http;
mod llama;
mod local;
mod metrics;
mod metrics_llama;
mod models;
mod ollama;
mod openai;
mod output;
mod responses;
mod router;
mod slots;
mod start;
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
use std::time::Duration;

use minfer_engine::Store;
use tokio::net::TcpListener;

pub use config::{parse_reasoning, reasoning_budget, ModelConfig, ModelsConfig, ServerConfig};
pub use error::ServeError;
pub use http::ApiError;
pub use local::{Local, Piece, Reply};
pub use metrics::Metrics;

/// Reads a `keep_alive` value (Ollama's: seconds or a duration such as
/// `"5m"`; negative: for ever): `Some(None)` for ever, `Some(Some(d))`.
///
/// # Errors
/// When the value is no duration.
pub fn keep_alive(v: &serde_json::Value) -> Result<Option<Option<Duration>>, ApiError> {
    models::keep::parse(Some(v))
}
pub use template::TemplateChoice;

use start::{assemble, reap, wait_loaded};

/// What the server tells its caller once it is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The bound address.
    pub addr: SocketAddr,
    /// The id of the model loaded at start, or none when models load
    /// as requests name them.
    pub model: Option<String>,
    /// How many models the catalog lists.
    pub listed: usize,
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
        let on_ready = |r: &Ready| match &r.model {
            Some(m) => println!("minfer serve: listening on http://{} with model {m}", r.addr),
            None => println!(
                "minfer serve: listening on http://{} with {} models, each loaded when a request names it",
                r.addr, r.listed
            ),
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

/// Serves on `listener` until `shutdown` resolves, then drains and returns.
/// The model given at start (and any preset's `load-on-startup`) loads on
/// its own thread while `/health` answers 503; `on_ready` is called once
/// it is loaded (at once when there is none).
///
/// # Errors
/// [`ServeError::Engine`] when the model given at start cannot be loaded;
/// [`ServeError::Config`] for `n_parallel` 0, a bad engine setting, or a
/// preset file or models directory that cannot be read.
pub async fn run(
    listener: TcpListener,
    store: Store,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(&Ready),
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    let (shared, default, listed) = assemble(store, &cfg)?;

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
            s.models.cancel_all();
        });
        drained(&drain_shared.metrics, drain).await;
    };
    let app = router::router(shared.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(graceful)
            .await
    });
    let reaping = tokio::spawn(reap(shared.clone()));

    let load_result = match default {
        None => Ok(None),
        Some(entry) => {
            let entry = entry.map_err(|e| ServeError::Config(e.message))?;
            wait_loaded(&shared, &entry.id).await.map(Some)
        }
    };
    match &load_result {
        Ok(model) => on_ready(&Ready {
            addr,
            model: model.clone(),
            listed,
        }),
        Err(_) => {
            let _ = stop_tx.send(true);
        }
    }
    let served = server
        .await
        .map_err(|e| ServeError::Config(format!("server task: {e}")));
    reaping.abort();
    let models = shared.clone();
    // The model threads end within one step once told.
    let _ = tokio::task::spawn_blocking(move || models.models.stop_all()).await;
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
