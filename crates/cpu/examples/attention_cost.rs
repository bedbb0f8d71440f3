//! Time of one layer's attention in a prefill chunk at depth, by the
//! number of query tokens a work item takes together (the tile), medians
//! over interleaved rounds; every tile's output is checked to be the bits
//! of tile 1.
//!
//! `cargo run --release -p minfer-graph --example attention_cost -- \
//!   [N_HEAD N_HEAD_KV HEAD_DIM] [DEPTH] [PROMPT] [THREADS] [TILES,..] [ROUNDS] [SLIDING] [LEVEL] [FLUSH_MB]`
//!
//! Defaults: Qwen2.5-0.5B's heads (14, 2, 64), depth 8192, a prompt
//! chunk of 512, 2 threads, tiles 1,4,8,16, 5 rounds, no sliding window,
//! the best row kernels (or `avx2`, `scalar`), warm caches. `FLUSH_MB > 0`
//! reads that many MiB of other memory before every timed call, so that
//! the cache comes from DRAM as it does in a model's decode step (where
//! the weights and the other layers' caches pass between two reads of a
//! layer's cache).

use std::time::Instant;

use minfer_cpu::{attention, attention_sliding, kv_store, AttnScratch, Windows};
use minfer_graph::kv::{BatchPlan, KvCells, KvRegion};
use minfer_graph::{AttnParams, KvFormat};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{RowKernels, SimdLevel};

/// A cheap deterministic fill in [-1, 1).
fn fill(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Nanoseconds the calling thread has run on a CPU (Linux), so that a
/// one-thread measurement is not skewed by other processes taking the core.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (n_head, n_head_kv, hd) = (num(0, 14), num(1, 2), num(2, 64));
    let (depth, prompt, threads) = (num(3, 8192), num(4, 512), num(5, 2));
    let tiles: Vec<usize> = args.get(6).map_or(vec![1, 4, 8, 16], |s| {
        s.split(',').map(|t| t.parse().expect("tiles")).collect()
    });
    let rounds = num(7, 5);
    let sliding = num(8, 0) as u32;
    let rk = match args.get(9).map(String::as_str) {
        Some("avx2") => RowKernels::for_level(SimdLevel::Avx2),
        Some("scalar") => RowKernels::SCALAR,
        _ => RowKernels::detect(),
    };
    let flush_mb = num(10, 0);
    let flush: Vec<u64> = (0..flush_mb << 17).map(|i| i as u64).collect();
    let n_ctx = depth + prompt;
    let row = n_head_kv * hd;
    let mut k = KvRegion::new(KvFormat::F16, row, n_ctx).unwrap();
    let mut v = KvRegion::new(KvFormat::F16, row, n_ctx).unwrap();
    let mut cells = KvCells::new(n_ctx);
    let mut plan = BatchPlan::default();
    let mut pos = 0i32;
    for (i, len) in [depth, prompt].into_iter().enumerate() {
        let batch: Vec<(u32, i32)> = (pos..pos + len as i32).map(|p| (0, p)).collect();
        pos += len as i32;
        if batch.is_empty() {
            continue;
        }
        cells.plan_batch(&batch, &mut plan).unwrap();
        kv_store(&mut k, &fill(len * row, 2 * i as u64), &plan.kv_cells).unwrap();
        kv_store(&mut v, &fill(len * row, 2 * i as u64 + 1), &plan.kv_cells).unwrap();
    }
    let query_pos: Vec<i32> = (depth as i32..pos).collect();
    let p = AttnParams::new(0, n_head, n_head_kv, hd).with_sliding_window(sliding);
    let q = fill(prompt * n_head * hd, 99);
    let pool = ThreadPool::new(threads);
    let group = n_head / n_head_kv;
    let mut scratch: Vec<AttnScratch> = tiles
        .iter()
        .map(|&t| {
            AttnScratch::new(threads, n_ctx, hd)
                .with_group(group)
                .with_tile(t)
                .with_row_kernels(rk)
        })
        .collect();
    let mut outs = vec![vec![0.0f32; q.len()]; tiles.len()];
    let mut times = vec![Vec::new(); tiles.len()];
    let mut cpu = vec![Vec::new(); tiles.len()];
    for _ in 0..rounds {
        for (i, (s, out)) in scratch.iter_mut().zip(&mut outs).enumerate() {
            let sum = flush.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            std::hint::black_box(sum);
            let (t0, c0) = (Instant::now(), cpu_ns());
            if sliding == 0 {
                let (o, c) = (&plan.window_offsets, &plan.window_cells);
                attention(&q, &k, &v, o, c, &p, &pool, s, out).unwrap();
            } else {
                let w = Windows {
                    offsets: &plan.window_offsets,
                    cells: &plan.window_cells,
                    query_pos: &query_pos,
                    cell_pos: &plan.window_positions,
                };
                attention_sliding(&q, &k, &v, &w, &p, &pool, s, out).unwrap();
            }
            times[i].push(t0.elapsed().as_secs_f64());
            cpu[i].push((cpu_ns() - c0) as f64 * 1e-9);
        }
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // The calling thread's CPU time is the whole cost with one thread.
    let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!("tile  median_ms  min_ms  vs_first  cpu0_ms  cpu0_min  min_vs_first  same_bits");
    for (i, t) in tiles.iter().enumerate() {
        let med = median(&times[i]);
        let min = times[i].iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{t:4}  {:9.2}  {:6.2}  {:8.2}  {:7.2}  {:8.2}  {:12.2}  {}",
            med * 1e3,
            min * 1e3,
            median(&times[0]) / med,
            median(&cpu[i]) * 1e3,
            least(&cpu[i]) * 1e3,
            least(&cpu[0]) / least(&cpu[i]),
            bits(&outs[i]) == bits(&outs[0])
        );
    }
}
