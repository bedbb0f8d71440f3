//! Attention sinks (gpt-oss): one logit per query head in the softmax's
//! denominator, against an f64 reference written from ggml's definition,
//! and the engine's invariant that a query's bits do not depend on the
//! threads, the tiles, the row-kernel path or the rest of its batch.

mod support;

use std::ops::Range;

use support::{assert_close, randn, TestCache};

use minfer_cpu::Windows;
use minfer_cpu::{attention, attention_sliding, attention_with_sinks, AttnScratch};
use minfer_graph::kv::KvRegion;
use minfer_graph::{AttnParams, GraphError, KvFormat};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::RowKernels;
use rand::rngs::StdRng;
use rand::SeedableRng;

const N_CTX: usize = 96;

/// Heads of one case: query heads, KV heads, values per head.
type Shape = (usize, usize, usize);

/// GQA of several group sizes, MHA and MQA; 48 straddles q8_0 blocks.
const SHAPES: [Shape; 4] = [(1, 1, 32), (4, 2, 48), (6, 2, 64), (8, 1, 32)];

/// A batch of `(sequence, position)` rows.
type Batch = Vec<(u32, i32)>;

/// The q, k and v rows of a token, a pure function of its sequence and
/// position.
fn token_rows(shape: Shape, seq: u32, pos: i32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (n_head, n_head_kv, hd) = shape;
    let mut rng = StdRng::seed_from_u64(u64::from(seq) * 1_000_003 + pos as u64);
    let q = randn(&mut rng, n_head * hd);
    let k = randn(&mut rng, n_head_kv * hd);
    let v = randn(&mut rng, n_head_kv * hd);
    (q, k, v)
}

/// The batches before the last: sequence 0 at depth, sequence 1 begun.
fn history() -> Vec<Batch> {
    vec![(0..40).map(|p| (0, p)).collect(), vec![(1, 0), (1, 1)]]
}

/// The last batch: a prefill chunk of sequence 0 mixed with decode rows of
/// sequence 1 and the first token of sequence 2 (a window of one cell).
fn mixed() -> Batch {
    let mut b: Batch = (40..52).map(|p| (0, p)).collect();
    b.insert(5, (1, 2));
    b.push((2, 0));
    b.extend((52..60).map(|p| (0, p)));
    b
}

/// A cache after the history, and the plan, queries and positions of the
/// last batch (its K/V stored too).
struct Case {
    shape: Shape,
    kv: TestCache,
    q: Vec<f32>,
    pos: Vec<i32>,
}

impl Case {
    fn new(shape: Shape, format: KvFormat, last: &Batch) -> Self {
        let row = shape.1 * shape.2;
        let mut kv = TestCache::new(format, row, N_CTX);
        let mut q = Vec::new();
        for batch in history().iter().chain([last]) {
            q = kv.store_rows(batch, |s, p| token_rows(shape, s, p));
        }
        let pos = last.iter().map(|&(_, p)| p).collect();
        Case { shape, kv, q, pos }
    }

    fn params(&self, window: u32) -> AttnParams {
        let (n_head, n_head_kv, hd) = self.shape;
        AttnParams::new(0, n_head, n_head_kv, hd).with_sliding_window(window)
    }

    /// The queries `tokens` of the last batch, with `window` (0: none) and
    /// `sinks` (none: the calls without sinks).
    fn run(
        &self,
        tokens: Range<usize>,
        (window, sinks): (u32, Option<&[f32]>),
        pool: &ThreadPool,
        scratch: &mut AttnScratch,
    ) -> Vec<f32> {
        let o = &self.kv.plan.window_offsets;
        let (a, b) = (o[tokens.start] as usize, o[tokens.end] as usize);
        let offsets: Vec<i32> = o[tokens.start..=tokens.end]
            .iter()
            .map(|&x| x - a as i32)
            .collect();
        let row = self.shape.0 * self.shape.2;
        let q = &self.q[tokens.start * row..tokens.end * row];
        let w = Windows {
            offsets: &offsets,
            cells: &self.kv.plan.window_cells[a..b],
            query_pos: &self.pos[tokens],
            cell_pos: &self.kv.plan.window_positions[a..b],
        };
        let p = self.params(window);
        let (k, v) = (&self.kv.k, &self.kv.v);
        let mut out = vec![f32::NAN; q.len()];
        let r = match (sinks, window) {
            (Some(s), _) => attention_with_sinks(q, k, v, &w, s, &p, pool, scratch, &mut out),
            (None, 0) => attention(q, k, v, w.offsets, w.cells, &p, pool, scratch, &mut out),
            (None, _) => attention_sliding(q, k, v, &w, &p, pool, scratch, &mut out),
        };
        r.unwrap();
        out
    }

    /// The whole last batch on `threads` threads with a full head group.
    fn batch(&self, window: u32, sinks: Option<&[f32]>, threads: usize) -> Vec<f32> {
        let (n_head, n_head_kv, hd) = self.shape;
        let mut scratch = AttnScratch::new(threads, N_CTX, hd).with_group(n_head / n_head_kv);
        let pool = ThreadPool::new(threads);
        self.run(0..self.pos.len(), (window, sinks), &pool, &mut scratch)
    }

