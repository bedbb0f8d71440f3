//! The GPU backend end to end, on whatever adapter `--device gpu` opens
//! (Mesa's software Vulkan driver in CI): llama.cpp's golden runs replayed
//! teacher-forced under the same rule as the CPU (`greedy_golden.rs`), a
//! mixed plan (some layers on each device) against the same rule, batch
//! invariance and run-to-run identity on the device, graph reuse, and a
//! position past n_ctx refused. The software driver is slow, so each
//! replay covers a few dozen tokens.

mod common;

use std::sync::Arc;

use common::golden::*;
use minfer_engine::{BatchEntry, DeviceChoice, EngineConfig, Runtime};
use minfer_models::Model;

fn gpu_cfg(n_gpu_layers: Option<u32>) -> EngineConfig {
    EngineConfig {
        n_ctx: 1024,
        n_threads: 2,
        device: DeviceChoice::Gpu { index: None },
        n_gpu_layers,
        ..EngineConfig::default()
    }
}

const SHORT: Replay = Replay {
    cases: 2,
    steps: 12,
};

fn tiny() -> (Arc<Model>, &'static str) {
    let file = "qwen3-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    (
        Arc::new(Model::open(&path).expect("the repository's qwen3 model loads")),
        file,
    )
}

#[test]
fn gpu_golden_qwen3_tiny() {
    let (model, file) = tiny();
    let replay = Replay {
        cases: 4,
        steps: 32,
    };
    check_with(
        &model,
        gpu_cfg(None),
        file,
        "greedy-qwen3-tiny.avx2.json",
        &QWEN3_TINY_TOL,
        replay,
    );
}

#[test]
fn gpu_golden_qwen3_tiny_mixed_plan() {
    // Two of the four layers on the GPU, the rest and the output on the
    // CPU: values cross the boundary both ways.
    let (model, file) = tiny();
    let replay = Replay {
        cases: 2,
        steps: 16,
    };
    check_with(
        &model,
        gpu_cfg(Some(2)),
        file,
        "greedy-qwen3-tiny.avx2.json",
        &QWEN3_TINY_TOL,
        replay,
    );
}

/// A mixture of experts under a GPU plan: attention, norms and the router
/// on the GPU, the routed experts on the CPU (the plan keeps them there),
/// values crossing at every layer.
#[test]
fn gpu_golden_qwen3moe_tiny() {
    let file = "qwen3moe-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's qwen3moe model loads"));
    let replay = Replay {
        cases: 8,
        steps: 32,
    };
    check_with(
        &model,
        gpu_cfg(None),
        file,
        "greedy-qwen3moe-tiny.avx2.json",
        &QWEN3MOE_TINY_TOL,
        replay,
    );
}

/// Phi-3's LongRoPE under a GPU plan: its factored, scaled rotations of
/// Q and K run on the CPU (the plan puts them there), everything else of
/// the layer on the GPU. The context is the golden one (4096), past the
/// fixture's original window, so the long factors are used as in
/// llama.cpp's run.
#[test]
fn gpu_golden_phi3_tiny() {
    let file = "phi3-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's phi3 model loads"));
    let cfg = EngineConfig {
        n_ctx: 4096,
        ..gpu_cfg(None)
    };
    check_with(
        &model,
        cfg,
        file,
        "greedy-phi3-tiny.avx2.json",
        &PHI3_TINY_TOL,
        SHORT,
    );
}

/// gpt-oss under a GPU plan: attention with its sinks and sliding
/// windows on the GPU, the YaRN rotations and the routed MXFP4 experts on
/// the CPU (the plan puts them there), values crossing at every layer.
#[test]
fn gpu_golden_gpt_oss_tiny() {
    let file = "gpt-oss-tiny.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's gpt-oss model loads"));
    let replay = Replay {
        cases: 8,
        steps: 12,
    };
    check_with(
        &model,
        gpu_cfg(None),
        file,
        "greedy-gpt-oss-tiny.avx2.json",
        &GPT_OSS_TINY_TOL,
        replay,
    );
}

#[test]
fn gpu_golden_smollm2() {
    let Some(model) = common::load(minfer_testutil::SMOLLM) else {
        return;
    };
    for golden in ["greedy-smollm2.json", "greedy-smollm2.avx2.json"] {
        check_with(
            &model,
            gpu_cfg(None),
            minfer_testutil::SMOLLM,
            golden,
            &SMOLLM_TOL,
            SHORT,
        );
    }
}

#[test]
fn gpu_golden_qwen2_5() {
    let Some(model) = common::load(minfer_testutil::QWEN) else {
        return;
    };
    for golden in ["greedy-qwen2.5.json", "greedy-qwen2.5.avx2.json"] {
        check_with(
            &model,
            gpu_cfg(None),
            minfer_testutil::QWEN,
            golden,
            &QWEN_TOL,
            SHORT,
        );
    }
}

