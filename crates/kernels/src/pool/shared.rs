//! One pool per thread count for the whole process.
//!
//! Every model a process loads (the models of a server, a target and its
//! draft) computes on the same cores. Separate pools would each keep
//! `n - 1` workers spinning and would run their steps at the same time on
//! too few cores; one shared pool serializes their dispatches instead (its
//! dispatch lock), so a step of one model waits for at most one node of
//! another, never for a whole step.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::ThreadPool;

/// The pools handed out, by thread count; a pool lives while a holder does.
static POOLS: Mutex<Vec<(usize, Weak<ThreadPool>)>> = Mutex::new(Vec::new());

/// The process's pool of `n_threads` threads (0 counts as 1): the one
/// already in use by another holder, or a new one. Its workers stop when
/// the last holder drops it.
///
/// # Panics
///
/// If the OS refuses to spawn a worker thread.
pub fn shared_pool(n_threads: usize) -> Arc<ThreadPool> {
    let n = n_threads.max(1);
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    pools.retain(|(_, w)| w.strong_count() > 0);
    if let Some(pool) = pools
        .iter()
        .find(|(k, _)| *k == n)
        .and_then(|(_, w)| w.upgrade())
    {
        return pool;
    }
    let pool = Arc::new(ThreadPool::new(n));
    pools.push((n, Arc::downgrade(&pool)));
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pool_per_thread_count_while_held() {
        let a = shared_pool(3);
        let b = shared_pool(3);
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared_pool(1);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!((a.n_threads(), c.n_threads()), (3, 1));
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert!(weak.upgrade().is_none(), "the last holder stops the pool");
    }

    #[test]
    fn two_callers_share_one_pool() {
        let pool = shared_pool(2);
        let sums: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let pool = pool.clone();
                    s.spawn(move || {
                        let total = std::sync::atomic::AtomicUsize::new(0);
                        for _ in 0..200 {
                            pool.for_range(64, 1, |r| {
                                total.fetch_add(r.len(), std::sync::atomic::Ordering::Relaxed);
                            });
                        }
                        total.into_inner()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(sums, vec![64 * 200, 64 * 200]);
    }
}
