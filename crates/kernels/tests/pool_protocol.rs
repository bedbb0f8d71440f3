//! The thread pool's job hand-over protocol, in runs small enough for Miri
//! (`cargo +nightly miri test -p minfer-kernels --test pool_protocol`),
//! which checks every access for data races and use after free.
//!
//! `ThreadPool::run` hands workers a reference to a closure on the caller's
//! stack with its lifetime erased. These tests make that closure borrow
//! data that the caller frees as soon as `run` returns: a worker that
//! touched the job after counting itself done, or a `run` that returned
//! early (also on a panic), would read freed memory, which Miri reports and
//! which the sums below would show in a normal run.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use minfer_kernels::pool::ThreadPool;

/// Rounds per test: enough to cover park and spin hand-overs, few enough
/// for Miri's interpreter.
const ROUNDS: usize = 12;

#[test]
fn borrowed_job_data_outlives_every_worker_use() {
    for (n_threads, spin) in [(2, 0), (3, 1), (4, 50)] {
        let pool = ThreadPool::with_spin(n_threads, spin);
        for round in 0..ROUNDS {
            // Owned by this frame and freed right after `run` returns.
            let data: Vec<usize> = (0..32).map(|i| i + round).collect();
            let sum = AtomicUsize::new(0);
            pool.run(|ctx| {
                // Later threads arrive later, so a premature return of
                // `run` would leave them reading freed data.
                for _ in 0..ctx.thread_index() * 20 {
                    std::hint::spin_loop();
                }
                sum.fetch_add(data.iter().sum::<usize>(), Ordering::Relaxed);
            });
            drop(data);
            let one: usize = (0..32).map(|i| i + round).sum();
            assert_eq!(sum.into_inner(), one * n_threads);
        }
    }
}

#[test]
fn a_panicking_job_returns_only_after_every_worker_is_done() {
    let pool = ThreadPool::with_spin(3, 0);
    for round in 0..ROUNDS {
        let data = vec![round; 16];
        let seen = AtomicUsize::new(0);
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.run(|ctx| {
                if ctx.thread_index() == round % 3 {
                    panic!("job panics on thread {}", ctx.thread_index());
                }
                for _ in 0..30 {
                    std::hint::spin_loop();
                }
                seen.fetch_add(data.len(), Ordering::Relaxed);
            })
        }));
        drop(data);
        assert!(r.is_err(), "the panic reaches the caller");
        assert_eq!(seen.into_inner(), 2 * 16);
    }
    // The pool is still usable.
    let n = AtomicUsize::new(0);
    pool.run(|_| {
        n.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(n.into_inner(), 3);
}

#[test]
fn barrier_orders_writes_between_phases() {
    let pool = ThreadPool::with_spin(3, 2);
    for round in 0..ROUNDS {
        let slots: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let total = AtomicUsize::new(0);
        pool.run(|ctx| {
            slots[ctx.thread_index()].store(round + 1, Ordering::Relaxed);
            ctx.barrier();
            // After the barrier every thread sees every slot written.
            let s: usize = slots.iter().map(|a| a.load(Ordering::Relaxed)).sum();
            total.fetch_add(s, Ordering::Relaxed);
        });
        assert_eq!(total.into_inner(), 3 * 3 * (round + 1));
    }
}

#[test]
fn for_range_hands_out_each_index_once() {
    let pool = ThreadPool::with_spin(3, 1);
    let hits: Vec<AtomicUsize> = (0..40).map(|_| AtomicUsize::new(0)).collect();
    pool.for_range(hits.len(), 4, |r| {
        for i in r {
            hits[i].fetch_add(1, Ordering::Relaxed);
        }
    });
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
}

#[test]
fn dropping_a_pool_joins_its_workers() {
    for spin in [0, 100] {
        let pool = ThreadPool::with_spin(4, spin);
        pool.run(|_| {});
        drop(pool);
    }
    drop(ThreadPool::with_spin(3, 0));
}

/// Elastic jobs (`for_chunks`): a worker may join late or not at all, and
/// jobs alternate with ordinary ones. Whatever joined must be done before
/// `for_chunks` returns and frees the data; whatever did not join must
/// never read the job (it may already belong to the next dispatch).
#[test]
fn elastic_jobs_free_their_data_only_after_every_joined_worker() {
    for (n_threads, spin) in [(2, 0), (3, 1), (4, 50)] {
        let pool = ThreadPool::with_spin(n_threads, spin);
        for round in 0..ROUNDS {
            let data: Vec<usize> = (0..64).map(|i| i * round).collect();
            let hits: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
            pool.for_chunks(data.len(), 1, 4, |r| {
                for i in r {
                    hits[i].fetch_add(data[i] + 1, Ordering::Relaxed);
                }
            });
            drop(data);
            for (i, h) in hits.iter().enumerate() {
                assert_eq!(h.load(Ordering::Relaxed), i * round + 1, "index {i}");
            }
            // An ordinary job right after: late workers of the elastic one
            // must join this one instead.
            let count = AtomicUsize::new(0);
            pool.run(|_| {
                count.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(count.into_inner(), n_threads);
        }
    }
}
