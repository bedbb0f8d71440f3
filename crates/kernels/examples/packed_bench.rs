//! Interleaved against row-wise products, per weight type, on one layer's
//! shapes of Qwen2.5-0.5B: decode (one token, weights streamed from memory:
//! enough copies to overflow the caches) and prefill (512 tokens).
//! Rounds alternate the two layouts; medians are printed.
//!
//! `cargo run --release -p minfer-kernels --example packed_bench [THREADS] [hot]`

use minfer_kernels::matmul::row_bytes;
use minfer_kernels::packed::pack;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, Layout, MatRef};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // `hot`: one copy of each matrix, read from the caches (compute speed).
    let hot = std::env::args().nth(2).as_deref() == Some("hot");
    let kernels = Kernels::detect();
    let pool = ThreadPool::new(threads);
    for (ty, rows, cols) in [
        (GgmlType::Q5_0, 4864, 896),
        (GgmlType::Q6_K, 896, 4864),
        (GgmlType::Q8_0, 896, 128),
        (GgmlType::Q4_1, 1536, 576),
        (GgmlType::Q4_K, 8960, 1536),
        (GgmlType::Q5_K, 1536, 8960),
        (GgmlType::IQ4_NL, 4864, 896),
        (GgmlType::IQ4_XS, 896, 4864),
        (GgmlType::Q3_K, 896, 4864),
        (GgmlType::Q2_K, 896, 4864),
    ] {
        let bytes = rows * row_bytes(ty, cols).unwrap();
        let copies = if hot { 1 } else { (256 << 20) / bytes + 1 };
        let mut seed = 1u32;
        let mats: Vec<Vec<u8>> = (0..copies)
            .map(|_| {
                let mut d: Vec<u8> = (0..bytes)
                    .map(|_| {
                        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (seed >> 24) as u8
                    })
                    .collect();
                let bs = ty.type_size() as usize;
                let d_at = match ty {
                    GgmlType::Q6_K => 208,
                    GgmlType::Q3_K => 108,
                    GgmlType::Q2_K => 80,
                    _ => 0,
                };
                for blk in d.chunks_exact_mut(bs) {
                    blk[d_at..d_at + 2].copy_from_slice(&minfer_kernels::blocks::f32_to_f16(0.01));
                    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K) {
                        blk[2..4].copy_from_slice(&minfer_kernels::blocks::f32_to_f16(0.01));
                    }
                    if ty == GgmlType::Q2_K {
                        blk[82..84].copy_from_slice(&minfer_kernels::blocks::f32_to_f16(0.01));
                    }
                }
                d
            })
            .collect();
        let packed: Vec<Vec<u8>> = mats
            .iter()
            .map(|m| pack(ty, rows, cols, m).unwrap())
            .collect();
        for n_tok in [1usize, 512] {
            let x: Vec<f32> = (0..n_tok * cols)
                .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
                .collect();
            let mut out = vec![0f32; n_tok * rows];
            let mut scratch = ActScratch::default();
            let reps = if n_tok == 1 { copies.max(200) } else { 3 };
            let mut t = [Vec::new(), Vec::new()];
            for _round in 0..7 {
                for (k, set) in [&mats, &packed].into_iter().enumerate() {
                    let t0 = Instant::now();
                    for i in 0..reps {
                        let w = MatRef {
                            ty,
                            rows,
                            cols,
                            data: &set[i % set.len()],
                            layout: if k == 0 { Layout::Rows } else { Layout::Packed },
                        };
                        matmul(&kernels, &pool, &w, &x, n_tok, &mut out, &mut scratch).unwrap();
                    }
                    t[k].push(t0.elapsed().as_secs_f64() / reps as f64);
                }
            }
            let (r, p) = (median(t[0].clone()), median(t[1].clone()));
            let rate = |s: f64| {
                if n_tok == 1 {
                    format!("{:6.1} GB/s", bytes as f64 / s / 1e9)
                } else {
                    format!("{:6.1} GMAC/s", (rows * cols * n_tok) as f64 / s / 1e9)
                }
            };
            println!(
                "{ty:5} {rows:5}x{cols:<5} n_tok {n_tok:3} x{threads}: rows {:8.1} us ({}), packed {:8.1} us ({}), {:.2}x",
                r * 1e6,
                rate(r),
                p * 1e6,
                rate(p),
                r / p
            );
        }
    }
}
