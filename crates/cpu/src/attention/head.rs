//! The shapes a work item of attention passes around: what its queries
//! share, a tile of tokens reading one base of cells, the sliding-window
//! cut, and a head's rows in a region. Every part of the item (the tile
//! driver, the block walk, the row sources) reads these.

use std::ops::Range;

use minfer_graph::kv::KvRegion;
use minfer_kernels::{RowKernels, Rows};

use super::scratch::MAX_TILE;

/// The rows of `window` in a region's storage `data`, from value `start`
/// of each row (one kv head).
pub(super) fn head_rows<'a, T>(
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
pub(super) struct Head<'a> {
    /// Values per head.
    pub(super) hd: usize,
    /// Where the KV head starts inside each cache row.
    pub(super) start: usize,
    pub(super) scale: f32,
    pub(super) rk: RowKernels,
    /// The sinks of the item's query heads, in order, if the call has
    /// sinks.
    pub(super) sinks: Option<&'a [f32]>,
}

impl Head<'_> {
    /// The sink of the item's query head `j` (counted from the item's
    /// first), if the call has sinks.
    pub(super) fn sink(&self, j: usize) -> Option<f32> {
        self.sinks.map(|s| s[j])
    }
}

/// Tokens whose windows are ranges of one list of cells.
pub(super) struct Tile<'a> {
    /// The last token's whole window.
    pub(super) base: &'a [i32],
    pub(super) len: usize,
    /// Each token's query heads (`hd` values each, one after another),
    /// window (a range of `base`) and output heads.
    pub(super) qs: [&'a [f32]; MAX_TILE],
    pub(super) ranges: [Range<usize>; MAX_TILE],
    pub(super) outs: [&'a mut [f32]; MAX_TILE],
}

/// Positions that cut each window to its sliding suffix.
#[derive(Clone, Copy)]
pub(super) struct Sliding<'a> {
    pub(super) query_pos: &'a [i32],
    pub(super) cell_pos: &'a [i32],
    pub(super) size: i64,
}

impl Sliding<'_> {
    /// Index in `cells` where token `t`'s sliding window starts, given its
    /// full window `cells[from..to]`.
    pub(super) fn start(&self, t: usize, from: usize, to: usize) -> usize {
        let qp = i64::from(self.query_pos[t]);
        from + self.cell_pos[from..to].partition_point(|&kp| qp - i64::from(kp) >= self.size)
    }
}
