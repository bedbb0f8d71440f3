//! With tracing on, a warm decode step still allocates nothing: every
//! thread's event lane was reserved on its first event (during warm-up),
//! and graph metadata is registered when a graph is built, not when it
//! runs. A separate test binary from `no_alloc`, because turning tracing
//! on is process-wide.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::tiny;
use minfer_engine::trace::{rec, start_recording};
use minfer_graph::KvFormat;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
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
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn traced_decode_steps_do_not_allocate_and_are_recorded() {
    assert!(start_recording(1 << 16));
    let m = tiny::model("qwen2");
    let mut e = tiny::engine(&m, 128, 512, KvFormat::F16);
    let mut next = common::argmax(e.eval(&[1, 2, 3, 4, 5, 6, 7, 8], false).unwrap());
    // Two warm-up steps: the first builds the decode graph, the second
    // lets every pool thread record its first event.
    for _ in 0..2 {
        next = common::argmax(e.eval(&[next], false).unwrap());
    }
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..50 {
        next = common::argmax(e.eval(&[next], false).unwrap());
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(
        ALLOCS.load(Ordering::SeqCst),
        0,
        "allocations in 50 traced decode steps"
    );
    let r = rec::snapshot();
    let decodes = r
        .lanes
        .iter()
        .flat_map(|l| &l.2)
        .filter(|ev| matches!(ev.what, rec::What::Span { name: "decode", .. }))
        .count();
    assert_eq!(decodes, 52);
    let ops = r
        .lanes
        .iter()
        .flat_map(|l| &l.2)
        .filter(|ev| matches!(ev.what, rec::What::Op { .. }))
        .count();
    assert!(ops > 52, "op spans recorded: {ops}");
}
