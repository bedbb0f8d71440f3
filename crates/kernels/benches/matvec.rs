//! Matrix × vector throughput per weight type at the shapes of
//! Qwen2.5-0.5B, for every SIMD level this CPU has and 1 and 2 threads.
//! Throughput is the weight bytes streamed per second, the figure to hold
//! against memory bandwidth (decode streams every weight once per token).
//!
//! `MINFER_SIMD=scalar|avx2|avx512` restricts the run to one level;
//! `MINFER_BENCH_TYPES=Q4_K,Q6_K` to some types.

// The type lists and operands the kernel tests sweep.
#[path = "../tests/common/mod.rs"]
mod common;

use common::{dot_types, row_major};
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use minfer_kernels::matmul::row_bytes;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, SimdLevel};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Duration;

/// (rows, cols) of the Qwen2.5-0.5B projections: attention q/o, k/v, FFN
/// up/gate, FFN down, and the LM head.
const SHAPES: [(usize, usize); 5] = [
    (896, 896),
    (128, 896),
    (4864, 896),
    (896, 4864),
    (151936, 896),
];

/// Random weights whose f16 fields are finite (random bits elsewhere).
fn weights(ty: GgmlType, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let mut data: Vec<u8> = (0..rows * row_bytes(ty, cols).unwrap())
        .map(|_| rng.gen())
        .collect();
    let size = ty.type_size() as usize;
    let halves: &[usize] = match ty {
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => &[],
        _ => &[0],
    };
    if halves.is_empty() {
        // Any bit pattern is a valid float for throughput purposes, but
        // keep NaNs out so timings are not skewed by slow paths.
        for b in data.chunks_exact_mut(2) {
            b[1] &= 0x3F;
        }
    }
    for blk in data.chunks_exact_mut(size) {
        for &o in halves {
            blk[o..o + 2].copy_from_slice(&minfer_kernels::blocks::f32_to_f16(0.01));
        }
    }
    data
}

fn bench(c: &mut Criterion) {
    let levels = match std::env::var("MINFER_SIMD").ok() {
        Some(s) => vec![SimdLevel::select(Some(&s)).expect("MINFER_SIMD")],
        None => SimdLevel::supported(),
    };
    let types: Vec<GgmlType> = match std::env::var("MINFER_BENCH_TYPES").ok() {
        Some(s) => s
            .split(',')
            .map(|t| GgmlType::from_name(t.trim()).expect("MINFER_BENCH_TYPES"))
            .collect(),
        None => dot_types(),
    };
    let pools = [ThreadPool::new(1), ThreadPool::new(2)];
    let mut rng = StdRng::seed_from_u64(1);
    for ty in types {
        let mut group = c.benchmark_group(format!("matvec/{}", ty.name()));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(700));
        for (rows, cols) in SHAPES {
            // 896 is not a multiple of 256, so the K-quants only fit the FFN
            // down projection (llama.cpp's Q4_K_M uses Q5_0/Q8_0 elsewhere).
            if row_bytes(ty, cols).is_none() {
                continue;
            }
            let data = weights(ty, rows, cols, &mut rng);
            let w = row_major(ty, rows, cols, &data);
            let x: Vec<f32> = (0..cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let mut out = vec![0f32; rows];
            let mut scratch = ActScratch::default();
            group.throughput(Throughput::Bytes(data.len() as u64));
            for &level in &levels {
                let kernels = Kernels::new(level).unwrap();
                for pool in &pools {
                    let id = BenchmarkId::new(
                        format!("{level}/t{}", pool.n_threads()),
                        format!("{rows}x{cols}"),
                    );
                    group.bench_function(id, |b| {
                        b.iter(|| {
                            matmul(&kernels, pool, &w, &x, 1, &mut out, &mut scratch).unwrap()
                        })
                    });
                }
            }
        }
        group.finish();
    }
}

// `criterion_group!` defines a public `benches` function that cannot carry
// a doc comment, and lint attributes on a macro call are ignored.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench);
}
criterion_main!(group::benches);
