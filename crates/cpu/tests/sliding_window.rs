//! Sliding-window attention against a reference that masks explicitly:
//! each query's window is cut by hand to the cells at positions above
//! `pos - window`, and plain attention runs over the cut windows. The two
//! must agree to the bit, at any thread count, and cells outside the
//! sliding windows must never be read.

mod support;

use support::{randn, TestCache};

use minfer_cpu::{attention, attention_sliding, kv_store, AttnScratch, Windows};
use minfer_graph::kv::{BatchPlan, KvRegion};
use minfer_graph::{AttnParams, GraphError, KvFormat};
use minfer_kernels::pool::ThreadPool;
use rand::rngs::StdRng;
use rand::SeedableRng;

const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const HEAD_DIM: usize = 16;
const N_CTX: usize = 96;

fn params(sliding_window: u32) -> AttnParams {
    AttnParams::new(0, N_HEAD, N_HEAD_KV, HEAD_DIM).with_sliding_window(sliding_window)
}

/// Two sequences in one cache: 40 prompt tokens of sequence 0 and 12 of
/// sequence 1 stored in earlier batches, then a batch that mixes a
/// three-token chunk of sequence 0 with one decode row of sequence 1.
/// Returns the regions, the last batch's plan and its query positions.
fn setup(format: KvFormat) -> (KvRegion, KvRegion, BatchPlan, Vec<i32>) {
    let row = N_HEAD_KV * HEAD_DIM;
    let mut c = TestCache::new(format, row, N_CTX);
    let mut rng = StdRng::seed_from_u64(7);
    let batches: [Vec<(u32, i32)>; 3] = [
        (0..40).map(|p| (0, p)).collect(),
        (0..12).map(|p| (1, p)).collect(),
        vec![(0, 40), (1, 12), (0, 41), (0, 42)],
    ];
    for batch in &batches {
        let k = randn(&mut rng, batch.len() * row);
        c.store(batch, &k, &randn(&mut rng, batch.len() * row));
    }
    let query_pos = batches[2].iter().map(|&(_, p)| p).collect();
    (c.k, c.v, c.plan, query_pos)
}

/// The windows of `plan` cut by hand: cells at positions `> pos - window`.
fn masked(plan: &BatchPlan, query_pos: &[i32], window: i32) -> (Vec<i32>, Vec<i32>) {
    let (mut offsets, mut cells) = (vec![0], Vec::new());
    for (t, &qp) in query_pos.iter().enumerate() {
        let (a, b) = (
            plan.window_offsets[t] as usize,
            plan.window_offsets[t + 1] as usize,
        );
        for i in a..b {
            if qp - plan.window_positions[i] < window {
                cells.push(plan.window_cells[i]);
            }
        }
        offsets.push(cells.len() as i32);
    }
    (offsets, cells)
}

fn run_sliding(
    k: &KvRegion,
    v: &KvRegion,
    plan: &BatchPlan,
    query_pos: &[i32],
    q: &[f32],
    window: u32,
    threads: usize,
) -> Vec<f32> {
    let pool = ThreadPool::new(threads);
    let mut scratch = AttnScratch::new(threads, N_CTX, HEAD_DIM);
    let mut out = vec![f32::NAN; q.len()];
    let w = Windows {
        offsets: &plan.window_offsets,
        cells: &plan.window_cells,
        query_pos,
        cell_pos: &plan.window_positions,
    };
    attention_sliding(q, k, v, &w, &params(window), &pool, &mut scratch, &mut out).unwrap();
    out
}

#[test]
fn sliding_window_equals_explicit_masking() {
    for format in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
        let (k, v, plan, query_pos) = setup(format);
        let q = randn(
            &mut StdRng::seed_from_u64(3),
            query_pos.len() * N_HEAD * HEAD_DIM,
        );
        for window in [1u32, 2, 5, 13, 41, 1000] {
            let (offsets, cells) = masked(&plan, &query_pos, window as i32);
            let pool = ThreadPool::new(1);
            let mut scratch = AttnScratch::new(1, N_CTX, HEAD_DIM);
            let mut want = vec![f32::NAN; q.len()];
            attention(
                &q,
                &k,
                &v,
                &offsets,
                &cells,
                &params(0),
                &pool,
                &mut scratch,
                &mut want,
            )
            .unwrap();
            for threads in [1, 2, 3] {
                let got = run_sliding(&k, &v, &plan, &query_pos, &q, window, threads);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{format:?}, window {window}, {threads} threads: differs from explicit masking"
                );
            }
        }
    }
}

#[test]
fn cells_outside_the_sliding_window_are_never_read() {
    let (mut k, mut v, plan, query_pos) = setup(KvFormat::F32);
    let q = randn(
        &mut StdRng::seed_from_u64(5),
        query_pos.len() * N_HEAD * HEAD_DIM,
    );
    let window = 4;
    let before = run_sliding(&k, &v, &plan, &query_pos, &q, window, 2);
    // Overwrite every cell no sliding window names with NaN.
    let (_, inside) = masked(&plan, &query_pos, window as i32);
    let nan = vec![f32::NAN; N_HEAD_KV * HEAD_DIM];
    for cell in 0..N_CTX as i32 {
        if !inside.contains(&cell) {
            kv_store(&mut k, &nan, &[cell]).unwrap();
            kv_store(&mut v, &nan, &[cell]).unwrap();
        }
    }
    let after = run_sliding(&k, &v, &plan, &query_pos, &q, window, 2);
    assert!(before
        .iter()
        .zip(&after)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn window_positions_must_be_ordered_and_complete() {
    let (k, v, plan, query_pos) = setup(KvFormat::F32);
    let q = vec![0.5f32; query_pos.len() * N_HEAD * HEAD_DIM];
    let pool = ThreadPool::new(1);
    let mut scratch = AttnScratch::new(1, N_CTX, HEAD_DIM);
    let mut out = vec![0.0; q.len()];
    let mut shuffled = plan.window_positions.clone();
    shuffled.swap(0, 1);
    let short = &plan.window_positions[1..];
    for (qp, cp) in [
        (&query_pos[..], &shuffled[..]),
        (&query_pos[..], short),
        (&query_pos[1..], &plan.window_positions[..]),
    ] {
        let w = Windows {
            offsets: &plan.window_offsets,
            cells: &plan.window_cells,
            query_pos: qp,
            cell_pos: cp,
        };
        let r = attention_sliding(&q, &k, &v, &w, &params(3), &pool, &mut scratch, &mut out);
        assert!(matches!(r, Err(GraphError::BadInput { .. })), "{r:?}");
    }
}
