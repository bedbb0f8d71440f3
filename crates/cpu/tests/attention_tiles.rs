//! Tiles of query tokens: whatever tile the scratch allows, however the
//! batch mixes sequences (a prefill chunk, decode rows, a fork that shares
//! a prefix, windows that are and are not prefixes of each other), with
//! or without a sliding window, on any thread count and row-kernel path,
//! every query gets the bits it gets attended alone, one query per call,
//! on the scalar path.

mod support;

use support::{randn, TestCache};

use minfer_cpu::{attention, attention_sliding, AttnScratch, Windows};
use minfer_graph::{AttnParams, KvFormat};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::RowKernels;
use rand::rngs::StdRng;
use rand::SeedableRng;

const N_HEAD: usize = 14;
const N_HEAD_KV: usize = 2;
const HEAD_DIM: usize = 64;
const N_CTX: usize = 320;

fn params(sliding_window: u32) -> AttnParams {
    AttnParams::new(0, N_HEAD, N_HEAD_KV, HEAD_DIM).with_sliding_window(sliding_window)
}

/// The q, k and v rows of a token, a pure function of its sequence and
/// position.
fn token_rows(seq: u32, pos: i32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(u64::from(seq) * 1_000_003 + pos as u64);
    let q = randn(&mut rng, N_HEAD * HEAD_DIM);
    let k = randn(&mut rng, N_HEAD_KV * HEAD_DIM);
    let v = randn(&mut rng, N_HEAD_KV * HEAD_DIM);
    (q, k, v)
}

/// A cache after `history` batches, and the plan, queries and positions of
/// the batch `last` (its K/V stored too).
struct Case {
    kv: TestCache,
    q: Vec<f32>,
    pos: Vec<i32>,
}

impl Case {
    fn new(format: KvFormat, history: &[Batch], fork: bool, last: &[(u32, i32)]) -> Self {
        let row = N_HEAD_KV * HEAD_DIM;
        let mut kv = TestCache::new(format, row, N_CTX);
        let mut q = Vec::new();
        for (i, batch) in history.iter().chain([&last.to_vec()]).enumerate() {
            if i == history.len() && fork {
                // Sequence 2 shares the first 150 positions of sequence 0.
                kv.cells.share(0, 2, 150).unwrap();
            }
            // A fork's shared positions hold sequence 0's rows.
            q = kv.store_rows(batch, token_rows);
        }
        let pos = last.iter().map(|&(_, p)| p).collect();
        Case { kv, q, pos }
    }

    /// Attention of the queries `tokens` of the last batch (their windows
    /// from its plan) with `window` (0: none).
    fn run(
        &self,
        tokens: std::ops::Range<usize>,
        window: u32,
        threads: usize,
        scratch: &mut AttnScratch,
    ) -> Vec<f32> {
        let o = &self.kv.plan.window_offsets;
        let (a, b) = (o[tokens.start] as usize, o[tokens.end] as usize);
        let offsets: Vec<i32> = o[tokens.clone()]
            .iter()
            .chain([&o[tokens.end]])
            .map(|&x| x - a as i32)
            .collect();
        let cells = &self.kv.plan.window_cells[a..b];
        let cell_pos = &self.kv.plan.window_positions[a..b];
        let row = N_HEAD * HEAD_DIM;
        let q = &self.q[tokens.start * row..tokens.end * row];
        let pool = ThreadPool::new(threads);
        let mut out = vec![f32::NAN; q.len()];
        if window == 0 {
            let p = params(0);
            attention(
                q, &self.kv.k, &self.kv.v, &offsets, cells, &p, &pool, scratch, &mut out,
            )
            .unwrap();
        } else {
            let w = Windows {
                offsets: &offsets,
                cells,
                query_pos: &self.pos[tokens],
                cell_pos,
            };
            let p = params(window);
            attention_sliding(q, &self.kv.k, &self.kv.v, &w, &p, &pool, scratch, &mut out).unwrap();
        }
        out
    }

