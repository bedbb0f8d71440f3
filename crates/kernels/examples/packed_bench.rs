//! Interleaved against row-wise products, per weight type, on one layer's
//! shapes of Qwen2.5-0.5B: decode (one token, weights streamed from memory:
//! enough copies to overflow the caches) and prefill (512 tokens).
//! Rounds alternate the two layouts; medians are printed.
//!
//! `cargo run --release -p minfer-kernels --example packed_bench [THREADS] [hot]`

use minfer_kernels::matmul::row_bytes;
use minfer_kernels::packed::pack;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, Kernels, Layout};
use std::time::Instant;

mod common;

use common::{activations, mat, matrices, median};

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    // `hot`: one copy of each matrix, read from the caches (compute speed).
    let hot = std::env::args().nth(2).as_deref() == Some("hot");
    let kernels = Kernels::detect();
    let pool = ThreadPool::new(threads);
    for (ty, rows, cols) in common::SHAPES {
        let bytes = rows * row_bytes(ty, cols).unwrap();
        let copies = if hot { 1 } else { (256 << 20) / bytes + 1 };
        let mats = matrices(ty, rows, cols, copies);
        let packed: Vec<Vec<u8>> = mats
            .iter()
            .map(|m| pack(ty, rows, cols, m).unwrap())
            .collect();
        for n_tok in [1usize, 512] {
            let x = activations(n_tok, cols);
            let mut out = vec![0f32; n_tok * rows];
            let mut scratch = ActScratch::default();
            let reps = if n_tok == 1 { copies.max(200) } else { 3 };
            let mut t = [Vec::new(), Vec::new()];
            for _round in 0..7 {
                for (k, set) in [&mats, &packed].into_iter().enumerate() {
                    let t0 = Instant::now();
                    for i in 0..reps {
                        let layout = if k == 0 { Layout::Rows } else { Layout::Packed };
                        let w = mat(ty, rows, cols, &set[i % set.len()], layout);
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
