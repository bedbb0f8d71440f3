//! A global allocator that counts allocations while armed, for the tests
//! that check a warm decode step allocates nothing. Each test binary that
//! uses it installs it with
//! `#[global_allocator] static GLOBAL: minfer_testutil::counting::Counting
//! = minfer_testutil::counting::Counting;`.
//!
//! [`count`] covers every thread of the process, because the engine's pool
//! workers must be counted too. So a binary that counts that way holds
//! exactly one test: the harness formats a finished test's result (and
//! allocates) on its main thread while the next test runs. A binary with
//! many tests uses [`count_armed`] instead, which counts only the threads
//! that armed themselves (the test's own and its pool's workers).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Defers to the system allocator; counts allocations and reallocations
/// made while [`count`] runs its closure.
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the allocation being made now is counted.
fn counted() -> bool {
    // `try_with`: a thread being torn down has no thread-locals left.
    COUNTING.load(Ordering::Relaxed) || ARMED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: defers to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` with counting armed (in every thread of the process) and
/// returns its result with the number of allocations made meanwhile.
pub fn count<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let out = f();
    COUNTING.store(false, Ordering::SeqCst);
    (out, ALLOCS.load(Ordering::SeqCst))
}

/// Arms (or disarms) counting for the calling thread alone, for
/// [`count_armed`]'s `arm` callback to run on each worker of a pool.
pub fn arm_thread(on: bool) {
    ARMED.with(|a| a.set(on));
}

/// Runs `f` with counting armed in the calling thread and in whatever
/// threads `arm(true)` arms (with [`arm_thread`]), and returns its result
/// with the number of allocations those threads made meanwhile. Threads
/// of other tests running beside it are not counted; two armed counts in
/// one process run one after the other.
pub fn count_armed<T>(arm: impl Fn(bool), f: impl FnOnce() -> T) -> (T, usize) {
    // One count at a time: the tally is one process-wide counter, which a
    // second armed count beside this one would reset and add to. Taking
    // an uncontended std mutex does not allocate.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    arm(true);
    arm_thread(true);
    ALLOCS.store(0, Ordering::SeqCst);
    let out = f();
    let n = ALLOCS.load(Ordering::SeqCst);
    arm_thread(false);
    arm(false);
    (out, n)
}