    /// Every query alone, one per call, scalar, one thread, no tile.
    fn alone(&self, window: u32, sinks: Option<&[f32]>) -> Vec<u32> {
        let (n_head, n_head_kv, hd) = self.shape;
        let mut scratch = AttnScratch::new(1, N_CTX, hd)
            .with_group(n_head / n_head_kv)
            .with_row_kernels(RowKernels::SCALAR);
        let pool = ThreadPool::new(1);
        (0..self.pos.len())
            .flat_map(|t| self.run(t..t + 1, (window, sinks), &pool, &mut scratch))
            .map(f32::to_bits)
            .collect()
    }

    /// ggml's definition in f64 over the cache's decoded rows: per query
    /// head, `M = max(max_j s_j, sink)`, `p_j = exp(s_j - M) / (Σ exp(s_j -
    /// M) + exp(sink - M))`, `out = Σ p_j v_j`; an empty window gives 0.
    fn reference(&self, window: u32, sinks: &[f32]) -> Vec<f64> {
        let (n_head, n_head_kv, hd) = self.shape;
        let scale = f64::from(self.params(window).scale);
        let row = |r: &KvRegion, cell: i32| {
            let mut x = vec![0.0; n_head_kv * hd];
            r.read_row(cell as usize, &mut x).unwrap();
            x
        };
        let o = &self.kv.plan.window_offsets;
        let mut out = Vec::new();
        for (t, &qp) in self.pos.iter().enumerate() {
            let span = o[t] as usize..o[t + 1] as usize;
            let seen: Vec<(Vec<f32>, Vec<f32>)> = span
                .filter(|&j| window == 0 || qp - self.kv.plan.window_positions[j] < window as i32)
                .map(|j| self.kv.plan.window_cells[j])
                .map(|c| (row(&self.kv.k, c), row(&self.kv.v, c)))
                .collect();
            for (h, &sink) in sinks.iter().enumerate() {
                let q = &self.q[(t * n_head + h) * hd..][..hd];
                let at = h / (n_head / n_head_kv) * hd;
                let s: Vec<f64> = seen
                    .iter()
                    .map(|(k, _)| scale * dot(q, &k[at..at + hd]))
                    .collect();
                let sink = f64::from(sink);
                let m = s.iter().fold(sink, |m, &x| m.max(x));
                let denom: f64 = s.iter().map(|x| (x - m).exp()).sum::<f64>() + (sink - m).exp();
                let mut acc = vec![0.0f64; hd];
                for ((_, v), sj) in seen.iter().zip(&s) {
                    let pj = (sj - m).exp() / denom;
                    for (a, &x) in acc.iter_mut().zip(&v[at..at + hd]) {
                        *a += pj * f64::from(x);
                    }
                }
                out.extend(acc);
            }
        }
        out
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// Moderate sinks, one per head, of both signs and around the scores.
fn sinks(n_head: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    randn(&mut rng, n_head).iter().map(|x| 1.5 * x).collect()
}

#[test]
fn sinks_match_ggml_definition() {
    for shape in SHAPES {
        for format in [KvFormat::F32, KvFormat::F16] {
            let case = Case::new(shape, format, &mixed());
            // Windows of one cell (a sliding window of 1, a new sequence's
            // first token) and of up to 60 cells.
            for window in [0u32, 1, 5] {
                for threads in [1, 3] {
                    let s = sinks(shape.0, 11 + window as u64);
                    let got = case.batch(window, Some(&s), threads);
                    let want = case.reference(window, &s);
                    let what = format!("{shape:?} {format:?} window {window}");
                    assert_close(&got, &want, 2e-5, &what);
                }
            }
        }
    }
}

#[test]
fn a_sink_far_below_the_scores_changes_nothing() {
    for shape in SHAPES {
        for format in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
            let case = Case::new(shape, format, &mixed());
            for window in [0u32, 5] {
                let plain = case.batch(window, None, 2);
                for low in [-1e4f32, f32::NEG_INFINITY] {
                    let got = case.batch(window, Some(&vec![low; shape.0]), 2);
                    // exp(sink - M) is 0: the softmax without the sink, bit
                    // for bit.
                    let same = got
                        .iter()
                        .zip(&plain)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{shape:?} {format:?} window {window} sink {low}");
                }
            }
        }
    }
}

#[test]
fn a_sink_far_above_the_scores_silences_its_head_only() {
    for shape in SHAPES {
        let (n_head, _, hd) = shape;
        let case = Case::new(shape, KvFormat::F16, &mixed());
        let plain = case.batch(0, None, 2);
        // Scores stay below 4 * sqrt(hd) here; the odd heads' sinks are
        // far above them, the even heads' far below.
        let s: Vec<f32> = (0..n_head)
            .map(|h| if h % 2 == 1 { 200.0 } else { -200.0 })
            .collect();
        let got = case.batch(0, Some(&s), 2);
        assert_close(&got, &case.reference(0, &s), 2e-5, &format!("{shape:?}"));
        for (i, (&g, &p)) in got.iter().zip(&plain).enumerate() {
            if (i / hd) % n_head % 2 == 1 {
                assert!(g.abs() < 1e-30, "{shape:?} value {i}: {g}");
            } else {
                assert_eq!(g.to_bits(), p.to_bits(), "{shape:?} value {i}");
            }
        }
    }
}

#[test]
fn sinks_give_each_query_its_bits_alone() {
    for format in [KvFormat::F16, KvFormat::F32, KvFormat::Q8_0] {
        for shape in [(6, 2, 64), (8, 1, 32)] {
            let (n_head, n_head_kv, hd) = shape;
            let s = sinks(n_head, 5);
            // The same tokens as a prefill of sequence 0 alone and inside
            // the mixed batch.
            for last in [(40..60).map(|p| (0, p)).collect(), mixed()] {
                let case = Case::new(shape, format, &last);
                for window in [0u32, 3] {
                    let want = case.alone(window, Some(&s));
                    for rk in RowKernels::supported() {
                        for threads in [1, 2, 3] {
                            let pool = ThreadPool::new(threads);
                            for (group, tile) in [
                                (n_head / n_head_kv, 1),
                                (n_head / n_head_kv, 8),
                                (1, 4),
                                (3, 5),
                            ] {
                                let mut scratch = AttnScratch::new(threads, N_CTX, hd)
                                    .with_group(group)
                                    .with_tile(tile)
                                    .with_row_kernels(rk);
                                let got = case.run(
                                    0..last.len(),
                                    (window, Some(&s)),
                                    &pool,
                                    &mut scratch,
                                );
                                let bad =
                                    got.iter().zip(&want).position(|(a, b)| a.to_bits() != *b);
                                assert!(
                                    bad.is_none(),
                                    "{format:?} {shape:?} window {window} {rk:?} {threads} threads \
                                     group {group} tile {tile}: value {bad:?} differs from alone"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_token_alone_and_in_a_batch_agree() {
    // Sequence 0's token at position 45, decoded alone after its prefill,
    // and the same token inside the mixed batch: its row is the same bits.
    let shape = (4, 2, 48);
    let s = sinks(4, 9);
    let batch = mixed();
    let in_batch = Case::new(shape, KvFormat::F16, &batch);
    let t = batch.iter().position(|&x| x == (0, 45)).unwrap();
    let row = 4 * 48;
    for window in [0u32, 5] {
        let all = in_batch.batch(window, Some(&s), 3);
        let mut decode: Batch = (40..45).map(|p| (0, p)).collect();
        decode.push((0, 45));
        let case = Case::new(shape, KvFormat::F16, &decode);
        let mut scratch = AttnScratch::new(1, N_CTX, 48).with_group(2);
        let pool = ThreadPool::new(1);
        let alone = case.run(5..6, (window, Some(&s)), &pool, &mut scratch);
        let a: Vec<u32> = alone.iter().map(|x| x.to_bits()).collect();
        let b: Vec<u32> = all[t * row..(t + 1) * row]
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(a, b, "window {window}");
    }
}

#[test]
fn an_empty_window_with_a_sink_gives_zeros() {
    let shape = (4, 2, 48);
    let case = Case::new(shape, KvFormat::F32, &mixed());
    let row = 4 * 48;
    let q = &case.q[..2 * row];
    // Token 0 sees no cell, token 1 two.
    let w = Windows {
        offsets: &[0, 0, 2],
        cells: &case.kv.plan.window_cells[..2],
        query_pos: &[],
        cell_pos: &[],
    };
    let pool = ThreadPool::new(2);
    let mut scratch = AttnScratch::new(2, N_CTX, 48).with_group(2);
    let mut out = vec![f32::NAN; 2 * row];
    let p = case.params(0);
    let s = [3.0, -3.0, 0.0, 50.0];
    attention_with_sinks(
        q,
        &case.kv.k,
        &case.kv.v,
        &w,
        &s,
        &p,
        &pool,
        &mut scratch,
        &mut out,
    )
    .unwrap();
    assert!(out[..row].iter().all(|&x| x == 0.0));
    assert!(out[row..].iter().all(|x| x.is_finite()));
    assert!(out[row..].iter().any(|&x| x != 0.0));
}

#[test]
fn sinks_must_be_one_per_query_head() {
    let case = Case::new((4, 2, 48), KvFormat::F32, &mixed());
    let n = case.pos.len();
    let w = Windows {
        offsets: &case.kv.plan.window_offsets,
        cells: &case.kv.plan.window_cells,
        query_pos: &case.pos,
        cell_pos: &case.kv.plan.window_positions,
    };
    let pool = ThreadPool::new(1);
    let mut scratch = AttnScratch::new(1, N_CTX, 48);
    let mut out = vec![0.0; n * 4 * 48];
    let p = case.params(0);
    for bad in [&[0.0f32; 3][..], &[0.0; 5]] {
        let r = attention_with_sinks(
            &case.q,
            &case.kv.k,
            &case.kv.v,
            &w,
            bad,
            &p,
            &pool,
            &mut scratch,
            &mut out,
        );
        assert!(matches!(r, Err(GraphError::BadInput { .. })), "{r:?}");
    }
}
