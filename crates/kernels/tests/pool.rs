//! Behaviour of the persistent thread pool: who runs what, chunking, barriers,
//! wake-ups, panics, shutdown, allocation-freedom and dispatch overhead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use minfer_kernels::pool::{split_range, ThreadPool};
use proptest::prelude::*;

/// Counts allocations made by threads that opted in (`TRACKED`) while the
/// counter is armed, so tests running in parallel in this binary, and the
/// harness itself, do not disturb the count.
struct CountingAlloc;

static ARMED: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialized and without a destructor, so reading it from inside
    // the allocator neither allocates nor can fail.
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

fn note_alloc() {
    if ARMED.load(Ordering::Relaxed) && TRACKED.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Serializes the tests that dispatch tens of thousands of jobs: pools of
/// spinning threads from two such tests at once oversubscribe a small machine,
/// and every dispatch then waits for a descheduled thread.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(PoisonError::into_inner)
}

const THREAD_COUNTS: [usize; 5] = [1, 2, 3, 4, 7];

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string payload>".to_string()
    }
}

/// Checks that the chunks `f` saw cover `0..n` exactly once, aligned, and are
/// exactly the ones `split_range` describes.
fn check_for_range(pool: &ThreadPool, n: usize, align: usize) {
    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let calls = AtomicUsize::new(0);
    pool.for_range(n, align, |r: Range<usize>| {
        assert!(!r.is_empty(), "empty chunk passed to f");
        assert_eq!(
            r.start % align.max(1),
            0,
            "chunk {r:?} not aligned to {align}"
        );
        assert!(
            r.len().is_multiple_of(align.max(1)) || r.end == n,
            "chunk {r:?} of n={n} align={align}: only the last chunk may be ragged"
        );
        calls.fetch_add(1, Ordering::Relaxed);
        for i in r {
            hits[i].fetch_add(1, Ordering::Relaxed);
        }
    });
    for (i, h) in hits.iter().enumerate() {
        assert_eq!(
            h.load(Ordering::Relaxed),
            1,
            "index {i} of n={n} align={align}"
        );
    }
    let expected = (0..pool.n_threads())
        .filter(|&t| !split_range(n, align, pool.n_threads(), t).is_empty())
        .count();
    assert_eq!(calls.load(Ordering::Relaxed), expected);
}

#[test]
fn run_calls_every_thread_exactly_once() {
    let caller = thread::current().id();
    for &n in &THREAD_COUNTS {
        let pool = ThreadPool::new(n);
        assert_eq!(pool.n_threads(), n);
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        let rounds = 200;
        for _ in 0..rounds {
            pool.run(|ctx| {
                assert_eq!(ctx.n_threads(), n);
                let i = ctx.thread_index();
                hits[i].fetch_add(1, Ordering::Relaxed);
                let me = thread::current();
                if i == 0 {
                    assert_eq!(me.id(), caller, "thread 0 must be the caller");
                } else {
                    let expected = format!("minfer-worker-{i}");
                    assert_eq!(me.name(), Some(expected.as_str()));
                }
            });
        }
        for (i, h) in hits.iter().enumerate() {
            assert_eq!(h.load(Ordering::Relaxed), rounds, "n={n} thread {i}");
        }
    }
}

#[test]
fn for_range_covers_every_index_once() {
    for &n_threads in &THREAD_COUNTS {
        let pool = ThreadPool::new(n_threads);
        for n in [
            0, 1, 2, 3, 5, 6, 7, 8, 15, 16, 17, 63, 64, 65, 100, 1000, 1023,
        ] {
            for align in [0, 1, 2, 4, 16, 32] {
                check_for_range(&pool, n, align);
            }
        }
    }
}

#[test]
fn ctx_chunk_matches_split_range() {
    let pool = ThreadPool::new(3);
    let seen: Vec<Vec<AtomicUsize>> = (0..3)
        .map(|_| (0..2).map(|_| AtomicUsize::new(usize::MAX)).collect())
        .collect();
    pool.run(|ctx| {
        let r = ctx.chunk(37, 4);
        seen[ctx.thread_index()][0].store(r.start, Ordering::Relaxed);
        seen[ctx.thread_index()][1].store(r.end, Ordering::Relaxed);
    });
    for (t, s) in seen.iter().enumerate() {
        let got = s[0].load(Ordering::Relaxed)..s[1].load(Ordering::Relaxed);
        assert_eq!(got, split_range(37, 4, 3, t));
    }
}

