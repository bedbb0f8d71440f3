//! Where a chain of queries gets the K or V rows of a block of keys: read
//! in place from an f16 or f32 region, or decoded once per block from a
//! Q8_0 region into the thread's buffer, so that every query and head of
//! the chain shares one decode instead of each decoding every row again.
//!
//! A decoded row is the f32 row [`KvRegion::slice`] gives, and the row
//! loops read it as they read any f32 row, so the scores and sums are the
//! bits of a query head attending alone over the decoded rows, in the
//! plain f32 order the tests hold every path to.

use minfer_graph::kv::KvRegion;
use minfer_kernels::{HeadRows, Rows};

use super::head::{head_rows, Head};

/// The rows of one region for the KV head of a work item.
pub(super) trait Source {
    /// What the row loops read.
    type Elem: HeadRows;

    /// Whether the rows are decoded into a buffer (which bounds a block
    /// to the buffer's rows) rather than read where they are.
    const DECODED: bool;

    /// The rows of `cells` (the head's `hd` values of each, from the
    /// item's start inside the row): in place, or decoded into `buf`.
    /// `None` if a cell could not be read (validation rules it out) or
    /// `buf` cannot hold the rows.
    fn rows<'a>(
        &'a self,
        cells: &'a [i32],
        head: &Head,
        buf: &'a mut [f32],
    ) -> Option<Rows<'a, Self::Elem>>;
}

/// An f16 or f32 region, read in place.
pub(super) struct InPlace<'a, T> {
    pub(super) data: &'a [T],
    pub(super) region: &'a KvRegion,
}

impl<T: HeadRows> Source for InPlace<'_, T> {
    type Elem = T;
    const DECODED: bool = false;

    fn rows<'a>(&'a self, cells: &'a [i32], head: &Head, _: &'a mut [f32]) -> Option<Rows<'a, T>> {
        Some(head_rows(self.data, self.region, head.start, cells))
    }
}

/// A region decoded block by block (Q8_0).
pub(super) struct Decoded<'a>(pub(super) &'a KvRegion);

impl Source for Decoded<'_> {
    type Elem = f32;
    const DECODED: bool = true;

    fn rows<'a>(
        &'a self,
        cells: &'a [i32],
        head: &Head,
        buf: &'a mut [f32],
    ) -> Option<Rows<'a, f32>> {
        let n = cells.len();
        let idx = LOCAL.get(..n)?;
        self.0
            .decode_rows(head.rk, cells, head.start, head.hd, buf)?;
        Some(Rows {
            data: &buf[..n * head.hd],
            stride: head.hd,
            offset: 0,
            idx,
        })
    }
}

/// The most rows a decoded block holds, and so the most keys of a block
/// over a decoded region.
pub(super) const MAX_DECODED: usize = 64;

/// `0, 1, 2, …`: the rows of a decoded or widened block in order.
pub(super) const LOCAL: [i32; MAX_DECODED] = {
    let mut idx = [0; MAX_DECODED];
    let mut i = 0;
    while i < MAX_DECODED {
        idx[i] = i as i32;
        i += 1;
    }
    idx
};
