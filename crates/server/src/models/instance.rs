//! One model of the catalog while it is loading or loaded: its thread
//! (which loads it, then runs its [`Worker`]), the channel to that thread,
//! its admission count and when it was last used.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use minfer_engine::Store;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::catalog::Entry;
use crate::events::{Out, Report};
use crate::http::ApiError;
use crate::metrics::Metrics;
use crate::models::Served;
use crate::worker::{Cmd, Job, Part, Worker};

/// Where a model is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Its file is being read.
    Loading,
    /// It answers requests.
    Loaded,
    /// It could not be loaded: why, and when.
    Failed(String, Instant),
}

/// What the pool and every model thread signal each other through: a
/// model loaded, failed or went idle.
#[derive(Debug, Default)]
pub struct Wake {
    lock: Mutex<()>,
    cond: Condvar,
}

impl Wake {
    /// Wakes everyone waiting.
    pub fn notify(&self) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.cond.notify_all();
    }

    /// Waits for a notification or `limit`, whichever comes first;
    /// `check` runs under the lock first, so a notification between it
    /// and the wait is not lost.
    pub fn wait_unless(&self, limit: Duration, check: impl FnOnce() -> bool) {
        let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if check() {
            return;
        }
        let _ = self.cond.wait_timeout(guard, limit);
    }
}

/// A model with its thread.
pub struct Model {
    /// The catalog's entry it was loaded from.
    pub entry: Entry,
    served: OnceLock<Served>,
    status: Mutex<Status>,
    cmds: Mutex<Sender<Cmd>>,
    /// Requests admitted and not finished.
    inflight: AtomicUsize,
    next_id: Arc<AtomicU64>,
    /// When its last request ended (or it loaded).
    last_used: Mutex<Instant>,
    /// How long it stays loaded once idle (none: for ever); the latest
    /// request's `keep_alive`, else the server's.
    keep: Mutex<Option<Duration>>,
    /// The bytes of its weights and its KV cache, once loaded.
    pub bytes: AtomicU64,
    wake: Arc<Wake>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("id", &self.entry.id)
            .field("status", &self.status())
            .finish()
    }
}

impl Model {
    /// Starts loading `entry` on a thread of its own, which then runs the
    /// model's worker until told to stop.
    ///
    /// # Errors
    /// When the OS refuses the thread.
    pub fn start(
        entry: Entry,
        store: Store,
        keep: Option<Duration>,
        shared: (Arc<Metrics>, Arc<AtomicU64>, Arc<Wake>),
        slot_files: bool,
    ) -> std::io::Result<Arc<Model>> {
        let metrics = shared.0.clone();
        let (model, rx) = Model::unstarted(entry, shared);
        model.keep_for(keep);
        let m = model.clone();
        let handle = std::thread::Builder::new()
            .name(format!("minfer-model-{}", model.entry.id))
            .spawn(move || {
                let (served, sched) = match super::load::load(&store, &m.entry) {
                    Ok(l) => l,
                    Err(e) => {
                        // The engine's error names the file. The model given
                        // at start fails the server, which says why.
                        if m.entry.source != super::catalog::Source::Startup {
                            eprintln!("minfer serve: model {}: {e}", m.entry.id);
                        }
                        m.set_status(Status::Failed(e.to_string(), Instant::now()));
                        return;
                    }
                };
                let kv = sched.runtime().kv_layout();
                let kv_bytes = kv.position_bytes() as u64 * u64::from(kv.n_ctx);
                let file = std::fs::metadata(served.loaded.path()).map_or(0, |f| f.len());
                m.bytes.store(file + kv_bytes, Relaxed);
                let n_parallel = served.cfg.n_parallel;
                let _ = m.served.set(served);
                *m.last_used.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
                m.set_status(Status::Loaded);
                let mut worker = Worker::new(sched, n_parallel, metrics);
                if slot_files {
                    let loaded = &m.served().expect("just set").loaded;
                    worker = worker.with_slots(minfer_engine::chat::model_identity(loaded));
                }
                worker.run(rx);
            })?;
        *model.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        Ok(model)
    }

    /// A model in the loading state with no thread yet, and the end of
    /// its commands.
    pub(super) fn unstarted(
        entry: Entry,
        shared: (Arc<Metrics>, Arc<AtomicU64>, Arc<Wake>),
    ) -> (Arc<Model>, std::sync::mpsc::Receiver<Cmd>) {
        let (_, next_id, wake) = shared;
        let (tx, rx) = std::sync::mpsc::channel();
        let model = Arc::new(Model {
            entry,
            served: OnceLock::new(),
            status: Mutex::new(Status::Loading),
            cmds: Mutex::new(tx),
            inflight: AtomicUsize::new(0),
            next_id,
            last_used: Mutex::new(Instant::now()),
            keep: Mutex::new(None),
            bytes: AtomicU64::new(0),
            wake,
            thread: Mutex::new(None),
        });
        (model, rx)
    }

