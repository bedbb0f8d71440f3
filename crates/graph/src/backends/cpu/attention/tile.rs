//! The loops of one work item: a tile of query tokens, each with the query
//! heads of the item, over the cells of their windows.
//!
//! Consecutive tokens of one sequence in a prefill see windows that are
//! each a prefix of the next (the same cells in the same order, one more
//! at the end), and a sliding window cuts each to a suffix of itself. So
//! the tokens of a tile are taken in chains: tokens whose windows are all
//! ranges of one list of cells, the base (the last token's whole window).
//! A chain walks the base in blocks of [`KEY_BLOCK`] keys, and every token
//! scores (and later sums) the part of a block inside its own window
//! before the next block is read: each K and V row comes from memory once
//! for the chain instead of once per token, and is in L1 for every token
//! after the first. Per query, the score of a key (the same kernel on the
//! same row), its softmax (over its own window) and the order of the sums
//! over keys are exactly those of a token attending alone.

use std::ops::Range;

use minfer_kernels::pool::SharedMut;
use minfer_kernels::rows::dot_f32;
use minfer_kernels::{HeadRows, RowKernels, Rows};

use super::scratch::{ThreadBuf, MAX_TILE};
use super::Sliding;
use crate::kv::{KvData, KvRegion};

/// Keys per block of [`attend_tile`]: 64 rows of one KV head (8 KiB of
/// f16 at a head of 64) stay in L1 while every query of the tile reads
/// them.
const KEY_BLOCK: usize = 64;

/// The rows of `window` in a region's storage `data`, from value `start`
/// of each row (one kv head).
fn head_rows<'a, T>(
    data: &'a [T],
    region: &KvRegion,
    start: usize,
    window: &'a [i32],
) -> Rows<'a, T> {
    Rows {
        data,
        stride: region.row_elems(),
        offset: start,
        idx: window,
    }
}

/// What every query of a work item shares.
#[derive(Clone, Copy)]
pub(super) struct Head {
    /// Values per head.
    pub(super) hd: usize,
    /// Where the KV head starts inside each cache row.
    pub(super) start: usize,
    pub(super) scale: f32,
    pub(super) rk: RowKernels,
}

/// The queries of one attention call, as the work items read them.
pub(super) struct Queries<'a> {
    /// One row of `n_head * hd` values per token.
    pub(super) q: &'a [f32],
    /// The output, laid out as `q`; each item writes its own heads.
    pub(super) out: SharedMut<f32>,
    pub(super) n_head: usize,
    /// `n_tokens + 1` validated offsets into `cells`.
    pub(super) offsets: &'a [i32],
    pub(super) cells: &'a [i32],
    pub(super) sliding: Option<Sliding<'a>>,
}

