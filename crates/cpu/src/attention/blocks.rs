//! The loops of a chain of query tokens over blocks of keys.
//!
//! A chain's windows are ranges of one list of cells (its base). The base
//! is walked in blocks of keys, once to score and once, after each query's
//! softmax, to sum V; within a block, every token takes the part inside
//! its own window. A block is small enough to stay in L1 while every query
//! of the chain reads it.
//!
//! For a lone token and on AVX2, K and V rows are read in place, by the
//! multi-head loops that load and widen a row once for several heads. On
//! AVX-512, two tokens or more first widen each K block to f32 column by
//! column, once for all of them, which lets every query score sixteen rows
//! a register with no transpose of partial sums (and one column load serve
//! several heads), and widen each f16 V block to f32 rows, once for all of
//! them. Q8_0 rows are decoded a block at a time, once for every token and
//! head of the chain (see `super::source`). Either way a score is the dot
//! kernel's bits for that row and each output element is summed over the
//! keys in window order, so the results do not depend on the path.

use std::ops::Range;

use minfer_kernels::{HeadRows, Rows};

use super::head::{Head, Tile};
use super::scratch::{ThreadBuf, BLOCK_VALUES, MAX_TILE};
use super::sink::softmax;
use super::source::{Source, LOCAL, MAX_DECODED};

/// Keys per block when a chain of tokens reads the rows in place (on
/// AVX2, and the V rows of an f32 cache): 64 rows of one KV head (8 KiB of
/// f16 at a head of 64) stay in L1 while every token and head of the chain
/// reads them.
const KEY_BLOCK: usize = 64;

/// Keys per block of a lone token (decode) reading its rows in place:
/// nothing shares its reads, so a longer block only lets the row loops ask
/// for the rows ahead across fewer block edges (they do so in calls over
/// 128 rows or more), which decode deep in a context, reading its cache
/// from DRAM, waits on.
const LONE_BLOCK: usize = 512;

// A widened or decoded block is counted by `LOCAL`.
const _: () = assert!(KEY_BLOCK <= MAX_DECODED);

/// Keys per widened or decoded block for heads of `hd` values:
/// [`BLOCK_VALUES`] in all, between 16 and [`KEY_BLOCK`] keys.
fn block_keys(hd: usize) -> usize {
    (BLOCK_VALUES / hd.max(1)).clamp(16, KEY_BLOCK)
}

/// The blocks of up to `len` keys over the union of the windows.
fn blocks(ranges: &[Range<usize>], len: usize) -> impl Iterator<Item = Range<usize>> {
    let lo = ranges.iter().map(|r| r.start).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.end).max().unwrap_or(0);
    (lo..hi).step_by(len).map(move |b0| b0..(b0 + len).min(hi))
}

/// The part of window `r` inside `block`.
fn part(r: &Range<usize>, block: &Range<usize>) -> Range<usize> {
    block.start.max(r.start)..block.end.min(r.end)
}

/// The keys of `block` inside some window: what a block's rows hold.
fn span(ranges: &[Range<usize>], block: &Range<usize>) -> Range<usize> {
    let parts = ranges
        .iter()
        .map(|r| part(r, block))
        .filter(|p| !p.is_empty());
    let lo = parts.clone().map(|p| p.start).min().unwrap_or(block.start);
    let hi = parts.map(|p| p.end).max().unwrap_or(block.start);
    lo..hi
}

/// Keys `keys` (indices into the base) of the rows of a span that starts
/// at `from`.
fn sub<'a, T>(rows: &Rows<'a, T>, keys: &Range<usize>, from: usize) -> Rows<'a, T> {
    Rows {
        idx: &rows.idx[keys.start - from..keys.end - from],
        ..*rows
    }
}

/// A chain's shared state between its loops.
struct Chain<'a, 't> {
    tile: &'a mut Tile<'t>,
    head: Head<'a>,
    /// Token `i`'s scores: a row per head, as long as its window, from
    /// `at[i]`.
    at: [usize; MAX_TILE + 1],
}