proptest! {
    #[test]
    fn split_range_partitions_exactly(n in 0usize..5000, align in 0usize..70, parts in 0usize..20) {
        let parts_eff = parts.max(1);
        let a = align.max(1);
        let mut next = 0;
        let mut seen_empty = false;
        for i in 0..parts_eff {
            let r = split_range(n, align, parts, i);
            prop_assert_eq!(r.start, next, "chunks must be contiguous and in order");
            prop_assert!(r.end >= r.start && r.end <= n);
            if r.is_empty() {
                seen_empty = true;
            } else {
                prop_assert!(!seen_empty, "empty chunks must be trailing");
                prop_assert_eq!(r.start % a, 0);
                prop_assert!(r.len().is_multiple_of(a) || r.end == n);
            }
            next = r.end;
        }
        prop_assert_eq!(next, n);
        // Balanced: chunk sizes in blocks differ by at most one.
        let blocks: Vec<usize> = (0..parts_eff)
            .map(|i| split_range(n, align, parts, i).len().div_ceil(a))
            .collect();
        let (lo, hi) = (blocks.iter().min().unwrap(), blocks.iter().max().unwrap());
        prop_assert!(hi - lo <= 1, "{:?}", blocks);
        prop_assert_eq!(split_range(n, align, parts, parts_eff), n..n);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn for_range_covers_exactly_once(n in 0usize..3000, align in 0usize..40, n_threads in 1usize..9) {
        let pool = ThreadPool::with_spin(n_threads, 200);
        check_for_range(&pool, n, align);
    }
}

fn barrier_phases(n: usize, spin: u32, runs: usize) {
    let pool = ThreadPool::with_spin(n, spin);
    let slots: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(usize::MAX)).collect();
    for k in 0..runs {
        pool.run(|ctx| {
            let i = ctx.thread_index();
            for phase in 0..2 {
                let stamp = (k * 2 + phase) * n;
                slots[i].store(stamp + i, Ordering::Relaxed);
                ctx.barrier();
                for (j, s) in slots.iter().enumerate() {
                    assert_eq!(
                        s.load(Ordering::Relaxed),
                        stamp + j,
                        "run {k} phase {phase}: thread {i} saw a stale slot {j}"
                    );
                }
                // Nobody may overwrite a slot before everyone has read it.
                ctx.barrier();
            }
        });
    }
}

#[test]
fn barrier_separates_phases() {
    let _heavy = heavy();
    barrier_phases(2, 10_000, 10_000);
    barrier_phases(3, 1_000, 10_000);
    barrier_phases(4, 0, 10_000);
}

#[test]
fn barrier_separates_phases_oversubscribed() {
    let _heavy = heavy();
    // More threads than this machine's cores: a small spin keeps it fast.
    barrier_phases(7, 50, 10_000);
}

fn back_to_back(n: usize, spin: u32, runs: usize) {
    let pool = ThreadPool::with_spin(n, spin);
    let total = AtomicUsize::new(0);
    for _ in 0..runs {
        pool.run(|_| {
            total.fetch_add(1, Ordering::Relaxed);
        });
    }
    assert_eq!(total.load(Ordering::Relaxed), runs * n);
}

#[test]
fn back_to_back_runs_park_path() {
    let _heavy = heavy();
    back_to_back(2, 0, 100_000);
    back_to_back(3, 0, 100_000);
}

#[test]
fn back_to_back_runs_spin_path() {
    let _heavy = heavy();
    // About 3 ms of spinning at ~30 ns per `spin_loop`: with back-to-back
    // dispatch the workers never get to park.
    back_to_back(2, 100_000, 100_000);
}

#[test]
fn back_to_back_runs_tiny_spin() {
    let _heavy = heavy();
    // Spin counts this short make the spin-to-park transition race with
    // dispatch as often as possible.
    back_to_back(2, 3, 100_000);
    back_to_back(4, 1, 50_000);
}

#[test]
fn runs_after_idle_gaps_wake_parked_workers() {
    let pool = ThreadPool::with_spin(3, 100);
    let total = AtomicUsize::new(0);
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(3));
        pool.run(|_| {
            total.fetch_add(1, Ordering::Relaxed);
        });
    }
    assert_eq!(total.load(Ordering::Relaxed), 60);
}

