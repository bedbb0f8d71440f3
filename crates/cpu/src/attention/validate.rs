//! Shape and bounds checks of an attention call, done once before any
//! work is handed to the threads, so that the loops only index what was
//! checked.

use minfer_graph::ir::AttnParams;
use minfer_graph::kv::KvRegion;
use minfer_graph::{GraphError, Result};

use crate::check::bad_len;

/// Checks that every cell is inside a region of `n_ctx` cells.
pub(super) fn check_cells(cells: &[i32], n_ctx: usize) -> Result<()> {
    let out = |c: i32| usize::try_from(c).map_or(true, |c| c >= n_ctx);
    // A prefill deep in a context checks millions of cells per layer: a
    // scan with no early exit runs in vector registers, and only a failure
    // looks for the culprit. Below 2^31 cells, a negative cell read as u32
    // is past the last.
    if let Ok(limit) = i32::try_from(n_ctx) {
        let limit = limit as u32;
        if !cells
            .iter()
            .fold(false, |bad, &c| bad | (c as u32 >= limit))
        {
            return Ok(());
        }
    }
    match cells.iter().find(|&&c| out(c)) {
        Some(&cell) => Err(GraphError::CellOutOfRange {
            cell: cell.into(),
            n_ctx,
        }),
        None => Ok(()),
    }
}

/// Validates the shapes of an attention call; returns the longest window.
pub(super) fn validate(
    q_len: usize,
    out_len: usize,
    k: &KvRegion,
    v: &KvRegion,
    offsets: &[i32],
    cells: &[i32],
    p: &AttnParams,
) -> Result<usize> {
    let bad = |what, msg: String| GraphError::BadInput { what, msg };
    if p.head_dim == 0 || p.n_head_kv == 0 || !p.n_head.is_multiple_of(p.n_head_kv) {
        return Err(bad(
            "attention params",
            format!(
                "n_head {} must be a multiple of n_head_kv {}, head_dim {} positive",
                p.n_head, p.n_head_kv, p.head_dim
            ),
        ));
    }
    let kv_row = p.n_head_kv.checked_mul(p.head_dim);
    if kv_row != Some(k.row_elems()) || kv_row != Some(v.row_elems()) || k.n_ctx() != v.n_ctx() {
        return Err(bad(
            "attention kv regions",
            format!(
                "K rows {} and V rows {} (cells {} / {}) do not fit {} kv heads x {}",
                k.row_elems(),
                v.row_elems(),
                k.n_ctx(),
                v.n_ctx(),
                p.n_head_kv,
                p.head_dim
            ),
        ));
    }
    let Some(n_tok) = offsets.len().checked_sub(1) else {
        return Err(bad(
            "attention window offsets",
            "need n_tokens + 1 offsets, got none".into(),
        ));
    };
    // A saturated product never matches the length of a real slice.
    let q_row = p.n_head.saturating_mul(p.head_dim);
    if n_tok.checked_mul(q_row) != Some(q_len) {
        return Err(bad_len(
            "attention q",
            format_args!("{n_tok} x {q_row}"),
            q_len,
        ));
    }
    if out_len != q_len {
        return Err(bad_len("attention output", q_len, out_len));
    }
    let mut longest = 0usize;
    for w in offsets.windows(2) {
        if w[0] < 0 || w[1] < w[0] {
            return Err(bad(
                "attention window offsets",
                format!(
                    "offsets must be non-negative and non-decreasing, got {} then {}",
                    w[0], w[1]
                ),
            ));
        }
        longest = longest.max((w[1] - w[0]) as usize);
    }
    let (first, last) = (offsets[0], offsets[n_tok]);
    match (usize::try_from(first), usize::try_from(last)) {
        (Ok(a), Ok(b)) if b <= cells.len() => check_cells(&cells[a..b], k.n_ctx())?,
        _ => {
            return Err(bad(
                "attention window offsets",
                format!(
                    "windows {first}..{last} exceed the {} window cells",
                    cells.len()
                ),
            ))
        }
    }
    Ok(longest)
}