impl Chain<'_, '_> {
    fn ranges(&self) -> &[Range<usize>] {
        &self.tile.ranges[..self.tile.len]
    }

    /// Scores of block `block`, each token's part read by the row loops
    /// (`buf` holds the rows if they are decoded).
    fn score_rows<S: Source>(
        &self,
        block: &Range<usize>,
        k: &S,
        scores: &mut [f32],
        buf: &mut [f32],
    ) -> bool {
        let Head { hd, scale, rk, .. } = self.head;
        let span = span(self.ranges(), block);
        if span.is_empty() {
            return true;
        }
        let Some(rows) = k.rows(&self.tile.base[span.clone()], &self.head, buf) else {
            return false;
        };
        self.ranges().iter().enumerate().all(|(i, r)| {
            let keys = part(r, block);
            if keys.is_empty() {
                return true;
            }
            let rows = sub(&rows, &keys, span.start);
            let s = &mut scores[self.at[i] + keys.start - r.start..self.at[i + 1]];
            S::Elem::dot_heads(rk, self.tile.qs[i], hd, rows, scale, s, r.len()).is_ok()
        })
    }

    /// Scores of block `block` widened column by column into `cols` (`buf`
    /// holds the rows if they are decoded).
    fn score_cols<S: Source>(
        &self,
        block: &Range<usize>,
        k: &S,
        scores: &mut [f32],
        (cols, buf): (&mut [f32], &mut [f32]),
    ) -> bool {
        let Head { hd, scale, rk, .. } = self.head;
        let span = span(self.ranges(), block);
        let ld = span.len();
        if ld == 0 {
            return true;
        }
        let Some(rows) = k.rows(&self.tile.base[span.clone()], &self.head, buf) else {
            return false;
        };
        if S::Elem::cols(rk, rows, hd, cols, ld).is_err() {
            return false;
        }
        self.ranges().iter().enumerate().all(|(i, r)| {
            let keys = part(r, block);
            if keys.is_empty() {
                return true;
            }
            let local = keys.start - span.start..keys.end - span.start;
            let s = &mut scores[self.at[i] + keys.start - r.start..self.at[i + 1]];
            let qs = self.tile.qs[i];
            rk.dot_cols_heads(qs, hd, cols, ld, local, scale, s, r.len())
                .is_ok()
        })
    }

    /// The V sums of block `block` (at most [`KEY_BLOCK`] keys) from its
    /// rows widened to f32 in `wide`, once for every token of the chain
    /// (`buf` holds the rows if they are decoded).
    fn sum_widened<S: Source>(
        &mut self,
        block: &Range<usize>,
        v: &S,
        weights: &[f32],
        (wide, buf): (&mut [f32], &mut [f32]),
    ) -> bool {
        let Head { hd, rk, .. } = self.head;
        let span = span(self.ranges(), block);
        let n = span.len();
        if n == 0 {
            return true;
        }
        let base = self.tile.base;
        let Some(rows) = v.rows(&base[span.clone()], &self.head, buf) else {
            return false;
        };
        if n > KEY_BLOCK || S::Elem::widen_rows(rk, rows, hd, wide).is_err() {
            return false;
        }
        let wide = &wide[..n * hd];
        self.each_part(block, weights, |keys, w, stride, out| {
            let rows = Rows {
                data: wide,
                stride: hd,
                offset: 0,
                idx: &LOCAL[keys.start - span.start..keys.end - span.start],
            };
            f32::axpy_heads(rk, w, stride, rows, out, hd).is_ok()
        })
    }

    /// The V sums of block `block`, each token's part read by the row
    /// loops (`buf` holds the rows if they are decoded).
    fn sum_rows<S: Source>(
        &mut self,
        block: &Range<usize>,
        v: &S,
        weights: &[f32],
        buf: &mut [f32],
    ) -> bool {
        let Head { hd, rk, .. } = self.head;
        let span = span(self.ranges(), block);
        if span.is_empty() {
            return true;
        }
        let base = self.tile.base;
        let Some(rows) = v.rows(&base[span.clone()], &self.head, buf) else {
            return false;
        };
        self.each_part(block, weights, |keys, w, stride, out| {
            let rows = sub(&rows, &keys, span.start);
            S::Elem::axpy_heads(rk, w, stride, rows, out, hd).is_ok()
        })
    }

