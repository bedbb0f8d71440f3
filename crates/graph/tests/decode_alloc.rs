//! A decode step allocates nothing once the first one has run: measured
//! with the shared counting allocator (`minfer_testutil::counting`) on a
//! Qwen2-0.5B-shaped model (random weights, small vocabulary) loaded from
//! a GGUF file.
//!
//! This binary holds a single test so that nothing else allocates while
//! the steps are counted.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{build, params, Hp, SeqInputs};
use minfer_gguf::{GgufFile, GgufWriter};
use minfer_graph::{CacheConfig, Fusion, WeightStore};
use minfer_kernels::blocks::f32_to_f16;
use minfer_kernels::{GgmlType, Kernels};
use minfer_testutil::counting::{count, Counting};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Qwen2.5-0.5B's shape with a 1024-token vocabulary.
const QWEN2: Hp = Hp {
    n_layer: 24,
    d: 896,
    n_head: 14,
    n_head_kv: 2,
    head_dim: 64,
    ffn: 4864,
    vocab: 1024,
    eps: 1e-6,
    rope_base: 1_000_000.0,
    bias: true,
};

/// Random quantized blocks whose values have magnitude about
/// `1/sqrt(cols)`: Q8_0 for attention and embeddings, Q4_0 for the FFN
/// (896 columns are not whole 256-blocks, so no K-quants).
fn random_blocks(rng: &mut StdRng, ty: GgmlType, cols: usize, rows: usize) -> Vec<u8> {
    let (block, size, q_mag) = match ty {
        GgmlType::Q8_0 => (32, 34, 64.0),
        GgmlType::Q4_0 => (32, 18, 4.0),
        _ => unreachable!("only Q8_0 and Q4_0 are generated"),
    };
    let d = f32_to_f16(1.0 / (cols as f32).sqrt() / q_mag);
    let mut out = vec![0u8; cols / block * size * rows];
    rng.fill(&mut out[..]);
    for b in out.chunks_exact_mut(size) {
        b[..2].copy_from_slice(&d);
    }
    out
}

fn write_model(path: &std::path::Path, hp: &Hp) {
    let mut rng = StdRng::seed_from_u64(2024);
    let mut w = GgufWriter::new();
    w.set("general.architecture", "qwen2");
    w.set("qwen2.block_count", hp.n_layer as u32);
    w.set("qwen2.embedding_length", hp.d as u32);
    w.set("qwen2.feed_forward_length", hp.ffn as u32);
    w.set("qwen2.attention.head_count", hp.n_head as u32);
    w.set("qwen2.attention.head_count_kv", hp.n_head_kv as u32);
    for (name, shape, proj) in common::tensors(hp) {
        let (ty, bytes) = if proj {
            let ty = if name.contains("ffn_") {
                GgmlType::Q4_0
            } else {
                GgmlType::Q8_0
            };
            (ty, random_blocks(&mut rng, ty, shape[0], shape[1]))
        } else {
            (
                GgmlType::F32,
                common::tensor_bytes(&mut rng, &name, shape, false, GgmlType::F32),
            )
        };
        w.add_tensor(name, ty, &[shape[0] as u64, shape[1] as u64], bytes)
            .unwrap();
    }
    w.write_file(path).unwrap();
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn decode_steps_after_the_first_allocate_nothing() {
    let hp = QWEN2;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qwen2-shaped.gguf");
    write_model(&path, &hp);
    let file = Arc::new(GgufFile::open(&path).unwrap());
    let weights = WeightStore::from_gguf(file).unwrap();

    let n_ctx = 256u32;
    let fusion = Fusion::ALL;
    let mut cache = minfer_cpu::graph_cache(Kernels::detect(), 2, CacheConfig::default());
    cache.set_timing(true);

    let prompt = common::tokens(16, hp.vocab, 7);
    let mut inp = SeqInputs::with_capacity(prompt.len(), n_ctx as usize);
    inp.fill(&prompt, 0, 1);
    let pre = cache
        .prepare(
            &params(prompt.len() as u32, 1, n_ctx, fusion),
            &weights,
            |b| build(b, &hp),
        )
        .unwrap();
    let logits = cache.execute(pre, &weights, &inp.step()).unwrap();
    assert_eq!(logits.len(), hp.vocab);
    let argmax = |l: &[f32]| {
        l.iter()
            .enumerate()
            .fold((0usize, f32::NEG_INFINITY), |b, (i, &v)| {
                if v > b.1 {
                    (i, v)
                } else {
                    b
                }
            })
            .0 as i32
    };
    let mut token = argmax(logits);
    assert!(logits.iter().all(|v| v.is_finite()));

    const STEPS: usize = 16;
    let decode = params(1, 1, n_ctx, fusion);
    let mut allocs = [0usize; STEPS];
    let mut total = [Duration::ZERO; STEPS];
    let mut prepare = [Duration::ZERO; STEPS];
    let mut fill = [Duration::ZERO; STEPS];
    let mut sched = [Duration::ZERO; STEPS];
    let mut kernels = [Duration::ZERO; STEPS];
    for s in 0..STEPS {
        let pos = prompt.len() + s;
        let t = Instant::now();
        (token, allocs[s]) = count(|| {
            inp.fill(std::slice::from_ref(&token), pos, 1);
            let uid = cache.prepare(&decode, &weights, |b| build(b, &hp)).unwrap();
            argmax(cache.execute(uid, &weights, &inp.step()).unwrap())
        });
        total[s] = t.elapsed();
        let st = cache.last_step_timings();
        (prepare[s], fill[s], sched[s], kernels[s]) =
            (st.prepare, st.fill, st.sched_overhead(), st.kernels);
    }
    assert_eq!(cache.builds(), 2);
    assert_eq!(cache.reuses(), STEPS as u64 - 1);
    assert!(allocs[0] > 0, "the first decode step builds its graph");
    assert_eq!(
        &allocs[1..],
        &[0; STEPS - 1],
        "allocations per decode step after the first"
    );

    let steady = 1..STEPS;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    eprintln!(
        "decode step (qwen2-shaped, 24 layers, {} threads): median {:.2} ms; engine overhead: \
         params compare {:.2} us, input fill {:.2} us, scheduler walk {:.2} us; kernels {:.2} ms",
        cache.threads().n_threads(),
        us(median(&mut total[steady.clone()])) / 1e3,
        us(median(&mut prepare[steady.clone()])),
        us(median(&mut fill[steady.clone()])),
        us(median(&mut sched[steady.clone()])),
        us(median(&mut kernels[steady])) / 1e3,
    );
    // The same steps without the timing path: its per-node clock reads are
    // part of the scheduler overhead printed above.
    cache.set_timing(false);
    let mut plain = [Duration::ZERO; STEPS];
    for (s, slot) in plain.iter_mut().enumerate() {
        let pos = prompt.len() + STEPS + s;
        let t = Instant::now();
        let n;
        (token, n) = count(|| {
            inp.fill(std::slice::from_ref(&token), pos, 1);
            let uid = cache.prepare(&decode, &weights, |b| build(b, &hp)).unwrap();
            argmax(cache.execute(uid, &weights, &inp.step()).unwrap())
        });
        *slot = t.elapsed();
        assert_eq!(n, 0);
    }
    eprintln!(
        "decode step without the timing path: median {:.2} ms",
        us(median(&mut plain)) / 1e3
    );
    let uid = cache.prepare(&decode, &weights, |b| build(b, &hp)).unwrap();
    let g = cache.graph(uid).unwrap();
    eprintln!(
        "decode graph: {} nodes; allocator: {:?}",
        g.nodes.len(),
        cache.alloc_stats()
    );
}
