//! The disk tier's writer: a thread that encodes and writes block files,
//! so that a released sequence never waits for the disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// One file to write: where, and how to make its bytes (run on the
/// writer's thread: encoding checksums the rows).
pub(crate) struct Job {
    /// The file's final name.
    pub path: PathBuf,
    /// Its contents.
    pub encode: Box<dyn FnOnce() -> Vec<u8> + Send>,
}

/// What the writer has done, shared with its owner.
#[derive(Default)]
pub(crate) struct WriterCounters {
    /// Files written.
    pub written: AtomicU64,
    /// Their bytes.
    pub written_bytes: AtomicU64,
    /// Files that could not be written (logged).
    pub failed: AtomicU64,
}

#[derive(Default)]
struct Pending {
    n: Mutex<usize>,
    idle: Condvar,
}

/// A writer thread and the channel to it. Dropping it waits for the
/// queued files.
pub(crate) struct Writer {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    pending: Arc<Pending>,
    counters: Arc<WriterCounters>,
}

impl Writer {
    /// Starts the thread.
    ///
    /// # Errors
    /// When the system cannot start a thread.
    pub fn start() -> std::io::Result<Writer> {
        let (tx, rx) = channel::<Job>();
        let pending = Arc::new(Pending::default());
        let counters = Arc::new(WriterCounters::default());
        let (p, c) = (Arc::clone(&pending), Arc::clone(&counters));
        let thread = std::thread::Builder::new()
            .name("minfer-kv-tier-writer".into())
            .spawn(move || {
                for job in rx {
                    let bytes = (job.encode)();
                    match write_atomic(&job.path, &bytes) {
                        Ok(()) => {
                            c.written.fetch_add(1, Ordering::Relaxed);
                            c.written_bytes
                                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        }
                        Err(e) => {
                            // The first failure is worth a warning; a full
                            // disk would repeat it for every block.
                            if c.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                                tracing::warn!(file = %job.path.display(), "prompt cache: cannot write a block file: {e}");
                            } else {
                                tracing::debug!(file = %job.path.display(), "prompt cache: cannot write a block file: {e}");
                            }
                        }
                    }
                    let mut n = p.n.lock().unwrap_or_else(|e| e.into_inner());
                    *n -= 1;
                    if *n == 0 {
                        p.idle.notify_all();
                    }
                }
            })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
            pending,
            counters,
        })
    }

    /// Queues a file.
    pub fn send(&self, job: Job) {
        let Some(tx) = &self.tx else { return };
        *self.pending.n.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        if tx.send(job).is_err() {
            // The thread is gone (it panicked): nothing will be written.
            *self.pending.n.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every queued file is written (or has failed).
    pub fn flush(&self) {
        let mut n = self.pending.n.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 && self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            // A timeout, so that a thread that died is noticed.
            let tick = std::time::Duration::from_millis(50);
            n = match self.pending.idle.wait_timeout(n, tick) {
                Ok((n, _)) => n,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// Its counters.
    pub fn counters(&self) -> &WriterCounters {
        &self.counters
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the thread once the queue is written.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `bytes` to a temporary file next to `path` and renames it over
/// `path`, so that no reader ever sees a half-written file under the real
/// name. Not synced: a file torn by a crash fails its checksum and is
/// refused, which costs a recomputation, not a wrong answer.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
