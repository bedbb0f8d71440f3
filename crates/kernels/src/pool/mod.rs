//! The persistent thread pool that runs the compute graph's nodes.
//!
//! A decode step of a small model executes hundreds of nodes that each take
//! tens of microseconds, so dispatching one parallel job has to cost far less
//! than a thread spawn, a heap allocation or a syscall. The pool therefore:
//!
//! - creates its workers once, in [`ThreadPool::new`]; the calling thread takes
//!   part in every job as thread 0, so `n_threads - 1` OS threads are spawned;
//! - hands a job over by reference: [`ThreadPool::run`] publishes a
//!   type-erased `&dyn Fn(&Ctx)` in a shared slot and bumps an epoch counter;
//!   nothing is boxed;
//! - lets idle workers spin on the epoch for a bounded number of iterations
//!   (work usually arrives within microseconds while a graph is executing) and
//!   only then park, so the fast path is a handful of atomic operations and
//!   the slow path costs a futex wake, never a busy CPU while the model is
//!   idle;
//! - offers [`Ctx::barrier`] for jobs with dependent steps, so one dispatch
//!   can cover e.g. "quantize the activations, then multiply";
//! - runs [`ThreadPool::for_chunks`] jobs *elastically*: a worker joins such a
//!   job only if it gets there before the caller has finished every chunk, so
//!   a worker that is not running (another process has its core) costs the
//!   job nothing instead of a scheduler time slice per dispatch.
//!
//! # Safety argument for the erased job lifetime
//!
//! The job closure lives on the caller's stack, but the slot that workers read
//! it from must have a `'static` type. [`ThreadPool::run`] erases the lifetime
//! and is sound because it does not return, and cannot unwind, before every
//! worker has finished with the reference:
//!
//! - a worker reads the job only after joining the dispatch (a successful
//!   compare-and-swap on the gate word, which carries the dispatch's epoch
//!   and a closed bit); a worker that finds the gate closed or of another
//!   dispatch skips it without touching the job;
//! - each worker that joined counts itself done (an increment of a completion
//!   counter) only after its call of the job has returned or unwound (panics
//!   are caught on the worker), and never touches the job afterwards;
//! - the caller runs its own share under `catch_unwind` too, then closes the
//!   gate (an elastic job; an ordinary one waits for every worker), which
//!   fixes how many workers joined, waits until the counter shows that many
//!   done (an acquire that synchronizes with every increment), clears the
//!   slot, and only then re-raises a caught panic;
//! - the waiting code itself cannot panic (lock poisoning is ignored), and
//!   dispatches are serialized by a mutex, so the slot is never rewritten while
//!   a worker may still read it.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::hint;
use std::ops::{Deref, Range};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crate::contention::Contention;

pub mod shared;

/// The start of a buffer that the threads of one job write in disjoint
/// parts (each element has one writer). Wrapping the pointer is what lets
/// a job's closure, which must be `Sync`, carry it; the writers' `unsafe`
/// blocks state why their parts do not overlap.
pub struct SharedMut<T>(*mut T);

impl<T> SharedMut<T> {
    /// Shares the buffer that starts at `ptr`.
    pub fn new(ptr: *mut T) -> Self {
        SharedMut(ptr)
    }

    /// The pointer. A method, so closures capture the `Sync` wrapper
    /// rather than the bare pointer field.
    pub fn get(&self) -> *mut T {
        self.0
    }
}

impl<T> Clone for SharedMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedMut<T> {}

// SAFETY: only the pointer moves between threads; every write through it
// is to a part of the buffer that one thread alone writes (the users'
// contract, stated where they write), and `T: Send` lets the values be
// written from another thread.
unsafe impl<T: Send> Send for SharedMut<T> {}
// SAFETY: as above: shared references to the wrapper only hand out the
// pointer.
unsafe impl<T: Send> Sync for SharedMut<T> {}

