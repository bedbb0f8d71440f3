//! Many models in one server: the catalog of what can be loaded, the
//! models loaded now, and the rules between them.
//!
//! A request names its model; [`Models::get`] finds it in the catalog,
//! and loads it when it is not loaded (one load however many requests ask
//! at once). At most `--models-max` models, and at most `--models-memory`
//! bytes of weights and caches, stay loaded: to make room the least
//! recently used idle model is unloaded; a busy one never is, so a
//! request that finds no room waits, in arrival order, until a model goes
//! idle. A model idle for longer than its keep-alive is unloaded by
//! [`Models::reap`]. Every model runs on its own thread and all of them
//! compute on the process's one thread pool, so a step of one model waits
//! for at most one node of another.

pub mod catalog;
mod instance;
pub mod keep;
mod load;
mod memory;
pub mod preset;
mod served;

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use minfer_engine::Store;

pub use catalog::{Catalog, Entry, Source};
pub use instance::{Hold, Model, Status, Ticket, Wake};
pub use served::Served;

use crate::config::{ModelConfig, ModelsConfig};
use crate::http::ApiError;
use crate::metrics::Metrics;

/// A model that failed to load is not tried again for this long: the
/// requests waiting for it all get its error, not a load each.
const RETRY_FAILED: Duration = Duration::from_secs(10);

/// How often a waiting request looks at the client and the clock.
const POLL: Duration = Duration::from_millis(100);

/// The loaded models and the catalog.
pub struct Models {
    cfg: ModelsConfig,
    /// What a model the catalog does not list runs with.
    base: ModelConfig,
    store: Store,
    catalog: RwLock<Catalog>,
    /// The id of the model loaded at start, which requests that name no
    /// model (or, unless strict, an unknown one) get.
    default: Option<String>,
    strict: bool,
    state: Mutex<Pool>,
    wake: Arc<Wake>,
    metrics: Arc<Metrics>,
    next_id: Arc<AtomicU64>,
}

/// What the pool's lock guards.
#[derive(Default)]
struct Pool {
    /// Loading, loaded and failed models.
    live: Vec<Arc<Model>>,
    /// Ids of models requests wait to load, in arrival order, each with
    /// how many requests wait for it.
    queue: VecDeque<(String, usize)>,
}

/// A model's line in `/models`.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The catalog's entry.
    pub entry: Entry,
    /// `loaded`, `loading`, `unloaded` or `failed`.
    pub status: &'static str,
    /// Why it failed.
    pub error: Option<String>,
    /// The model, when loading or loaded.
    pub model: Option<Arc<Model>>,
}

impl Models {
    /// The pool over `catalog`; nothing is loaded yet.
    pub fn new(
        cfg: (ModelsConfig, ModelConfig, bool),
        store: Store,
        catalog: Catalog,
        metrics: Arc<Metrics>,
    ) -> Models {
        let (cfg, base, strict) = cfg;
        // Models come and go in this process: their buffers must go back
        // to the system when they do.
        memory::map_large_blocks();
        let default = catalog
            .entries
            .iter()
            .find(|e| e.source == Source::Startup)
            .map(|e| e.id.clone());
        Models {
            cfg,
            base,
            store,
            catalog: RwLock::new(catalog),
            default,
            strict,
            state: Mutex::new(Pool::default()),
            wake: Arc::new(Wake::default()),
            metrics,
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the server was started with a model, which requests that
    /// name none get.
    pub fn has_default(&self) -> bool {
        self.default.is_some()
    }

    /// Whether the server serves exactly the model it was started with
    /// (no directory, no presets, not the store): then any name means
    /// that model.
    pub fn single(&self) -> bool {
        self.default.is_some()
            && !self.cfg.store
            && self.cfg.dir.is_none()
            && self.cfg.preset.is_none()
    }

    /// The catalog's entry a request's `name` means.
    ///
    /// # Errors
    /// 400 when no name is given and there is no default model; 404 for
    /// a name no model answers to (unless a default model takes any name).
    pub fn resolve(&self, name: &str) -> Result<Entry, ApiError> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let default = || {
            self.default
                .as_ref()
                .and_then(|d| cat.entries.iter().find(|e| &e.id == d))
                .cloned()
        };
        if name.is_empty() {
            return default().ok_or_else(|| {
                ApiError::bad_param(
                    "model",
                    "the request names no model, and this server has no default one",
                )
            });
        }
        // A server of one model pulls no other: any name is that model.
        let found = match self.single() {
            true => cat.entries.iter().find(|e| e.answers_to(name)).cloned(),
            false => cat.find(name, &self.base),
        };
        if let Some(e) = found {
            return Ok(e);
        }
        // A loaded model also answers to its own name (`general.name`).
        let named = self.pool().live.iter().find_map(|m| {
            let served = m.served().ok()?;
            served
                .aliases
                .iter()
                .any(|a| a == name)
                .then(|| m.entry.clone())
        });
        if let Some(e) = named {
            return Ok(e);
        }
        match default() {
            Some(d) if !self.strict => Ok(d),
            _ => Err(ApiError::unknown_model(
                name,
                self.default
                    .as_deref()
                    .unwrap_or("a model of GET /v1/models"),
            )),
        }
    }

    /// Whether the model given at start is loading (at start, or again
    /// after an unload). Unloaded, it is not: it loads when asked.
    pub fn default_loading(&self) -> bool {
        let Some(id) = &self.default else {
            return false;
        };
        self.pool()
            .live
            .iter()
            .any(|m| &m.entry.id == id && m.status() == Status::Loading)
    }

    /// The store the models come from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The catalog's entry that answers to `name` exactly (its id or an
    /// alias): no default, no pull.
    pub fn resolve_listed(&self, name: &str) -> Option<Entry> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        cat.entries.iter().find(|e| e.answers_to(name)).cloned()
    }