    /// `sum(keys, w, stride, out)` for every token with keys in `block`:
    /// the keys (indices into the base), the token's weights from the
    /// first of them (`stride` apart from head to head) and its output;
    /// `false` as soon as one call returns it.
    fn each_part(
        &mut self,
        block: &Range<usize>,
        weights: &[f32],
        mut sum: impl FnMut(Range<usize>, &[f32], usize, &mut [f32]) -> bool,
    ) -> bool {
        let tile = &mut *self.tile;
        let ranges = &tile.ranges[..tile.len];
        ranges
            .iter()
            .zip(tile.outs.iter_mut())
            .enumerate()
            .all(|(i, (r, out))| {
                let keys = part(r, block);
                if keys.is_empty() {
                    return true;
                }
                let w = &weights[self.at[i] + keys.start - r.start..self.at[i + 1]];
                sum(keys, w, r.len(), out)
            })
    }
}

/// Every query of `tile` over its window, with the result of a head
/// attending alone for each query head: the keys are scored block by
/// block, each token's heads into their own rows of the scores, then each
/// row gets its softmax, then the V rows are summed block by block in the
/// same way. Returns `false` if a cell could not be read, which validation
/// rules out.
pub(super) fn attend_tile<K: Source, V: Source>(
    tile: &mut Tile,
    head: Head,
    (k, v): (&K, &V),
    buf: &mut ThreadBuf,
) -> bool {
    let hd = head.hd;
    let mut at = [0usize; MAX_TILE + 1];
    for (i, r) in tile.ranges[..tile.len].iter().enumerate() {
        at[i + 1] = at[i] + tile.qs[i].len() / hd * r.len();
    }
    // Widening pays once two queries read each block, and only where the
    // column loop is faster than the row loops (AVX-512).
    let widen = tile.len >= 2 && head.rk.is_wide();
    let in_place = if tile.len == 1 { LONE_BLOCK } else { KEY_BLOCK };
    // A widened or decoded block is what the block buffers hold.
    let held = block_keys(hd);
    let wide_v = widen && V::Elem::NARROW;
    let k_len = if widen || K::DECODED { held } else { in_place };
    let v_len = if wide_v || V::DECODED { held } else { in_place };
    let mut chain = Chain { tile, head, at };
    let ThreadBuf {
        scores,
        block,
        rows,
        ..
    } = buf;
    for b in blocks(chain.ranges(), k_len) {
        let ok = if widen {
            chain.score_cols(&b, k, scores, (block, rows))
        } else {
            chain.score_rows(&b, k, scores, rows)
        };
        if !ok {
            return false;
        }
    }
    for (i, r) in chain.ranges().iter().enumerate() {
        if !r.is_empty() {
            for (j, s) in scores[at[i]..at[i + 1]]
                .chunks_exact_mut(r.len())
                .enumerate()
            {
                softmax(head.rk, s, head.sink(j));
            }
        }
    }
    // A token with an empty window gets zeros, as a head alone does.
    for o in &mut chain.tile.outs[..chain.tile.len] {
        o.fill(0.0);
    }
    let ranges: [Range<usize>; MAX_TILE] = chain.tile.ranges.clone();
    let ranges = &ranges[..chain.tile.len];
    // f16 V rows widened once serve every token of the chain (the sums
    // read f32 as they would read halves, so the bits are the same).
    if wide_v {
        blocks(ranges, v_len).all(|b| chain.sum_widened(&b, v, scores, (block, rows)))
    } else {
        blocks(ranges, v_len).all(|b| chain.sum_rows(&b, v, scores, rows))
    }
}