/// Tokens whose windows are ranges of one list of cells.
struct Tile<'a> {
    /// The last token's whole window.
    base: &'a [i32],
    len: usize,
    /// Each token's query heads (`hd` values each, one after another),
    /// window (a range of `base`) and output heads.
    qs: [&'a [f32]; MAX_TILE],
    ranges: [Range<usize>; MAX_TILE],
    outs: [&'a mut [f32]; MAX_TILE],
}

impl Queries<'_> {
    /// Token `t`'s whole window (a range of `cells`), and where the part it
    /// reads starts (later than the window with a sliding window).
    fn window(&self, t: usize) -> (Range<usize>, usize) {
        // Validated: offsets are non-negative, ordered and within `cells`.
        let (from, to) = (self.offsets[t] as usize, self.offsets[t + 1] as usize);
        let used = self.sliding.map_or(from, |s| s.start(t, from, to));
        (from..to, used)
    }

    /// The item of `tokens` and query `heads`: the tokens in chains, from
    /// the last back, each chain as long as the windows allow. Returns
    /// `false` if a cell could not be read, which validation rules out.
    ///
    /// # Safety
    /// The item owns the outputs of `heads` for every token of `tokens`:
    /// no other thread reads or writes them during the call.
    pub(super) unsafe fn attend_item(
        &self,
        tokens: Range<usize>,
        heads: Range<usize>,
        head: Head,
        (k, v): (&KvRegion, &KvRegion),
        buf: &mut ThreadBuf,
    ) -> bool {
        let hd = head.hd;
        let n = heads.len() * hd;
        let mut end = tokens.end;
        while end > tokens.start {
            let (whole, _) = self.window(end - 1);
            let mut tile = Tile {
                base: &self.cells[whole.clone()],
                len: 0,
                qs: [&[]; MAX_TILE],
                ranges: Default::default(),
                outs: Default::default(),
            };
            while end > tokens.start && tile.len < MAX_TILE {
                let t = end - 1;
                let (w, used) = self.window(t);
                let range = used - w.start..w.end - w.start;
                // A token joins when the cells it reads are those at the
                // same places of the base: then reading the base there is
                // reading its own window.
                if tile.base.get(range.clone()) != Some(&self.cells[used..w.end]) {
                    break;
                }
                let first = (t * self.n_head + heads.start) * hd;
                tile.qs[tile.len] = &self.q[first..first + n];
                tile.ranges[tile.len] = range;
                // SAFETY: these heads of token `t` lie inside `out` (laid out
                // as `q`, checked by validation) and belong to this item
                // alone (the caller's contract); each token of the item is
                // taken once.
                tile.outs[tile.len] =
                    unsafe { std::slice::from_raw_parts_mut(self.out.get().add(first), n) };
                tile.len += 1;
                end -= 1;
            }
            if !attend_tile_on(&mut tile, head, k, v, buf) {
                return false;
            }
        }
        true
    }
}

/// [`attend_tile`] on whatever storage the regions have; Q8_0 regions
/// (decoded row by row) go query head by query head through
/// [`attend_head`].
fn attend_tile_on(
    tile: &mut Tile,
    head: Head,
    k: &KvRegion,
    v: &KvRegion,
    buf: &mut ThreadBuf,
) -> bool {
    let scores = &mut buf.scores;
    match (k.data(), v.data()) {
        (KvData::F16(kd), KvData::F16(vd)) => attend_tile(tile, head, (kd, vd), (k, v), scores),
        (KvData::F32(kd), KvData::F32(vd)) => attend_tile(tile, head, (kd, vd), (k, v), scores),
        _ => (0..tile.len).all(|i| {
            let window = &tile.base[tile.ranges[i].clone()];
            let hd = head.hd;
            tile.qs[i]
                .chunks_exact(hd)
                .zip(tile.outs[i].chunks_exact_mut(hd))
                .all(|(q, o)| attend_head(q, (k, v), window, head, buf, o))
        }),
    }
}

/// Calls `f(i, keys)` for every token `i` of the tile and every block of
/// its window, `keys` the range of the base that the block's part inside
/// the window covers: block by block over the union of the windows, and
/// within a block token by token. Stops at the first `false`.
fn for_blocks(ranges: &[Range<usize>], mut f: impl FnMut(usize, Range<usize>) -> bool) -> bool {
    let lo = ranges.iter().map(|r| r.start).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.end).max().unwrap_or(0);
    let mut b0 = lo;
    while b0 < hi {
        let b1 = (b0 + KEY_BLOCK).min(hi);
        for (i, r) in ranges.iter().enumerate() {
            let keys = b0.max(r.start)..b1.min(r.end);
            if !keys.is_empty() && !f(i, keys) {
                return false;
            }
        }
        b0 = b1;
    }
    true
}

