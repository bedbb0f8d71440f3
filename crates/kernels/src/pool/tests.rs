//! Unit tests of the pool: range splitting, single-thread and nested
//! use, and elastic jobs on a busy CPU.

use super::*;

fn all_chunks(n: usize, align: usize, parts: usize) -> Vec<Range<usize>> {
    (0..parts)
        .map(|i| split_range(n, align, parts, i))
        .collect()
}

#[test]
fn split_range_examples() {
    assert_eq!(all_chunks(10, 4, 2), vec![0..8, 8..10]);
    assert_eq!(all_chunks(16, 4, 4), vec![0..4, 4..8, 8..12, 12..16]);
    assert_eq!(all_chunks(17, 4, 4), vec![0..8, 8..12, 12..16, 16..17]);
    assert_eq!(all_chunks(3, 1, 4), vec![0..1, 1..2, 2..3, 3..3]);
    assert_eq!(all_chunks(5, 16, 3), vec![0..5, 5..5, 5..5]);
    assert_eq!(all_chunks(0, 4, 3), vec![0..0, 0..0, 0..0]);
    assert_eq!(all_chunks(7, 1, 1), vec![0..7]);
}

#[test]
fn split_range_degenerate_arguments() {
    assert_eq!(split_range(5, 0, 1, 0), 0..5);
    assert_eq!(split_range(5, 1, 0, 0), 0..5);
    assert_eq!(split_range(5, 1, 2, 2), 5..5);
    assert_eq!(split_range(5, 1, 2, usize::MAX), 5..5);
    let n = usize::MAX;
    let a = split_range(n, 1 << 20, 3, 2);
    assert_eq!(a.end, n);
    assert_eq!(a.start % (1 << 20), 0);
    assert_eq!(split_range(n, usize::MAX, 2, 0), 0..n);
    assert_eq!(split_range(n, usize::MAX, 2, 1), n..n);
}

#[test]
fn zero_threads_means_one() {
    let pool = ThreadPool::new(0);
    assert_eq!(pool.n_threads(), 1);
    let hits = AtomicUsize::new(0);
    pool.run(|ctx| {
        assert_eq!((ctx.thread_index(), ctx.n_threads()), (0, 1));
        ctx.barrier();
        assert_eq!(ctx.chunk(9, 4), 0..9);
        hits.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(hits.into_inner(), 1);
}

#[test]
fn nested_run_panics_single_thread() {
    let pool = ThreadPool::new(1);
    let err = panic::catch_unwind(AssertUnwindSafe(|| pool.run(|_| pool.run(|_| {}))))
        .expect_err("nested run must panic");
    let msg = err
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| err.downcast_ref::<String>().map(String::as_str));
    assert!(msg.is_some_and(|m| m.contains("nested")), "{msg:?}");
    // The flag is cleared again after unwinding.
    pool.run(|_| {});
}

#[test]
fn poisoned_payload_does_not_allocate() {
    assert_eq!(std::mem::size_of::<BarrierPoisoned>(), 0);
}

/// With the caller and its worker confined to one CPU, the worker can
/// only run when the caller blocks or is preempted: elastic jobs then
/// finish without it (the caller does every chunk and does not wait),
/// while ordinary jobs still run on both threads.
#[test]
fn elastic_jobs_do_not_wait_for_a_worker_that_is_not_running() {
    let one_cpu = std::thread::spawn(|| {
        // SAFETY: plain libc calls on a zeroed, properly sized cpu_set_t
        // for the calling thread (pid 0); the pool's worker inherits it.
        let pinned = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        };
        assert!(pinned, "sched_setaffinity failed");
        let pool = ThreadPool::with_spin(2, 1000);
        let jobs = 2000;
        let mut worker_joined = 0;
        for _ in 0..jobs {
            let seen = AtomicUsize::new(0);
            let job = |ctx: &Ctx| {
                seen.fetch_or(1 << ctx.thread_index(), Ordering::Relaxed);
            };
            pool.dispatch(&job, true);
            if seen.into_inner() & 2 != 0 {
                worker_joined += 1;
            }
        }
        let all = AtomicUsize::new(0);
        for _ in 0..20 {
            pool.run(|_| {
                all.fetch_add(1, Ordering::Relaxed);
            });
        }
        (worker_joined, jobs, all.into_inner())
    });
    let (joined, jobs, all) = one_cpu.join().unwrap();
    assert!(
        joined < jobs / 2,
        "the worker joined {joined} of {jobs} elastic jobs"
    );
    assert_eq!(all, 40, "ordinary jobs run on every thread");
}

#[test]
fn pool_and_ctx_thread_safety() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadPool>();
}

#[test]
fn stalled_workers_switch_split_jobs_to_the_caller_alone() {
    let pool = ThreadPool::new(2);
    let caller = std::thread::current().id();
    assert_eq!(pool.solo_periods(), 0);
    // A worker that takes a chunk sleeps as if preempted: the caller waits
    // far longer than its own share took.
    for _ in 0..200 {
        pool.for_chunks(64, 1, 4, |_| {
            if std::thread::current().id() != caller {
                std::thread::sleep(std::time::Duration::from_millis(3));
            } else {
                // Long enough for the worker to join.
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_micros(100) {
                    std::hint::spin_loop();
                }
            }
        });
        if pool.solo_periods() > 0 {
            break;
        }
    }
    assert!(pool.solo_periods() > 0, "stalls were not noticed");
    // While solo, every chunk runs on the caller, and a job still covers
    // every index exactly once.
    let seen = Mutex::new(Vec::new());
    pool.for_chunks(64, 1, 4, |r| {
        assert_eq!(std::thread::current().id(), caller);
        seen.lock().unwrap().extend(r);
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, (0..64).collect::<Vec<_>>());
}

#[test]
fn chunks_on_name_a_pool_thread_and_cover_every_item_once() {
    use std::sync::atomic::AtomicU32;
    for threads in [1, 2, 4] {
        let pool = ThreadPool::new(threads);
        let n = 1000;
        let seen: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        // One "busy" flag per thread index: a chunk finding its thread's
        // flag already set would mean two chunks share per-thread scratch.
        let busy: Vec<AtomicU32> = (0..threads).map(|_| AtomicU32::new(0)).collect();
        pool.for_chunks_on(n, 1, 8, |thread, r| {
            assert!(thread < threads, "index {thread} of {threads} threads");
            assert_eq!(
                busy[thread].swap(1, Ordering::SeqCst),
                0,
                "thread {thread} overlaps"
            );
            for i in r {
                seen[i].fetch_add(1, Ordering::Relaxed);
            }
            busy[thread].store(0, Ordering::SeqCst);
        });
        assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }
}
