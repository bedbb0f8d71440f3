//! Repacked weights change nothing but speed (legacy types, Q6_K, and the
//! Q4_K/Q5_K of the 1.5B Qwen and Gemma 3): a model whose matrices were
//! repacked into the interleaved layout gives the same logits, bit for
//! bit, as the same model in the file's layout, in prefill (tiles of four
//! tokens plus a remainder) and in decode, on one and two threads, with
//! the best tile kernel of the CPU and with the AVX2 one.

mod common;

use std::sync::Arc;

use minfer_engine::{Engine, EngineConfig, SimdLevel};

fn run(
    model: &Arc<minfer_models::Model>,
    repack: bool,
    threads: usize,
    simd: Option<SimdLevel>,
) -> Vec<Vec<f32>> {
    let cfg = EngineConfig {
        n_ctx: 256,
        n_threads: threads,
        repack,
        simd,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(Arc::clone(model), cfg).expect("engine");
    let n_vocab = model.n_vocab() as u32;
    // 39 tokens: nine tiles of four and a remainder of three.
    let prompt: Vec<u32> = (0..39u32).map(|i| (i * 7919 + 13) % n_vocab).collect();
    let mut out = vec![e.eval(&prompt, true).expect("prefill").to_vec()];
    for step in 0..4u32 {
        let tok = (step * 104_729 + 5) % n_vocab;
        out.push(e.eval(&[tok], false).expect("decode").to_vec());
    }
    out
}

fn check(file: &str) {
    let (Some(packed), Some(plain)) = (common::load(file), common::load(file)) else {
        return;
    };
    let mut levels = vec![None];
    for level in [SimdLevel::Avx2, SimdLevel::Avx2Vnni] {
        if level.is_supported() && SimdLevel::detect() != level {
            levels.push(Some(level));
        }
    }
    for threads in [1, 2] {
        let b = run(&plain, false, threads, None);
        for &simd in &levels {
            let a = run(&packed, true, threads, simd);
            for (s, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.len(), y.len());
                let same = x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(
                    same,
                    "{file}: logits differ at step {s} on {threads} threads ({simd:?})"
                );
            }
        }
    }
    let n_packed = (0..packed.weights.len() as u32)
        .filter(|&i| packed.weights.packed(minfer_graph::WeightId(i)).is_some())
        .count();
    let n_plain = (0..plain.weights.len() as u32)
        .filter(|&i| plain.weights.packed(minfer_graph::WeightId(i)).is_some())
        .count();
    assert_eq!(n_plain, 0, "repack: false must leave the file's layout");
    if SimdLevel::Avx2.is_supported() {
        // Every layer matrix of both models has a packable type and shape.
        assert!(
            n_packed > 100,
            "{file}: only {n_packed} tensors were packed"
        );
    } else {
        eprintln!("{file}: no AVX2 on this CPU, nothing was repacked");
    }
}

#[test]
fn repacked_smollm2_gives_the_same_bits() {
    check(minfer_testutil::SMOLLM);
}

#[test]
fn repacked_qwen_gives_the_same_bits() {
    check(minfer_testutil::QWEN);
}

#[test]
fn repacked_qwen_1_5b_k_quants_give_the_same_bits() {
    check(minfer_testutil::QWEN_1_5B);
}

#[test]
fn repacked_gemma3_gives_the_same_bits() {
    check(minfer_testutil::GEMMA3);
}
