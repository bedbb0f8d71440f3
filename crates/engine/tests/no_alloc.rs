//! A decode step allocates nothing once the engine is warm: the params
//! compare, the input fill, the graph walk and the logits copy all reuse
//! buffers sized before. Checked with a counting global allocator.
//! The batched form is `no_alloc_batched`: one test per binary, see
//! `minfer_testutil::counting`.

mod common;

use common::tiny;
use minfer_graph::KvFormat;
use minfer_testutil::counting::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decode_steps_do_not_allocate() {
    let m = tiny::model("qwen2");
    let mut e = tiny::engine(&m, 128, 512, KvFormat::F16);
    let mut next = common::argmax(e.eval(&[1, 2, 3, 4, 5, 6, 7, 8], false).unwrap());
    // The first decode step builds the decode graph.
    next = common::argmax(e.eval(&[next], false).unwrap());
    let ((), allocs) = count(|| {
        for _ in 0..50 {
            next = common::argmax(e.eval(&[next], false).unwrap());
        }
    });
    assert_eq!(allocs, 0, "allocations in 50 decode steps");
    assert_eq!(e.graph_builds(), 2);
}
