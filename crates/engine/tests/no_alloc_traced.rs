//! With tracing on, a warm decode step still allocates nothing: the
//! caller's event lane was reserved on its first event (during warm-up),
//! each pool worker's when it started (a worker may first join a job only
//! after warm-up), and graph metadata is registered when a graph is built, not when it
//! runs. A separate test binary from `no_alloc`, because turning tracing
//! on is process-wide.

mod common;

use common::tiny;
use minfer_engine::trace::{rec, start_recording};
use minfer_graph::KvFormat;
use minfer_testutil::counting::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn traced_decode_steps_do_not_allocate_and_are_recorded() {
    assert!(start_recording(1 << 16));
    let m = tiny::model("qwen2");
    let mut e = tiny::engine(&m, 128, 512, KvFormat::F16);
    let mut next = common::argmax(e.eval(&[1, 2, 3, 4, 5, 6, 7, 8], false).unwrap());
    // Two warm-up steps: the first builds the decode graph, the second
    // runs it once more before counting.
    for _ in 0..2 {
        next = common::argmax(e.eval(&[next], false).unwrap());
    }
    let ((), allocs) = count(|| {
        for _ in 0..50 {
            next = common::argmax(e.eval(&[next], false).unwrap());
        }
    });
    assert_eq!(allocs, 0, "allocations in 50 traced decode steps");
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