/// Spin iterations used by [`ThreadPool::new`] before a waiting thread parks
/// (workers waiting for a job, the caller waiting for stragglers) or yields
/// (threads waiting in [`Ctx::barrier`]).
///
/// One iteration is an atomic load plus `spin_loop` (tens of nanoseconds), so
/// this is a fraction of a millisecond: longer than the gap between two nodes
/// of a graph, shorter than a pause that is worth a core.
pub const DEFAULT_SPIN_ITERS: u32 = 10_000;

/// The job as workers see it; the real lifetime is erased by `run`.
type Job = dyn Fn(&Ctx) + Sync + 'static;

thread_local! {
    /// Set while this thread executes a pool job (always, on pool workers),
    /// so that a nested dispatch panics instead of deadlocking.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as running a job for as long as it lives.
struct InJob;

impl InJob {
    fn enter() -> InJob {
        if IN_JOB.replace(true) {
            panic!(
                "minfer ThreadPool: nested parallel call (run/for_range from inside a pool \
                 job) is not supported"
            );
        }
        InJob
    }
}

impl Drop for InJob {
    fn drop(&mut self) {
        IN_JOB.set(false);
    }
}

/// Keeps a hot atomic on its own cache lines (two, for the adjacent-line
/// prefetcher), so that workers spinning on one counter do not slow down
/// updates of another.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Set in the gate word once the caller has finished an elastic job: no
/// worker may join it any more.
const GATE_CLOSED: u64 = 1 << 31;
/// The gate's count of workers that joined.
const GATE_COUNT: u64 = GATE_CLOSED - 1;

/// The gate word that opens dispatch `epoch` with nobody joined yet.
fn gate_open(epoch: usize) -> u64 {
    (epoch as u64 & 0xFFFF_FFFF) << 32
}

/// Payload used to unwind threads out of a barrier that can never complete
/// because another thread of the job panicked. It is a zero-sized type, so
/// boxing it does not allocate, and it is never reported to the caller.
struct BarrierPoisoned;

/// Everything a worker reads to pick up a job, on one cache line, so that a
/// dispatch moves a single line from the caller to each worker.
struct JobSlot {
    /// Bumped once per dispatch (and once at shutdown). Workers wait for it to
    /// change; the bump is the release that publishes `job`.
    epoch: AtomicUsize,
    /// The current job; written only by the dispatcher while no worker is
    /// running, read by workers after they observe a new epoch.
    job: UnsafeCell<Option<&'static Job>>,
    shutdown: AtomicBool,
}

/// State shared by the caller and the workers.
struct Shared {
    n_threads: usize,
    spin_iters: u32,
    slot: Padded<JobSlot>,
    /// Who joined the current dispatch: the dispatch's epoch (low 32 bits)
    /// in the high half, [`GATE_CLOSED`], and the number of workers that
    /// joined in the low bits.
    gate: Padded<AtomicU64>,
    /// Workers of the current dispatch that finished; reset by each dispatch.
    done: Padded<AtomicUsize>,
    /// Threads that have arrived at the current barrier.
    bar_count: Padded<AtomicUsize>,
    /// Completed barriers; waiters spin until it moves.
    bar_gen: Padded<AtomicUsize>,
    /// One flag per worker (index `i - 1` for thread `i`): set while the worker
    /// is about to park or parked, so the dispatcher knows whom to unpark.
    sleeping: Box<[Padded<AtomicBool>]>,
    /// Some thread of the current job panicked.
    panicked: AtomicBool,
    /// The first real panic payload of the current job.
    panic_payload: Mutex<Option<Box<dyn Any + Send>>>,
    /// The caller stopped spinning and waits on `done_cv`.
    caller_waiting: AtomicBool,
    done_lock: Mutex<()>,
    done_cv: Condvar,
    /// Workers that have started running; `new` returns once all have.
    started: AtomicUsize,
}

// SAFETY: every field but `slot.job` is Sync. `slot.job` is written only by
// the dispatcher, which holds the dispatch lock and has observed every worker
// done with the previous job (so no worker reads it then), and the write
// happens-before the workers' reads through the release/acquire pair on
// `slot.epoch`.
unsafe impl Sync for Shared {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Waits (spin, then park) until the epoch differs from `seen`; returns it.
    fn wait_for_epoch(&self, sleeping: &AtomicBool, seen: usize) -> usize {
        let mut spins = 0u32;
        loop {
            let epoch = self.slot.epoch.load(Ordering::Acquire);
            if epoch != seen {
                return epoch;
            }
            if spins < self.spin_iters {
                spins += 1;
                hint::spin_loop();
                continue;
            }
            // Dekker-style handshake with `ThreadPool::run`: this thread stores the
            // flag then loads the epoch, the dispatcher bumps the epoch then
            // loads the flag, all SeqCst. At least one side sees the other's
            // write: either this thread sees the new epoch and does not park,
            // or the dispatcher sees the flag and unparks it (an unpark that
            // lands before `park` makes `park` return at once).
            sleeping.store(true, Ordering::SeqCst);
            if self.slot.epoch.load(Ordering::SeqCst) == seen {
                thread::park();
            }
            sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Joins dispatch `epoch` unless it is closed or already over; the job
    /// may be read only after this returned `true`.
    fn join(&self, epoch: usize) -> bool {
        let open = gate_open(epoch);
        let mut g = self.gate.load(Ordering::Acquire);
        loop {
            if g & !(GATE_CLOSED | GATE_COUNT) != open || g & GATE_CLOSED != 0 {
                return false;
            }
            match self
                .gate
                .compare_exchange_weak(g, g + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => g = now,
            }
        }
    }

    /// Marks one joined worker's share of the current dispatch as done.
    fn finish_one(&self) {
        // Same handshake as in `wait_workers`: if the caller has gone to sleep
        // it is woken under the lock, so the wake cannot fall between its
        // check of `done` and its wait.
        self.done.fetch_add(1, Ordering::SeqCst);
        if self.caller_waiting.load(Ordering::SeqCst) {
            let _guard = lock(&self.done_lock);
            self.done_cv.notify_one();
        }
    }

    /// The caller's wait until `target` workers have finished the current
    /// dispatch (spin, then sleep on the condvar).
    fn wait_workers(&self, target: usize) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) != target {
            if spins < self.spin_iters {
                spins += 1;
                hint::spin_loop();
                continue;
            }
            let mut guard = lock(&self.done_lock);
            self.caller_waiting.store(true, Ordering::SeqCst);
            while self.done.load(Ordering::SeqCst) != target {
                guard = self
                    .done_cv
                    .wait(guard)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            self.caller_waiting.store(false, Ordering::SeqCst);
            break;
        }
    }

    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        if !payload.is::<BarrierPoisoned>() {
            let mut slot = lock(&self.panic_payload);
            if slot.is_none() {
                *slot = Some(payload);
            }
        }
        self.panicked.store(true, Ordering::Release);
    }
}

/// The per-thread view of a job running on a [`ThreadPool`].
///
/// A `Ctx` only exists as `&Ctx` inside a job and is neither `Send` nor `Sync`,
/// so it cannot outlive the job.
pub struct Ctx {
    /// Points into the pool's `Arc<Shared>`, which outlives every job.
    shared: *const Shared,
    index: usize,
    n_threads: usize,
}

impl Ctx {
    fn shared(&self) -> &Shared {
        // SAFETY: a Ctx is only handed out by reference while a job runs, and
        // the pool (caller side) or the worker holds the Arc for that long.
        unsafe { &*self.shared }
    }

    /// This thread's index in `0..n_threads()`; the thread that called `run`
    /// is 0.
    pub fn thread_index(&self) -> usize {
        self.index
    }

    /// The number of threads taking part in the job.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Waits until every thread of the current job has reached this barrier,
    /// so writes made before it by any thread are visible to all threads after
    /// it. Every thread must call it the same number of times.
    ///
    /// Spins, then yields; never allocates. If another thread of the job
    /// panicked, the barrier unwinds out of the job instead of waiting for a
    /// thread that will never arrive (the original panic is what the caller
    /// of `run` sees).
    pub fn barrier(&self) {
        if self.n_threads == 1 {
            return;
        }
        let s = self.shared();
        // Read the generation before arriving: it cannot move until this
        // thread has arrived.
        let generation = s.bar_gen.load(Ordering::Acquire);
        // AcqRel chains every arrival's writes to the last arriver, whose
        // release on `bar_gen` hands them to all waiters.
        if s.bar_count.fetch_add(1, Ordering::AcqRel) + 1 == self.n_threads {
            // Reset before releasing anyone, so the next barrier starts at 0.
            s.bar_count.store(0, Ordering::Relaxed);
            s.bar_gen.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while s.bar_gen.load(Ordering::Acquire) == generation {
            if s.panicked.load(Ordering::Relaxed) {
                panic::resume_unwind(Box::new(BarrierPoisoned));
            }
            if spins < s.spin_iters {
                spins += 1;
                hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
    }

    /// The chunk of `0..n` this thread owns: [`split_range`] with
    /// `n_threads()` parts, the same rule as [`ThreadPool::for_range`].
    pub fn chunk(&self, n: usize, align: usize) -> Range<usize> {
        split_range(n, align, self.n_threads, self.index)
    }
}

impl fmt::Debug for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx")
            .field("thread_index", &self.index)
            .field("n_threads", &self.n_threads)
            .finish()
    }
}

/// Splits `0..n` into `parts` contiguous chunks and returns chunk `index`.
///
/// `0..n` is cut into blocks of `align` elements (the last block may be
/// shorter), and blocks are dealt out as evenly as possible, the first chunks
/// taking one extra block when they do not divide evenly. So every chunk
/// starts at a multiple of `align`, every chunk but the one ending at `n` has a
/// length that is a multiple of `align`, the chunks cover `0..n` exactly once,
/// in order, and the empty chunks (when there are fewer blocks than parts) are
/// the trailing ones, as `n..n`. `align` and `parts` of 0 are treated as 1; an
/// `index >= parts` gets `n..n`.
pub fn split_range(n: usize, align: usize, parts: usize, index: usize) -> Range<usize> {
    let align = align.max(1);
    let parts = parts.max(1);
    if index >= parts {
        return n..n;
    }
    let blocks = n.div_ceil(align);
    let base = blocks / parts;
    let extra = blocks % parts;
    // Both are at most `blocks`, so no overflow here.
    let first = index * base + index.min(extra);
    let count = base + usize::from(index < extra);
    // Block boundaries past `n` (possibly past usize::MAX) clamp to `n`.
    let start = first.saturating_mul(align).min(n);
    let end = (first + count).saturating_mul(align).min(n);
    start..end
}

/// A fixed set of persistent worker threads that run one job at a time.
///
/// `ThreadPool` is `Send + Sync`; calls of [`run`](ThreadPool::run) from
/// several threads are serialized by an internal lock. Calling `run` or
/// `for_range` from inside a job (of this or any pool) is not supported and
/// panics. Dropping the pool stops and joins the workers.
pub struct ThreadPool {
    shared: Arc<Shared>,
    /// Worker `i` (thread index `i + 1`).
    workers: Vec<JoinHandle<()>>,
    /// Serializes dispatches from different caller threads.
    dispatch: Mutex<()>,
    /// Whether workers are being preempted (see [`crate::contention`]).
    contention: Contention,
}

impl ThreadPool {
    /// A pool of `n_threads` threads in all, the caller included (0 is treated
    /// as 1, which runs every job inline), spinning [`DEFAULT_SPIN_ITERS`]
    /// iterations before parking.
    ///
    /// # Panics
    ///
    /// If the OS refuses to spawn a worker thread.
    pub fn new(n_threads: usize) -> Self {
        Self::with_spin(n_threads, DEFAULT_SPIN_ITERS)
    }

    /// Like [`new`](ThreadPool::new), with the number of spin iterations a
    /// waiting thread makes before it parks (or, in a barrier, yields). 0
    /// parks at once; a large value trades idle CPU time for latency.
    ///
    /// # Panics
    ///
    /// If the OS refuses to spawn a worker thread.
    pub fn with_spin(n_threads: usize, spin_iters: u32) -> Self {
        let n_threads = n_threads.max(1);
        let shared = Arc::new(Shared {
            n_threads,
            spin_iters,
            slot: Padded(JobSlot {
                epoch: AtomicUsize::new(0),
                job: UnsafeCell::new(None),
                shutdown: AtomicBool::new(false),
            }),
            gate: Padded(AtomicU64::new(gate_open(0) | GATE_CLOSED)),
            done: Padded(AtomicUsize::new(0)),
            bar_count: Padded(AtomicUsize::new(0)),
            bar_gen: Padded(AtomicUsize::new(0)),
            sleeping: (1..n_threads)
                .map(|_| Padded(AtomicBool::new(false)))
                .collect(),
            panicked: AtomicBool::new(false),
            panic_payload: Mutex::new(None),
            caller_waiting: AtomicBool::new(false),
            done_lock: Mutex::new(()),
            done_cv: Condvar::new(),
            started: AtomicUsize::new(0),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(n_threads - 1),
            dispatch: Mutex::new(()),
            contention: Contention::new(),
        };
        for index in 1..n_threads {
            let shared = Arc::clone(&pool.shared);
            let spawned = thread::Builder::new()
                .name(format!("minfer-worker-{index}"))
                .spawn(move || worker_main(&shared, index));
            match spawned {
                Ok(handle) => pool.workers.push(handle),
                // Dropping `pool` while unwinding stops the workers spawned so far.
                Err(e) => panic!("minfer ThreadPool: cannot spawn minfer-worker-{index}: {e}"),
            }
        }
        // A thread's start-up (its name, its stack guard) allocates. Elastic
        // jobs never wait for a worker, so without this wait a worker could
        // first run, and allocate, in the middle of a later decode step.
        while pool.shared.started.load(Ordering::Acquire) < n_threads - 1 {
            thread::yield_now();
        }
        pool
    }

    /// The number of threads that run each job, the caller included.
    pub fn n_threads(&self) -> usize {
        self.shared.n_threads
    }

    /// How many times split jobs ([`for_range`](ThreadPool::for_range),
    /// [`for_chunks`](ThreadPool::for_chunks)) have switched to running on
    /// the caller alone because workers kept stalling them (another process
    /// had their cores); see [`crate::contention`].
    pub fn solo_periods(&self) -> u64 {
        self.contention.periods()
    }

    /// Runs `f(ctx)` once on every thread (the caller is thread 0) and returns
    /// when all have finished.
    ///
    /// Allocates nothing and spawns nothing. Concurrent calls from several
    /// threads are serialized.
    ///
    /// # Panics
    ///
    /// If `f` panics on any thread, the first panic is re-raised here once
    /// every thread has finished; the pool stays usable. Calling `run` (or
    /// [`for_range`](ThreadPool::for_range)) from inside a job panics.
    pub fn run<F: Fn(&Ctx) + Sync>(&self, f: F) {
        self.dispatch(&f, false);
    }

    /// Runs `f` on the caller and on every worker that joins in time. With
    /// `elastic`, the caller closes the job as soon as its own call of `f`
    /// returns and waits only for the workers that joined before that, so
    /// `f` must leave no work to a particular thread (it claims work from a
    /// shared counter) and must not use barriers; otherwise every worker
    /// joins and the caller waits for all of them.
    fn dispatch(&self, f: &(dyn Fn(&Ctx) + Sync + '_), elastic: bool) {
        let shared = &*self.shared;
        if shared.n_threads == 1 {
            let _in_job = InJob::enter();
            f(&Ctx {
                shared,
                index: 0,
                n_threads: 1,
            });
            return;
        }
        // Checked before taking the dispatch lock, which a nested call on
        // thread 0 would otherwise try to take a second time.
        let in_job = InJob::enter();
        let dispatch = lock(&self.dispatch);

        let job: &(dyn Fn(&Ctx) + Sync + '_) = f;
        // SAFETY: only the lifetime changes (same fat-pointer layout). The
        // reference is used only by workers that joined this dispatch, only
        // until they count themselves done, and this function does not return
        // or unwind before all of them have and the slot is cleared; see the
        // module documentation.
        let job: &'static Job =
            unsafe { std::mem::transmute::<&(dyn Fn(&Ctx) + Sync + '_), &'static Job>(job) };
        // SAFETY: the dispatch lock is held and every worker that joined the
        // previous job has finished it; the gate of that job is closed or
        // full, so no late worker reads the slot now.
        unsafe { *shared.slot.job.get() = Some(job) };
        let epoch = shared.slot.epoch.load(Ordering::Relaxed).wrapping_add(1);
        shared.done.store(0, Ordering::Relaxed);
        shared.gate.store(gate_open(epoch), Ordering::Relaxed);
        // Publishes the job, the gate and the reset count (release) and is the
        // dispatcher's side of the sleep handshake in `wait_for_epoch`.
        shared.slot.epoch.store(epoch, Ordering::SeqCst);
        for (sleeping, worker) in shared.sleeping.iter().zip(&self.workers) {
            if sleeping.load(Ordering::SeqCst) {
                worker.thread().unpark();
            }
        }

        let ctx = Ctx {
            shared,
            index: 0,
            n_threads: shared.n_threads,
        };
        let t0 = elastic.then(Instant::now);
        // Caught so that this function cannot unwind while workers still use
        // `f`; re-raised below.
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| f(&ctx))) {
            shared.record_panic(payload);
        }
        drop(in_job);
        let joined = if elastic {
            // From here no worker can join; those that did are counted.
            (shared.gate.fetch_or(GATE_CLOSED, Ordering::SeqCst) & GATE_COUNT) as usize
        } else {
            shared.n_threads - 1
        };
        match t0 {
            Some(t0) if joined > 0 => {
                let t1 = Instant::now();
                shared.wait_workers(joined);
                self.contention.record(t1 - t0, t1.elapsed());
            }
            _ => shared.wait_workers(joined),
        }
        // A worker that joins an ordinary job after the caller's wait cannot
        // exist (all joined); close the gate so none joins this one late.
        shared.gate.fetch_or(GATE_CLOSED, Ordering::SeqCst);

        // SAFETY: every worker that joined has finished with the job, and no
        // other can join.
        unsafe { *shared.slot.job.get() = None };
        let payload = if shared.panicked.load(Ordering::Acquire) {
            // A panic may have left a barrier half-counted; nobody is in one
            // now, and the next dispatch publishes these resets.
            shared.bar_count.store(0, Ordering::Relaxed);
            shared.panicked.store(false, Ordering::Relaxed);
            lock(&shared.panic_payload).take()
        } else {
            None
        };
        drop(dispatch);
        if let Some(payload) = payload {
            panic::resume_unwind(payload);
        }
    }

    /// Splits `0..n` into at most `n_threads()` contiguous chunks aligned to
    /// `align` (see [`split_range`]; e.g. rows in multiples of 4 or 16 for
    /// SIMD) and calls `f(chunk)` on each thread whose chunk is not empty;
    /// returns when all are done.
    ///
    /// When there is a single chunk (`n <= align`, or one thread) `f` runs
    /// inline on the caller without waking the workers; `n == 0` calls
    /// nothing.
    ///
    /// # Panics
    ///
    /// As [`run`](ThreadPool::run).
    pub fn for_range<F: Fn(Range<usize>) + Sync>(&self, n: usize, align: usize, f: F) {
        let parts = self.n_threads();
        if parts == 1 || n.div_ceil(align.max(1)) <= 1 || self.contention.solo() {
            let _in_job = InJob::enter();
            if n > 0 {
                f(0..n);
            }
            return;
        }
        // `move`: the captures then sit together in the closure, so a worker
        // fetches one cache line of the caller's stack rather than several.
        self.run(move |ctx| {
            let chunk = split_range(n, align, parts, ctx.thread_index());
            if !chunk.is_empty() {
                f(chunk);
            }
        });
    }

    /// Like [`for_range`](ThreadPool::for_range), but threads claim chunks
    /// of about `n / (threads * pieces)` items (aligned to `align`) one at
    /// a time from a shared counter until none are left, so a thread slowed
    /// by other work on the machine takes fewer chunks instead of holding
    /// everyone up; and a worker that has not started by the time the
    /// caller runs out of chunks is not waited for at all. `f` may run
    /// several times on one thread; chunks are disjoint and cover `0..n`.
    ///
    /// # Panics
    ///
    /// As [`run`](ThreadPool::run).
    pub fn for_chunks<F: Fn(Range<usize>) + Sync>(
        &self,
        n: usize,
        align: usize,
        pieces: usize,
        f: F,
    ) {
        self.for_chunks_on(n, align, pieces, |_, r| f(r));
    }

    /// [`for_chunks`](ThreadPool::for_chunks), with `f` also told the index
    /// (below [`n_threads`](ThreadPool::n_threads)) of the thread running
    /// the chunk: 0 for the caller, which also runs every chunk itself when
    /// the job is not dispatched. One thread runs its chunks one after
    /// another, so per-thread scratch indexed by it is never shared between
    /// chunks that run at once within this call.
    ///
    /// # Panics
    ///
    /// As [`run`](ThreadPool::run).
    pub fn for_chunks_on<F: Fn(usize, Range<usize>) + Sync>(
        &self,
        n: usize,
        align: usize,
        pieces: usize,
        f: F,
    ) {
        let align = align.max(1);
        let parts = self.n_threads();
        let per = n.div_ceil(parts * pieces.max(1)).div_ceil(align).max(1) * align;
        if parts == 1 || n <= per || self.contention.solo() {
            let _in_job = InJob::enter();
            if n > 0 {
                f(0, 0..n);
            }
            return;
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let job = move |cx: &Ctx| loop {
            let start = next.fetch_add(per, Ordering::Relaxed);
            if start >= n {
                break;
            }
            f(cx.index, start..start.saturating_add(per).min(n));
        };
        self.dispatch(&job, true);
    }
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("n_threads", &self.shared.n_threads)
            .field("spin_iters", &self.shared.spin_iters)
            .finish_non_exhaustive()
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        let shared = &*self.shared;
        // No job can be running: `run` borrows the pool.
        shared.slot.shutdown.store(true, Ordering::Release);
        shared.slot.epoch.fetch_add(1, Ordering::SeqCst);
        for worker in &self.workers {
            worker.thread().unpark();
        }
        for worker in self.workers.drain(..) {
            // Workers catch job panics, so an error here cannot carry one.
            let _ = worker.join();
        }
    }
}

fn worker_main(shared: &Shared, index: usize) {
    // A worker only ever runs pool jobs, so any dispatch from it is nested.
    IN_JOB.set(true);
    let sleeping = &shared.sleeping[index - 1];
    let ctx = Ctx {
        shared,
        index,
        n_threads: shared.n_threads,
    };
    // A worker joins elastic jobs only when it gets there in time, so its
    // first traced job may come long after warm-up; its lane must not be
    // created (allocated) then.
    minfer_trace::reserve_lane();
    shared.started.fetch_add(1, Ordering::Release);
    // Workers start before any dispatch, at epoch 0.
    let mut seen = 0;
    loop {
        seen = shared.wait_for_epoch(sleeping, seen);
        if shared.slot.shutdown.load(Ordering::Acquire) {
            return;
        }
        if !shared.join(seen) {
            // The caller finished this (elastic) job without us, or has
            // moved on to a later one: nothing to do, nothing to report.
            continue;
        }
        // SAFETY: the slot was written before the epoch store this thread
        // acquired, and having joined, the dispatcher keeps it (and the
        // closure it points to) alive until this worker's `finish_one`.
        let job = unsafe { *shared.slot.job.get() };
        if let Some(job) = job {
            let t = minfer_trace::start();
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| job(&ctx))) {
                shared.record_panic(payload);
            }
            if let Some(t) = t {
                minfer_trace::work(t);
            }
        }
        shared.finish_one();
    }
}

#[cfg(test)]
mod tests;