#[test]
fn gpu_golden_gemma3() {
    let Some(model) = common::load(minfer_testutil::GEMMA3) else {
        return;
    };
    for golden in ["greedy-gemma3.json", "greedy-gemma3.avx2.json"] {
        check_with(
            &model,
            gpu_cfg(None),
            minfer_testutil::GEMMA3,
            golden,
            &GEMMA3_TOL,
            SHORT,
        );
    }
}

/// The last-token logits of each entry of one step, copied out.
fn step(rt: &mut Runtime, batch: &[BatchEntry]) -> Vec<Vec<f32>> {
    let out = rt.step(batch).expect("step");
    (0..batch.len())
        .map(|i| out.last(i).expect("logits").to_vec())
        .collect()
}

#[test]
fn gpu_rows_do_not_depend_on_the_batch() {
    let (model, _) = tiny();
    let prompt_a: Vec<u32> = (1..40).collect();
    let prompt_b: Vec<u32> = (100..117).collect();
    // Alone: sequence A's prompt, then one decode row.
    let mut alone = Runtime::new(Arc::clone(&model), gpu_cfg(None)).expect("runtime");
    let a = alone.new_sequence().expect("seq");
    let solo_prefill = step(&mut alone, &[BatchEntry::last(a, &prompt_a)]);
    let solo = step(&mut alone, &[BatchEntry::last(a, &[7])]);
    // Together with another sequence's rows in the same steps.
    let mut mixed = Runtime::new(Arc::clone(&model), gpu_cfg(None)).expect("runtime");
    let a2 = mixed.new_sequence().expect("seq");
    let b2 = mixed.new_sequence().expect("seq");
    let both_prefill = step(
        &mut mixed,
        &[
            BatchEntry::last(b2, &prompt_b),
            BatchEntry::last(a2, &prompt_a),
        ],
    );
    let both = step(
        &mut mixed,
        &[BatchEntry::last(b2, &[9]), BatchEntry::last(a2, &[7])],
    );
    assert_eq!(
        solo_prefill[0], both_prefill[1],
        "a prompt's logits changed with its batch"
    );
    assert_eq!(
        solo[0], both[1],
        "a decode row's logits changed with its batch"
    );
    // The same device gives the same bits run to run.
    let mut again = Runtime::new(Arc::clone(&model), gpu_cfg(None)).expect("runtime");
    let a3 = again.new_sequence().expect("seq");
    step(&mut again, &[BatchEntry::last(a3, &prompt_a)]);
    assert_eq!(solo, step(&mut again, &[BatchEntry::last(a3, &[7])]));
}

#[test]
fn gpu_decode_reuses_its_graph_and_refuses_positions_past_n_ctx() {
    let (model, _) = tiny();
    let cfg = EngineConfig {
        n_ctx: 16,
        ..gpu_cfg(None)
    };
    let mut eng = minfer_engine::Engine::new(Arc::clone(&model), cfg).expect("engine");
    eng.eval(&[1, 2, 3, 4], false).expect("prefill");
    for t in 0..12 {
        eng.eval(&[5 + t], false).expect("decode");
    }
    // One prefill graph and one decode graph for the whole run.
    assert_eq!(eng.graph_builds(), 2, "builds");
    assert!(eng.graph_reuses() >= 11, "reuses: {}", eng.graph_reuses());
    let err = eng
        .eval(&[9], false)
        .expect_err("position 16 of a 16-token context");
    assert!(err.to_string().contains("context"), "{err}");
}

#[test]
fn a_gpu_sequence_exports_and_imports_on_either_device() {
    let (model, _) = tiny();
    let prompt: Vec<u32> = (3..30).collect();
    let mut src = Runtime::new(Arc::clone(&model), gpu_cfg(Some(2))).expect("runtime");
    let s = src.new_sequence().expect("seq");
    step(&mut src, &[BatchEntry::last(s, &prompt)]);
    let snap = src.export_sequence(s).expect("export");
    let want = step(&mut src, &[BatchEntry::last(s, &[11])]);
    // Into a fresh GPU runtime: the same cells, so the same bits.
    let mut gpu = Runtime::new(Arc::clone(&model), gpu_cfg(Some(2))).expect("runtime");
    let g = gpu.new_sequence().expect("seq");
    gpu.import_sequence(g, &snap).expect("import on the GPU");
    assert_eq!(want, step(&mut gpu, &[BatchEntry::last(g, &[11])]));
    // Into a CPU runtime: the raw rows are the same format everywhere.
    let cpu_cfg = EngineConfig {
        device: DeviceChoice::Cpu,
        ..gpu_cfg(None)
    };
    let mut cpu = Runtime::new(Arc::clone(&model), cpu_cfg).expect("runtime");
    let c = cpu.new_sequence().expect("seq");
    cpu.import_sequence(c, &snap).expect("import on the CPU");
    let got = step(&mut cpu, &[BatchEntry::last(c, &[11])]);
    let max = want[0]
        .iter()
        .zip(&got[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        max < 0.5,
        "CPU continuation of a GPU snapshot differs by {max}"
    );
}
