//! The interleaved product of each weight type at every instruction set
//! this CPU runs (scalar excluded), rounds alternated, medians printed with
//! each level's speed relative to the first: what a new tile form (AVX-VNNI
//! against plain AVX2, say) buys, on one layer's shapes of Qwen2.5-0.5B.
//!
//! `cargo run --release -p minfer-kernels --example tile_levels -- [THREADS] [N_TOK,...] [TYPE,...]`
//! (default 1 thread; 1, 4 and 512 tokens; every type). Weights are read from the
//! caches at 4 and more tokens and streamed (enough copies to overflow
//! them) at fewer.

use minfer_kernels::matmul::row_bytes;
use minfer_kernels::packed::pack;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, Layout, MatRef, SimdLevel};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `copies` random matrices of `ty` with small scales, so the sums stay
/// finite.
fn matrices(ty: GgmlType, rows: usize, cols: usize, copies: usize) -> Vec<Vec<u8>> {
    let bytes = rows * row_bytes(ty, cols).unwrap();
    let mut seed = 1u32;
    (0..copies)
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
            let small = minfer_kernels::blocks::f32_to_f16(0.01);
            for blk in d.chunks_exact_mut(bs) {
                blk[d_at..d_at + 2].copy_from_slice(&small);
                if matches!(ty, GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K) {
                    blk[2..4].copy_from_slice(&small);
                }
                if ty == GgmlType::Q2_K {
                    blk[82..84].copy_from_slice(&small);
                }
            }
            pack(ty, rows, cols, &d).unwrap()
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let n_toks: Vec<usize> = args
        .next()
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 4, 512]);
    // On a shared machine a run over every type takes long: a subset.
    let only: Option<Vec<String>> = args
        .next()
        .map(|s| s.split(',').map(|t| t.to_ascii_uppercase()).collect());
    let levels: Vec<SimdLevel> = SimdLevel::supported()
        .into_iter()
        .filter(|&l| l != SimdLevel::Scalar)
        .collect();
    let kernels: Vec<Kernels> = levels.iter().map(|&l| Kernels::new(l).unwrap()).collect();
    let names: Vec<&str> = levels.iter().map(|l| l.name()).collect();
    println!("levels: {} (relative to {})", names.join(", "), names[0]);
    let pool = ThreadPool::new(threads);
    for (ty, rows, cols) in [
        (GgmlType::Q5_0, 4864, 896),
        (GgmlType::Q6_K, 896, 4864),
        (GgmlType::Q8_0, 896, 896),
        (GgmlType::Q4_1, 1536, 576),
        // Whole super-blocks per row: the FFN's down shape.
        (GgmlType::Q4_K, 896, 4864),
        (GgmlType::Q5_K, 896, 4864),
        (GgmlType::IQ4_NL, 4864, 896),
        (GgmlType::IQ4_XS, 896, 4864),
        (GgmlType::Q3_K, 896, 4864),
        (GgmlType::Q2_K, 896, 4864),
    ] {
        if only.as_ref().is_some_and(|o| !o.contains(&ty.to_string())) {
            continue;
        }
        let bytes = rows * row_bytes(ty, cols).unwrap();
        let streamed = if n_toks.iter().any(|&n| n < 4) {
            matrices(ty, rows, cols, (256 << 20) / bytes + 1)
        } else {
            Vec::new()
        };
        let hot = matrices(ty, rows, cols, 1);
        for &n_tok in &n_toks {
            let set = if n_tok < 4 { &streamed } else { &hot };
            let x: Vec<f32> = (0..n_tok * cols)
                .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
                .collect();
            let mut out = vec![0f32; n_tok * rows];
            let mut scratch = ActScratch::default();
            let reps = (200 * 512 / n_tok).clamp(3, set.len().max(200));
            let mut t = vec![Vec::new(); kernels.len()];
            for _round in 0..7 {
                for (k, kernels) in kernels.iter().enumerate() {
                    let t0 = Instant::now();
                    for i in 0..reps {
                        let w = MatRef {
                            ty,
                            rows,
                            cols,
                            data: &set[i % set.len()],
                            layout: Layout::Packed,
                        };
                        matmul(kernels, &pool, &w, &x, n_tok, &mut out, &mut scratch).unwrap();
                    }
                    t[k].push(t0.elapsed().as_secs_f64() / reps as f64);
                }
            }
            let m: Vec<f64> = t.into_iter().map(median).collect();
            let cells: Vec<String> = m
                .iter()
                .zip(&names)
                .map(|(s, n)| {
                    let gmac = (rows * cols * n_tok) as f64 / s / 1e9;
                    format!("{n} {gmac:6.1} GMAC/s {:.2}x", m[0] / s)
                })
                .collect();
            println!(
                "{ty:6} {rows:5}x{cols:<5} n_tok {n_tok:3} x{threads}: {}",
                cells.join(" | ")
            );
        }
    }
}
