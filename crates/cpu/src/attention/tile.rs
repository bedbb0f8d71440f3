//! One work item: a tile of query tokens, each with the query heads of
//! the item, taken in chains of tokens that can share their reads.
//!
//! Consecutive tokens of one sequence in a prefill see windows that are
//! each a prefix of the next (the same cells in the same order, one more
//! at the end), and a sliding window cuts each to a suffix of itself. So
//! the tokens of a tile are taken in chains: tokens whose windows are all
//! ranges of one list of cells, the base (the last token's whole window).
//! A chain walks the base in blocks of keys (see `super::blocks`), and
//! every token scores (and later sums) the part of a block inside its own
//! window before the next block is read: each K and V row comes from
//! memory once for the chain instead of once per token. Per query, the
//! score of a key, its softmax (over its own window) and the order of the
//! sums over keys are exactly those of a token attending alone.

use std::ops::Range;

use minfer_graph::kv::{KvData, KvRegion};
use minfer_kernels::pool::SharedMut;

use super::blocks::attend_tile;
use super::head::{Head, Sliding, Tile};
use super::scratch::{ThreadBuf, MAX_TILE};
use super::source::{Decoded, InPlace, Source};

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

/// [`attend_tile`] on whatever storage the regions have: f16 and f32
/// rows read in place, Q8_0 rows decoded a block at a time.
fn attend_tile_on(
    tile: &mut Tile,
    head: Head,
    k: &KvRegion,
    v: &KvRegion,
    buf: &mut ThreadBuf,
) -> bool {
    match k.data() {
        KvData::F16(data) => with_v(tile, head, &InPlace { data, region: k }, v, buf),
        KvData::F32(data) => with_v(tile, head, &InPlace { data, region: k }, v, buf),
        KvData::Q8_0 => with_v(tile, head, &Decoded(k), v, buf),
    }
}

/// [`attend_tile`] with K's source `k`, on whatever storage `v` has.
fn with_v<K: Source>(
    tile: &mut Tile,
    head: Head,
    k: &K,
    v: &KvRegion,
    buf: &mut ThreadBuf,
) -> bool {
    match v.data() {
        KvData::F16(data) => attend_tile(tile, head, (k, &InPlace { data, region: v }), buf),
        KvData::F32(data) => attend_tile(tile, head, (k, &InPlace { data, region: v }), buf),
        KvData::Q8_0 => attend_tile(tile, head, (k, &Decoded(v)), buf),
    }
}
