//! What a decode step on the GPU allocates once the engine is warm. The
//! backend's own part of a step (inputs written into recorded buffers, the
//! recorded dispatches replayed, the logits read into a kept buffer)
//! allocates nothing, but wgpu allocates inside every command encoder,
//! submission and buffer mapping, so the count is not zero. What must hold
//! is that it does not grow: the same allocations per step at step 10 and
//! at step 60, nothing retained per step, no graph rebuilt. One counting
//! test per binary (see `minfer_testutil::counting`).

mod common;

use std::sync::Arc;

use minfer_engine::{DeviceChoice, Engine, EngineConfig};
use minfer_models::Model;
use minfer_testutil::counting::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn gpu_decode_allocations_do_not_grow() {
    let path = minfer_testutil::repo_model("qwen3-tiny-q8_0.gguf");
    let model = Arc::new(Model::open(&path).expect("the repository's qwen3 model loads"));
    let cfg = EngineConfig {
        n_ctx: 256,
        n_threads: 2,
        device: DeviceChoice::Gpu { index: None },
        ..EngineConfig::default()
    };
    let mut e = Engine::new(model, cfg).expect("engine");
    let mut next = common::argmax(e.eval(&[1, 2, 3, 4, 5, 6, 7, 8], false).unwrap());
    next = common::argmax(e.eval(&[next], false).unwrap());
    let mut per_step = Vec::new();
    for _ in 0..3 {
        let ((), allocs) = count(|| {
            for _ in 0..20 {
                next = common::argmax(e.eval(&[next], false).unwrap());
            }
        });
        per_step.push(allocs as f64 / 20.0);
    }
    println!("allocations per GPU decode step, three runs of 20 steps: {per_step:?}");
    // A few allocations of slack: wgpu's internal pools round their growth.
    let (lo, hi) = (per_step[0], per_step[2]);
    assert!(hi <= lo + 2.0, "allocations per step grew: {per_step:?}");
    assert_eq!(e.graph_builds(), 2, "a decode step rebuilt its graph");
}