    /// Every query of the last batch alone, one per call, scalar, one
    /// thread, no tile.
    fn alone(&self, window: u32) -> Vec<u32> {
        let mut scratch = AttnScratch::new(1, N_CTX, HEAD_DIM)
            .with_group(N_HEAD / N_HEAD_KV)
            .with_row_kernels(RowKernels::SCALAR);
        (0..self.pos.len())
            .flat_map(|t| self.run(t..t + 1, window, 1, &mut scratch))
            .map(f32::to_bits)
            .collect()
    }
}

/// A batch of `(sequence, position)` rows.
type Batch = Vec<(u32, i32)>;

/// The batches of the cases (name, the batches before, whether sequence 2
/// forks sequence 0 before the last, the last): a prompt at depth alone,
/// and the same prompt chunk mixed with decode rows of another sequence
/// and with a fork.
fn cases() -> Vec<(&'static str, Vec<Batch>, bool, Batch)> {
    let seq = |s: u32, r: std::ops::Range<i32>| r.map(move |p| (s, p));
    let depth = vec![seq(0, 0..150).collect(), seq(1, 0..40).collect()];
    let alone: Vec<_> = seq(0, 150..187).collect();
    let mixed: Vec<_> = seq(0, 150..161)
        .chain(seq(1, 40..41))
        .chain(seq(0, 161..170))
        .chain(seq(2, 150..154))
        .chain(seq(0, 170..187))
        .chain(seq(1, 41..43))
        .collect();
    vec![
        ("prefill alone", depth.clone(), false, alone),
        ("mixed batch", depth, true, mixed),
    ]
}

#[test]
fn every_tile_gives_each_query_its_bits_alone() {
    for (name, history, fork, last) in cases() {
        for format in [KvFormat::F16, KvFormat::F32, KvFormat::Q8_0] {
            let case = Case::new(format, &history, fork, &last);
            for window in [0u32, 3, 20, 100] {
                let want = case.alone(window);
                for rk in RowKernels::supported() {
                    for threads in [1, 2, 3] {
                        for tile in [1, 2, 4, 5, 8, 16] {
                            let mut scratch = AttnScratch::new(threads, N_CTX, HEAD_DIM)
                                .with_group(N_HEAD / N_HEAD_KV)
                                .with_tile(tile)
                                .with_row_kernels(rk);
                            let got = case.run(0..last.len(), window, threads, &mut scratch);
                            let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                            let bad = got.iter().zip(&want).position(|(a, b)| a != b);
                            assert!(
                                bad.is_none(),
                                "{name}, {format:?}, window {window}, {rk:?}, {threads} threads, \
                                 tile {tile}: value {bad:?} differs from the query alone"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A scratch whose group holds fewer heads than the model's still gives
/// the same bits with tiles (the heads are split into several items).
#[test]
fn tiles_with_split_head_groups_give_the_same_bits() {
    let (name, history, fork, last) = cases().swap_remove(1);
    let case = Case::new(KvFormat::F16, &history, fork, &last);
    let want = case.alone(0);
    for (group, tile) in [(1, 8), (3, 4), (7, 16)] {
        let mut scratch = AttnScratch::new(2, N_CTX, HEAD_DIM)
            .with_group(group)
            .with_tile(tile);
        let got = case.run(0..last.len(), 0, 2, &mut scratch);
        let bad = got.iter().zip(&want).position(|(a, b)| a.to_bits() != *b);
        assert!(
            bad.is_none(),
            "{name}, group {group}, tile {tile}: value {bad:?}"
        );
    }
}

#[test]
fn tile_sizes_follow_the_batch_and_the_memory() {
    assert_eq!(AttnScratch::tile_for(4096, 7, 1), 1);
    assert_eq!(AttnScratch::tile_for(4096, 7, 3), 3);
    assert_eq!(AttnScratch::tile_for(4096, 7, 512), 8);
    // 16 MiB of scores per thread at most.
    let big = AttnScratch::tile_for(131_072, 8, 512);
    assert!(big * 131_072 * 8 * 4 <= 16 << 20, "{big}");
    assert_eq!(AttnScratch::tile_for(1 << 30, 64, 512), 1);
}