#[test]
fn zero_allocations_per_call() {
    let _heavy = heavy();
    for (n, spin) in [(1, 10_000), (2, 10_000), (3, 10_000), (3, 0)] {
        let pool = ThreadPool::with_spin(n, spin);
        let sink = AtomicUsize::new(0);
        let job = |ctx: &minfer_kernels::pool::Ctx| {
            sink.fetch_add(ctx.thread_index(), Ordering::Relaxed);
            ctx.barrier();
            sink.fetch_add(ctx.chunk(1000, 16).len(), Ordering::Relaxed);
        };
        let body = |r: Range<usize>| {
            sink.fetch_add(r.len(), Ordering::Relaxed);
        };
        pool.run(|_| TRACKED.set(true));
        // Warm-up: first use of any lazily initialized runtime state.
        for _ in 0..10 {
            pool.run(job);
            pool.for_range(1000, 16, body);
        }
        ALLOCS.store(0, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
        for _ in 0..1000 {
            pool.run(job);
            pool.for_range(1000, 16, body);
            pool.for_range(3, 16, body);
        }
        ARMED.store(false, Ordering::SeqCst);
        assert_eq!(
            ALLOCS.load(Ordering::SeqCst),
            0,
            "n_threads={n} spin={spin}: allocations in 1000 dispatches"
        );
        assert!(sink.load(Ordering::Relaxed) > 0);

        // The counter itself works, on the caller and on every worker.
        ARMED.store(true, Ordering::SeqCst);
        pool.run(|_| drop(std::hint::black_box(Box::new(7u64))));
        ARMED.store(false, Ordering::SeqCst);
        assert_eq!(ALLOCS.swap(0, Ordering::SeqCst), n);
        pool.run(|_| TRACKED.set(false));
    }
}

#[test]
fn panic_in_job_propagates_and_pool_survives() {
    for &n in &THREAD_COUNTS {
        let pool = ThreadPool::with_spin(n, 1_000);
        for culprit in [0, n - 1] {
            let err = panic::catch_unwind(AssertUnwindSafe(|| {
                pool.run(|ctx| {
                    if ctx.thread_index() == culprit {
                        panic!("boom on {culprit}");
                    }
                });
            }))
            .expect_err("the job panicked, so run must panic");
            assert_eq!(panic_message(&*err), format!("boom on {culprit}"));

            let total = AtomicUsize::new(0);
            pool.run(|ctx| {
                ctx.barrier();
                total.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(total.load(Ordering::Relaxed), n);
        }
    }
}

#[test]
fn panic_before_barrier_does_not_deadlock() {
    for &n in &[2, 3, 4, 7] {
        let pool = ThreadPool::with_spin(n, 100);
        for culprit in [0, 1, n - 1] {
            let err = panic::catch_unwind(AssertUnwindSafe(|| {
                pool.run(|ctx| {
                    if ctx.thread_index() == culprit {
                        panic!("early exit {culprit}");
                    }
                    ctx.barrier();
                    ctx.barrier();
                });
            }))
            .expect_err("must propagate");
            assert_eq!(panic_message(&*err), format!("early exit {culprit}"));
            // Barriers work again after the half-counted one.
            barrier_round(&pool);
        }
    }
}

fn barrier_round(pool: &ThreadPool) {
    let n = pool.n_threads();
    let arrived = AtomicUsize::new(0);
    pool.run(|ctx| {
        arrived.fetch_add(1, Ordering::Relaxed);
        ctx.barrier();
        assert_eq!(arrived.load(Ordering::Relaxed), n);
        ctx.barrier();
    });
}

#[test]
fn panic_in_for_range_propagates() {
    let pool = ThreadPool::new(4);
    let err = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.for_range(100, 4, |r| assert!(!r.contains(&99), "hit 99"));
    }))
    .expect_err("must propagate");
    assert_eq!(panic_message(&*err), "hit 99");
    check_for_range(&pool, 100, 4);
}

#[test]
fn nested_run_panics_instead_of_deadlocking() {
    for &n in &THREAD_COUNTS {
        let pool = ThreadPool::new(n);
        for inner_on in [0, n - 1] {
            let err = panic::catch_unwind(AssertUnwindSafe(|| {
                pool.run(|ctx| {
                    if ctx.thread_index() == inner_on {
                        pool.run(|_| {});
                    }
                });
            }))
            .expect_err("nested run must panic");
            assert!(
                panic_message(&*err).contains("nested"),
                "{}",
                panic_message(&*err)
            );

            let err = panic::catch_unwind(AssertUnwindSafe(|| {
                pool.run(|ctx| {
                    if ctx.thread_index() == inner_on {
                        pool.for_range(100, 1, |_| {});
                    }
                });
            }))
            .expect_err("nested for_range must panic");
            assert!(panic_message(&*err).contains("nested"));
        }
        // Another pool is no way around it either.
        let other = ThreadPool::new(2);
        let err = panic::catch_unwind(AssertUnwindSafe(|| pool.run(|_| other.run(|_| {}))))
            .expect_err("nested run of another pool must panic");
        assert!(panic_message(&*err).contains("nested"));
        barrier_round(&pool);
    }
}