/// Every query of `tile` over its window, with the result of
/// [`attend_head`] for each query head: the keys are scored block by block
/// (see [`for_blocks`]), each token's heads into their own rows of
/// `scores`, then each row gets its softmax, then the V rows are summed
/// block by block in the same way. Per head, the score of a key and the
/// order of the sums over keys are those of the head alone; on the SIMD
/// f16 paths a row's loads and conversions also serve two or four heads
/// of a token.
fn attend_tile<T: HeadRows>(
    tile: &mut Tile,
    head: Head,
    (k, v): (&[T], &[T]),
    region: (&KvRegion, &KvRegion),
    scores: &mut [f32],
) -> bool {
    let Head {
        hd,
        start,
        scale,
        rk,
    } = head;
    let ranges = &tile.ranges[..tile.len];
    // Token `i`'s scores: a row per head, as long as its window, from
    // `at[i]`. The rows of a token lie `ranges[i].len()` apart.
    let mut at = [0usize; MAX_TILE + 1];
    for (i, r) in ranges.iter().enumerate() {
        at[i + 1] = at[i] + tile.qs[i].len() / hd * r.len();
    }
    let (base, qs) = (tile.base, &tile.qs);
    let scored = for_blocks(ranges, |i, keys| {
        let r = &ranges[i];
        let rows = head_rows(k, region.0, start, &base[keys.clone()]);
        let s = &mut scores[at[i] + keys.start - r.start..at[i + 1]];
        T::dot_heads(rk, qs[i], hd, rows, scale, s, r.len()).is_ok()
    });
    if !scored {
        return false;
    }
    for (i, r) in ranges.iter().enumerate() {
        if !r.is_empty() {
            for s in scores[at[i]..at[i + 1]].chunks_exact_mut(r.len()) {
                rk.softmax(s);
            }
        }
        // A token with an empty window gets zeros, as a head alone does.
        tile.outs[i].fill(0.0);
    }
    let outs = &mut tile.outs;
    for_blocks(ranges, |i, keys| {
        let r = &ranges[i];
        let rows = head_rows(v, region.1, start, &base[keys.clone()]);
        let w = &scores[at[i] + keys.start - r.start..at[i + 1]];
        T::axpy_heads(rk, w, r.len(), rows, outs[i], hd).is_ok()
    })
}

/// One query head over its window: `out = Σ softmax(scale · q·k_j)_j v_j`,
/// each dot product as [`dot_f32`] computes it and each output element
/// summed over the window in order. F32 and F16 regions are read in place
/// (f16 widened exactly as it is loaded, so no row is converted into a
/// buffer); Q8_0 rows are decoded into the thread's buffers. Returns
/// `false` if a cell could not be read, which validation rules out.
fn attend_head(
    q: &[f32],
    (k, v): (&KvRegion, &KvRegion),
    window: &[i32],
    head: Head,
    buf: &mut ThreadBuf,
    out: &mut [f32],
) -> bool {
    let Head {
        hd,
        start,
        scale,
        rk,
    } = head;
    let scores = &mut buf.scores[..window.len()];
    let scored = match k.data() {
        KvData::F32(d) => rk
            .dot_rows_f32(q, head_rows(d, k, start, window), scale, scores)
            .is_ok(),
        KvData::F16(d) => rk
            .dot_rows_f16(q, head_rows(d, k, start, window), scale, scores)
            .is_ok(),
        KvData::Q8_0 => scores.iter_mut().zip(window).all(|(s, &cell)| {
            let Some(kr) = k.slice(cell as usize, start, hd, &mut buf.k) else {
                return false;
            };
            *s = scale * dot_f32(q, kr);
            true
        }),
    };
    if !scored {
        return false;
    }
    rk.softmax(scores);
    out.fill(0.0);
    match v.data() {
        KvData::F32(d) => rk
            .axpy_rows_f32(scores, head_rows(d, v, start, window), out)
            .is_ok(),
        KvData::F16(d) => rk
            .axpy_rows_f16(scores, head_rows(d, v, start, window), out)
            .is_ok(),
        KvData::Q8_0 => scores.iter().zip(window).all(|(&pj, &cell)| {
            let Some(vr) = v.slice(cell as usize, start, hd, &mut buf.v) else {
                return false;
            };
            for (o, &x) in out.iter_mut().zip(vr) {
                *o += pj * x;
            }
            true
        }),
    }
}
