//! Putting a server together: the state every front end shares (catalog,
//! pool, start-up loads), waiting for the default model, and the reaper
//! of idle models. Both the socket server and the in-process one start
//! here.

use std::sync::Arc;
use std::time::Duration;

use minfer_engine::Store;

use crate::config::ServerConfig;
use crate::error::ServeError;
use crate::http::ApiError;
use crate::metrics::Metrics;
use crate::models::{self, Models};
use crate::state::Shared;

/// The shared state of a server of `cfg`: the catalog scanned, the pool
/// made and the start-up models asked to load (the default one, when
/// there is one, is returned for the caller to wait on); and how many
/// models the catalog lists.
///
/// # Errors
/// [`ServeError::Config`] for `n_parallel` 0, or a preset file or models
/// directory that cannot be read.
pub(crate) fn assemble(store: Store, cfg: &ServerConfig) -> Result<Assembled, ServeError> {
    if cfg.per_model.n_parallel == 0 {
        return Err(ServeError::Config("-np must be at least 1".into()));
    }
    let metrics = Arc::new(Metrics::default());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    metrics.started_unix.store(
        now.map_or(0, |d| d.as_secs()),
        std::sync::atomic::Ordering::Relaxed,
    );
    let catalog =
        models::Catalog::scan(cfg, &store).map_err(|e| ServeError::Config(e.to_string()))?;
    let listed = catalog.entries.len();
    let pool = Models::new(
        (cfg.models.clone(), cfg.per_model.clone(), cfg.strict_model),
        store,
        catalog,
        metrics.clone(),
    );
    let shared = Arc::new(Shared::new(cfg.clone(), pool, metrics.clone()));
    let default = cfg.model.as_ref().map(|_| shared.models.resolve(""));
    for id in shared.models.on_startup() {
        shared
            .models
            .load(&id)
            .map_err(|e| ServeError::Config(e.message))?;
    }

    Ok((shared, default, listed))
}

/// What [`assemble`] makes: the state, the default model's entry (or why
/// it cannot be had), and how many models are listed.
pub(crate) type Assembled = (Arc<Shared>, Option<Result<models::Entry, ApiError>>, usize);

/// How often idle models are checked against their keep-alive.
const REAP_EVERY: Duration = Duration::from_millis(500);

/// Unloads the models idle past their keep-alive, for ever.
pub(crate) async fn reap(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        for id in shared.models.reap() {
            eprintln!("minfer serve: unloaded {id}, idle past its keep-alive");
        }
    }
}

/// Waits until the model `id` is loaded; its id, or why it failed.
pub(crate) async fn wait_loaded(shared: &Arc<Shared>, id: &str) -> Result<String, ServeError> {
    loop {
        let model = shared.models.live().into_iter().find(|m| m.entry.id == id);
        match model.map(|m| (m.status(), m)) {
            Some((models::Status::Loaded, m)) => {
                return Ok(m.served().map_or_else(|_| id.to_string(), |s| s.id.clone()))
            }
            Some((models::Status::Failed(why, _), _)) => return Err(ServeError::Load(why)),
            Some((models::Status::Loading, _)) => {}
            None => {
                return Err(ServeError::Config(format!(
                    "model {id} was unloaded while loading"
                )))
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