    fn set_status(&self, s: Status) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = s;
        self.wake.notify();
    }

    /// Where it is in its life.
    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The loaded model.
    ///
    /// # Errors
    /// 503 while it loads.
    pub fn served(&self) -> Result<&Served, ApiError> {
        self.served
            .get()
            .ok_or_else(|| ApiError::unavailable("the model is still loading"))
    }

    /// Requests admitted and not finished.
    pub fn running(&self) -> usize {
        self.inflight.load(Relaxed)
    }

    /// Whether it is loaded and has no request.
    pub fn idle(&self) -> bool {
        self.running() == 0 && self.status() == Status::Loaded
    }

    /// When it was last used.
    pub fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks it used now.
    pub fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// How long it stays loaded once idle, from now on (a request's
    /// `keep_alive`); none: for ever.
    pub fn keep_for(&self, keep: Option<Duration>) {
        *self.keep.lock().unwrap_or_else(PoisonError::into_inner) = keep;
    }

    /// When it unloads if it stays idle; none: never (or it is busy).
    pub fn expires(&self) -> Option<Instant> {
        let keep = *self.keep.lock().unwrap_or_else(PoisonError::into_inner);
        match (self.running(), keep) {
            (0, Some(k)) => Some(self.last_used() + k),
            _ => None,
        }
    }

    /// Sends a command to its thread (a thread that is gone has nothing
    /// left to do with it).
    pub fn send(&self, cmd: Cmd) {
        let tx = self.cmds.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = tx.send(cmd);
    }

    /// Cancels what runs and stops its thread, which drops the model and
    /// its cache once the step in progress ends.
    pub fn stop(&self) {
        self.send(Cmd::CancelAll);
        self.send(Cmd::Shutdown);
    }

    /// Waits for its thread to end.
    pub fn join(&self) {
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Takes a place for one generation request and hands it to the
    /// model's thread (callers go through
    /// [`admit`](crate::http::admit), which checks the prompts first);
    /// with `score`, each prompt's own log-probabilities (with that many
    /// alternatives) come first; with `slot`, its first prompt and answer
    /// are what that slot stands for once it ends; `report` says what it
    /// wants to hear while it runs.
    ///
    /// # Errors
    /// 503 when `-np` are running and `--queue` are waiting.
    pub fn submit(
        self: &Arc<Self>,
        parts: Vec<Part>,
        score: Option<u8>,
        slot: Option<usize>,
        report: Report,
    ) -> Result<(Ticket, UnboundedReceiver<Out>), ApiError> {
        let cfg = &self.entry.cfg;
        let limit = cfg.n_parallel + cfg.queue;
        let admitted = self
            .inflight
            .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
            .is_ok();
        if !admitted {
            return Err(ApiError::unavailable(format!(
                "the server is busy: {} requests running and {} queued; retry later",
                cfg.n_parallel, cfg.queue
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
            slot,
            report,
        })));
        let ticket = Ticket {
            model: self.clone(),
            id,
        };
        Ok((ticket, rx))
    }

    /// Holds a place without a generation (an embedding, a tokenization):
    /// the model is busy, and not unloaded, while the guard lives.
    pub fn hold(self: &Arc<Self>) -> Hold {
        self.inflight.fetch_add(1, Relaxed);
        Hold(self.clone())
    }

    fn release(&self) {
        self.touch();
        if self.inflight.fetch_sub(1, Relaxed) == 1 {
            self.wake.notify();
        }
    }
}

/// A model kept busy (see [`Model::hold`]).
pub struct Hold(Arc<Model>);

impl Hold {
    /// The model held.
    pub fn model(&self) -> &Arc<Model> {
        &self.0
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// An admitted request. Dropping it (the response finished, or the client
/// went away and the response was dropped) cancels the generation if it is
/// still running and frees its place in the queue.
pub struct Ticket {
    model: Arc<Model>,
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
        self.model.send(Cmd::Stop(self.id));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A finished request is unknown to the model thread by now, and
        // the cancel does nothing there.
        self.model.send(Cmd::Cancel(self.id));
        self.model.release();
    }
}

impl Drop for Model {
    /// The last holder is gone: the weights and the cache are freed; the
    /// allocator gives their pages back.
    fn drop(&mut self) {
        if let Some(served) = self.served.take() {
            drop(served);
            super::memory::give_back();
        }
    }
}