#[test]
fn concurrent_callers_are_serialized() {
    let _heavy = heavy();
    let pool = ThreadPool::with_spin(3, 1_000);
    let active = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    pool.run(|ctx| {
                        active.fetch_add(1, Ordering::Relaxed);
                        ctx.barrier();
                        // Two overlapping jobs would count more than n here.
                        assert_eq!(active.load(Ordering::Relaxed), ctx.n_threads());
                        ctx.barrier();
                        if ctx.thread_index() == 0 {
                            active.store(0, Ordering::Relaxed);
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        }
    });
    assert_eq!(done.load(Ordering::Relaxed), 4 * 2_000 * 3);
}

/// Increments its counter when the thread that owns it exits.
struct ExitCounter(Arc<AtomicUsize>);

impl Drop for ExitCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

thread_local! {
    static EXIT_COUNTER: RefCell<Option<ExitCounter>> = const { RefCell::new(None) };
}

#[test]
fn drop_joins_the_workers() {
    for &n in &THREAD_COUNTS {
        let exited = Arc::new(AtomicUsize::new(0));
        let pool = ThreadPool::new(n);
        pool.run(|ctx| {
            if ctx.thread_index() != 0 {
                let counter = ExitCounter(Arc::clone(&exited));
                EXIT_COUNTER.with(|c| *c.borrow_mut() = Some(counter));
            }
        });
        assert_eq!(exited.load(Ordering::SeqCst), 0);
        drop(pool);
        // Thread-local destructors run before a joined thread counts as
        // finished, so every worker has exited by now.
        assert_eq!(exited.load(Ordering::SeqCst), n - 1, "n={n}");
    }
}

#[test]
fn drop_of_parked_and_never_used_pools_returns() {
    drop(ThreadPool::with_spin(4, 0));
    let pool = ThreadPool::with_spin(4, 0);
    pool.run(|_| {});
    thread::sleep(Duration::from_millis(5));
    drop(pool);
}

fn median_ns_per_call(calls: usize, mut f: impl FnMut()) -> (f64, f64) {
    const BATCH: usize = 100;
    let mut per_call = Vec::with_capacity(calls / BATCH);
    for _ in 0..calls / BATCH {
        let t = Instant::now();
        for _ in 0..BATCH {
            f();
        }
        per_call.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    per_call.sort_by(f64::total_cmp);
    (per_call[per_call.len() / 2], per_call[0])
}

#[test]
fn overhead_of_an_empty_run() {
    let _heavy = heavy();
    for (n, spin, calls) in [(1, 10_000, 100_000), (2, 10_000, 100_000), (2, 0, 10_000)] {
        let pool = ThreadPool::with_spin(n, spin);
        for _ in 0..1000 {
            pool.run(|_| {});
        }
        let (median, best) = median_ns_per_call(calls, || pool.run(|_| {}));
        eprintln!(
            "pool overhead: empty run, {n} thread(s), spin {spin}: median {median:.0} ns/call \
             (best batch {best:.0} ns) over {calls} calls"
        );
        let (median, best) = median_ns_per_call(calls, || pool.for_range(1024, 16, |_| {}));
        eprintln!(
            "pool overhead: empty for_range(1024), {n} thread(s), spin {spin}: median \
             {median:.0} ns/call (best batch {best:.0} ns)"
        );
    }
}

/// `for_chunks` covers `0..n` exactly once with aligned, non-empty chunks,
/// whatever the thread count, alignment and number of pieces.
#[test]
fn for_chunks_covers_every_index_once() {
    for threads in [1, 2, 3, 4] {
        let pool = ThreadPool::new(threads);
        for n in [0usize, 1, 3, 4, 5, 17, 64, 100, 1000, 4097] {
            for align in [1usize, 4, 16] {
                for pieces in [0usize, 1, 4, 9] {
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    pool.for_chunks(n, align, pieces, |r: Range<usize>| {
                        assert!(!r.is_empty(), "empty chunk");
                        assert_eq!(r.start % align, 0, "chunk {r:?} not aligned to {align}");
                        for i in r {
                            hits[i].fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    for (i, h) in hits.iter().enumerate() {
                        assert_eq!(
                            h.load(Ordering::Relaxed),
                            1,
                            "index {i} of n={n} align={align} pieces={pieces} threads={threads}"
                        );
                    }
                }
            }
        }
    }
}
