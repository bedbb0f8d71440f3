//! The interleaved product of each weight type at every instruction set
//! this CPU runs (scalar excluded), rounds alternated, medians printed with
//! each level's speed relative to the first: what a new tile form (AVX-VNNI
//! against plain AVX2, say) buys, on one layer's shapes of Qwen2.5-0.5B.
//!
//! `cargo run --release -p minfer-kernels --example tile_levels -- [THREADS] [N_TOK,...] [TYPE,...|all] [LEVEL,...|all] [REPS]`
//! (default 1 thread; 1, 4 and 512 tokens; every type; every level; 200
//! products of 512 tokens' work per sample). Weights are streamed from
//! memory (enough copies to overflow the caches) up to 16 tokens, as a
//! decode step of that many sequences reads them, and read from the
//! caches at more, as a prefill's later tiles do. With one thread (the
//! products run on the calling thread) the rates are per second of that
//! thread's CPU time, which another busy process on the machine does not
//! inflate; with more, per second of wall time.

use minfer_kernels::matmul::row_bytes;
use minfer_kernels::packed::pack;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, Layout, SimdLevel};
use std::time::Instant;

mod common;

use common::{activations, mat, median, thread_cpu_seconds};

/// The most tokens whose products stream their weights from memory.
const STREAMED: usize = 16;

/// `copies` packed matrices of `ty` (see [`common::matrices`]).
fn matrices(ty: GgmlType, rows: usize, cols: usize, copies: usize) -> Vec<Vec<u8>> {
    common::matrices(ty, rows, cols, copies)
        .iter()
        .map(|m| pack(ty, rows, cols, m).unwrap())
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
        .filter(|s| s != "all")
        .map(|s| s.split(',').map(|t| t.to_ascii_uppercase()).collect());
    let only_levels: Option<Vec<String>> = args
        .next()
        .filter(|s| s != "all")
        .map(|s| s.split(',').map(str::to_string).collect());
    let work: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let levels: Vec<SimdLevel> = SimdLevel::supported()
        .into_iter()
        .filter(|&l| l != SimdLevel::Scalar)
        .filter(|l| {
            only_levels
                .as_ref()
                .is_none_or(|o| o.iter().any(|n| n == l.name()))
        })
        .collect();
    let kernels: Vec<Kernels> = levels.iter().map(|&l| Kernels::new(l).unwrap()).collect();
    let names: Vec<&str> = levels.iter().map(|l| l.name()).collect();
    println!("levels: {} (relative to {})", names.join(", "), names[0]);
    let pool = ThreadPool::new(threads);
    for (ty, rows, cols) in common::SHAPES {
        if only.as_ref().is_some_and(|o| !o.contains(&ty.to_string())) {
            continue;
        }
        let bytes = rows * row_bytes(ty, cols).unwrap();
        let streamed = if n_toks.iter().any(|&n| n <= STREAMED) {
            matrices(ty, rows, cols, (256 << 20) / bytes + 1)
        } else {
            Vec::new()
        };
        let hot = matrices(ty, rows, cols, 1);
        for &n_tok in &n_toks {
            let set = if n_tok <= STREAMED { &streamed } else { &hot };
            let x = activations(n_tok, cols);
            let mut out = vec![0f32; n_tok * rows];
            let mut scratch = ActScratch::default();
            let reps = (work * 512 / n_tok).clamp(3, set.len().max(work));
            let mut t = vec![Vec::new(); kernels.len()];
            for _round in 0..7 {
                for (k, kernels) in kernels.iter().enumerate() {
                    let (t0, c0) = (Instant::now(), thread_cpu_seconds());
                    for i in 0..reps {
                        let w = mat(ty, rows, cols, &set[i % set.len()], Layout::Packed);
                        matmul(kernels, &pool, &w, &x, n_tok, &mut out, &mut scratch).unwrap();
                    }
                    let spent = if threads == 1 {
                        thread_cpu_seconds() - c0
                    } else {
                        t0.elapsed().as_secs_f64()
                    };
                    t[k].push(spent / reps as f64);
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