    /// The model loaded at start, or the only one loaded; no load, no wait.
    ///
    /// # Errors
    /// 503 while it loads; 400 when no model is loaded and the server has
    /// no default.
    pub fn current(&self, name: &str) -> Result<Arc<Model>, ApiError> {
        let entry = self.resolve(name)?;
        let pool = self.pool();
        pool.live
            .iter()
            .find(|m| m.entry.id == entry.id && m.status() == Status::Loaded)
            .cloned()
            .ok_or_else(|| match self.has_default() && name.is_empty() {
                true => ApiError::unavailable("the model is still loading"),
                false => ApiError::unavailable(format!("model {} is not loaded", entry.id)),
            })
    }

    /// The model a request names, loaded: at once when it is, else after
    /// its load (started here when `autoload`), waiting at most the
    /// configured time, and only while `gone` says the client is there.
    ///
    /// # Errors
    /// The 400/404 of [`resolve`](Self::resolve); 400 for a model not
    /// loaded without `autoload`; 500 naming the file for a model that
    /// cannot be loaded; 503 with `Retry-After` when the wait runs out or
    /// the client has gone.
    pub fn get(
        &self,
        name: &str,
        autoload: bool,
        gone: &dyn Fn() -> bool,
    ) -> Result<Arc<Model>, ApiError> {
        let entry = self.resolve(name)?;
        let deadline = Instant::now() + self.cfg.load_wait;
        let mut queued = false;
        let result = loop {
            match self.try_get(&entry, autoload, &mut queued) {
                Ok(Some(m)) => break Ok(m),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            if gone() || Instant::now() >= deadline {
                break Err(ApiError::unavailable(format!(
                    "model {} is still loading, or waits for room to load; retry later",
                    entry.id
                ))
                .with_retry_after(5));
            }
            let id = &entry.id;
            self.wake.wait_unless(POLL, || {
                self.pool()
                    .live
                    .iter()
                    .any(|m| &m.entry.id == id && m.status() != Status::Loading)
            });
        };
        if queued {
            self.leave_queue(&entry.id);
        }
        if let Ok(m) = &result {
            m.touch();
        }
        result
    }

    /// One look at the pool for `entry`: the model when loaded, `None`
    /// to wait, or an error.
    fn try_get(
        &self,
        entry: &Entry,
        autoload: bool,
        queued: &mut bool,
    ) -> Result<Option<Arc<Model>>, ApiError> {
        let mut pool = self.pool();
        if let Some(m) = pool.live.iter().find(|m| m.entry.id == entry.id).cloned() {
            return match m.status() {
                Status::Loaded => Ok(Some(m)),
                Status::Loading => Ok(None),
                Status::Failed(why, at) if at.elapsed() < RETRY_FAILED => {
                    Err(ApiError::internal(format!("model {}: {why}", entry.id)))
                }
                Status::Failed(..) => {
                    pool.live.retain(|o| !Arc::ptr_eq(o, &m));
                    Ok(None)
                }
            };
        }
        if !autoload {
            return Err(ApiError::bad_param(
                "model",
                format!(
                    "model {} is not loaded; load it with POST /models/load",
                    entry.id
                ),
            ));
        }
        if !*queued {
            match pool.queue.iter_mut().find(|(id, _)| *id == entry.id) {
                Some((_, n)) => *n += 1,
                None => pool.queue.push_back((entry.id.clone(), 1)),
            }
            *queued = true;
        }
        if pool.queue.front().map(|(id, _)| id) != Some(&entry.id) {
            return Ok(None);
        }
        if !self.make_room(&mut pool, entry) {
            return Ok(None);
        }
        pool.queue.pop_front();
        *queued = false;
        self.start(&mut pool, entry.clone())?;
        Ok(None)
    }

    /// A request that waited for `id` stops waiting.
    fn leave_queue(&self, id: &str) {
        let mut pool = self.pool();
        if let Some(i) = pool.queue.iter().position(|(q, _)| q == id) {
            pool.queue[i].1 -= 1;
            if pool.queue[i].1 == 0 {
                pool.queue.remove(i);
            }
        }
        drop(pool);
        self.wake.notify();
    }

    /// Unloads least recently used idle models until `entry` fits; false
    /// when it cannot fit yet (every other model is busy or pinned).
    fn make_room(&self, pool: &mut Pool, entry: &Entry) -> bool {
        loop {
            let counted: Vec<&Arc<Model>> = pool
                .live
                .iter()
                .filter(|m| !matches!(m.status(), Status::Failed(..)))
                .collect();
            let used: u64 = counted
                .iter()
                .map(|m| m.bytes.load(std::sync::atomic::Ordering::Relaxed))
                .sum();
            let need = entry.size.unwrap_or(0);
            let over_memory = self
                .cfg
                .memory
                .is_some_and(|limit| !counted.is_empty() && used + need > limit);
            if counted.len() < self.cfg.max.max(1) && !over_memory {
                return true;
            }
            let victim = counted
                .iter()
                .filter(|m| m.idle() && !m.entry.cfg.pinned)
                .min_by_key(|m| m.last_used())
                .map(|m| Arc::clone(m));
            let Some(victim) = victim else {
                return false;
            };
            pool.live.retain(|m| !Arc::ptr_eq(m, &victim));
            victim.stop();
        }
    }

    fn start(&self, pool: &mut Pool, entry: Entry) -> Result<(), ApiError> {
        let keep = match entry.source {
            // The model the server was started with stays, as in
            // llama-server, unless a request's keep_alive says otherwise.
            Source::Startup => None,
            _ => self.cfg.idle,
        };
        let shared = (
            self.metrics.clone(),
            self.next_id.clone(),
            self.wake.clone(),
        );
        let slot_files = self.cfg.slot_save_path.is_some();
        let m = Model::start(entry, self.store.clone(), keep, shared, slot_files)
            .map_err(|e| ApiError::internal(format!("cannot start a model thread: {e}")))?;
        pool.live.push(m);
        Ok(())
    }

    /// Starts loading a model now (`POST /models/load`, a preset's
    /// `load-on-startup`), making room as a request would, without
    /// waiting for the load.
    ///
    /// # Errors
    /// As [`resolve`](Self::resolve); 400 when it is loaded or loading
    /// already; 503 when every loaded model is busy.
    pub fn load(&self, name: &str) -> Result<Entry, ApiError> {
        let entry = self.resolve(name)?;
        let mut pool = self.pool();
        if let Some(m) = pool.live.iter().find(|m| m.entry.id == entry.id).cloned() {
            if !matches!(m.status(), Status::Failed(..)) {
                return Err(ApiError::bad_request(format!(
                    "model {} is already loaded or loading",
                    entry.id
                )));
            }
            pool.live.retain(|o| !Arc::ptr_eq(o, &m));
        }
        if !self.make_room(&mut pool, &entry) {
            return Err(
                ApiError::unavailable("every loaded model is busy; retry later")
                    .with_retry_after(5),
            );
        }
        self.start(&mut pool, entry.clone())?;
        Ok(entry)
    }

    /// Unloads a model now (`POST /models/unload`, `keep_alive: 0`),
    /// cancelling what it runs.
    ///
    /// # Errors
    /// As [`resolve`](Self::resolve); 400 when it is not loaded.
    pub fn unload(&self, name: &str) -> Result<Entry, ApiError> {
        let entry = self.resolve(name)?;
        let mut pool = self.pool();
        let Some(m) = pool.live.iter().find(|m| m.entry.id == entry.id).cloned() else {
            return Err(ApiError::bad_request(format!(
                "model {} is not loaded",
                entry.id
            )));
        };
        pool.live.retain(|o| !Arc::ptr_eq(o, &m));
        drop(pool);
        m.stop();
        self.wake.notify();
        Ok(entry)
    }

    /// Unloads every idle model whose keep-alive has run out; returns
    /// their ids.
    pub fn reap(&self) -> Vec<String> {
        let now = Instant::now();
        let mut pool = self.pool();
        let expired: Vec<Arc<Model>> = pool
            .live
            .iter()
            .filter(|m| m.idle() && !m.entry.cfg.pinned && m.expires().is_some_and(|t| t <= now))
            .cloned()
            .collect();
        pool.live
            .retain(|m| !expired.iter().any(|e| Arc::ptr_eq(e, m)));
        drop(pool);
        for m in &expired {
            m.stop();
        }
        if !expired.is_empty() {
            self.wake.notify();
        }
        expired.iter().map(|m| m.entry.id.clone()).collect()
    }

    /// The models loading or loaded (and failed), in load order.
    pub fn live(&self) -> Vec<Arc<Model>> {
        self.pool().live.clone()
    }

    /// Every model of the catalog with its state, then any other loaded
    /// (a known name pulled on request).
    pub fn list(&self) -> Vec<Listed> {
        let live = self.live();
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Listed> = cat
            .entries
            .iter()
            .map(|e| listed(e.clone(), live.iter().find(|m| m.entry.id == e.id)))
            .collect();
        for m in &live {
            if !out.iter().any(|l| l.entry.id == m.entry.id) {
                out.push(listed(m.entry.clone(), Some(m)));
            }
        }
        out
    }

    /// Reads the catalog's sources again (`GET /models?reload=1`); loaded
    /// models keep running.
    ///
    /// # Errors
    /// A 500 naming the preset file or directory that cannot be read.
    pub fn reload(&self, cfg: &crate::config::ServerConfig) -> Result<(), ApiError> {
        let fresh =
            Catalog::scan(cfg, &self.store).map_err(|e| ApiError::internal(e.to_string()))?;
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// The ids of the catalog's models to load at start.
    pub fn on_startup(&self) -> Vec<String> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        cat.entries
            .iter()
            .filter(|e| e.load_on_startup)
            .map(|e| e.id.clone())
            .collect()
    }

    /// Stops every model and waits for their threads (shutdown).
    pub fn stop_all(&self) {
        let live: Vec<Arc<Model>> = std::mem::take(&mut self.pool().live);
        for m in &live {
            m.stop();
        }
        for m in &live {
            m.join();
        }
    }

    /// Cancels what every model runs (the end of the drain period).
    pub fn cancel_all(&self) {
        for m in self.live() {
            m.send(crate::worker::Cmd::CancelAll);
        }
    }
}

#[cfg(test)]
impl Models {
    /// Puts the catalog's model `id` in the pool as loading, for good: no
    /// thread loads it. Returns the end of its commands.
    pub fn never_loading(&self, id: &str) -> std::sync::mpsc::Receiver<crate::worker::Cmd> {
        let entry = self.resolve(id).expect("a catalog entry");
        let shared = (
            self.metrics.clone(),
            self.next_id.clone(),
            self.wake.clone(),
        );
        let (m, rx) = Model::unstarted(entry, shared);
        self.pool().live.push(m);
        rx
    }
}

fn listed(entry: Entry, model: Option<&Arc<Model>>) -> Listed {
    let (status, error) = match model.map(|m| m.status()) {
        None => ("unloaded", None),
        Some(Status::Loading) => ("loading", None),
        Some(Status::Loaded) => ("loaded", None),
        Some(Status::Failed(why, _)) => ("failed", Some(why)),
    };
    Listed {
        entry,
        status,
        error,
        model: model.cloned(),
    }
}
