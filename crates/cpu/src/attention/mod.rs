//! Writing K/V rows into the cache and attending over explicit windows of
//! cells.
//!
//! Attention never derives what to read from a position or a cache length:
//! each query gets the exact list of cells it may see (built by
//! [`KvCells`](minfer_graph::kv::KvCells)), so several sequences can share one
//! batch and one region, and cells past a sequence's cursor are never read.

mod blocks;
mod head;
mod items;
mod scratch;
mod sink;
mod source;
mod tile;
mod validate;

use std::sync::atomic::{AtomicBool, Ordering};

use minfer_kernels::pool::{SharedMut, ThreadPool};

pub use scratch::AttnScratch;

use minfer_graph::ir::AttnParams;
use minfer_graph::kv::KvRegion;
use minfer_graph::{GraphError, Result};

use crate::check::bad_len;
use head::{Head, Sliding};
use items::Items;
use scratch::thread_buf;
use tile::Queries;
use validate::{check_cells, validate};

/// Writes row `t` of `x` (rows of `region.row_elems()` values) into cell
/// `cells[t]` of `region`.
///
/// # Errors
/// [`GraphError::CellOutOfRange`] when a cell is negative or `>= n_ctx`,
/// [`GraphError::BadInput`] when `x` is not one row per cell. Every cell is
/// checked before the first write, so nothing is written on error.
pub fn kv_store(region: &mut KvRegion, x: &[f32], cells: &[i32]) -> Result<()> {
    let n = region.row_elems();
    if cells.len().checked_mul(n) != Some(x.len()) {
        return Err(bad_len(
            "kv_store input",
            format_args!("{} x {n}", cells.len()),
            x.len(),
        ));
    }
    check_cells(cells, region.n_ctx())?;
    for (row, &cell) in x.chunks_exact(n).zip(cells) {
        region.store_row(cell as usize, row)?;
    }
    Ok(())
}

/// Causal, grouped-query attention of each query over exactly the cells of
/// its window.
///
/// `q` and `out` hold one row per token of `n_head * head_dim` values.
/// Token `t` attends to the cells `cells[offsets[t]..offsets[t + 1]]` of
/// the regions `k` and `v`; query head `h` reads kv head
/// `h / (n_head / n_head_kv)`. Per head: `s_j = scale * q·k_j` in f32, a
/// max-subtracted softmax over the window, then `out = Σ_j p_j v_j`
/// accumulated in window order. A token with an empty window gets zeros.
///
/// The work is split across the pool's threads in items of a tile of
/// consecutive tokens times the query heads that share a KV head (see
/// `Items`); the tokens of a tile whose windows are ranges of one list of
/// cells (consecutive tokens of a prefill) read each key block once
/// between them (see `tile`). Each query is computed by one thread in a
/// fixed order, so the output does not depend on the number of threads,
/// on the tiles, or on how heads are grouped into items. F32 and F16
/// regions are read in place, Q8_0 regions decoded head by head into the
/// scratch; the path (scalar or SIMD) does not change the bits. Nothing is
/// allocated.
///
/// # Errors
/// [`GraphError::BadInput`] when the offsets are not non-negative,
/// non-decreasing and within `cells`, when lengths or head counts do not
/// fit, or when `scratch` is too small (fewer buffers than pool threads, a
/// window longer than its `n_ctx`, a head longer than its `head_dim_max`);
/// [`GraphError::CellOutOfRange`] when a window names a cell outside the
/// regions.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    offsets: &[i32],
    cells: &[i32],
    p: &AttnParams,
    pool: &ThreadPool,
    scratch: &mut AttnScratch,
    out: &mut [f32],
) -> Result<()> {
    attend(q, k, v, offsets, cells, (None, None), p, pool, scratch, out)
}

/// The windows of a sliding-window attention call: each query's cells
/// (as for [`attention`]) with the position of every cell and of every
/// query.
#[derive(Clone, Copy, Debug)]
pub struct Windows<'a> {
    /// `n_tokens + 1` offsets into `cells`.
    pub offsets: &'a [i32],
    /// Every query's window, concatenated, each ordered by position.
    pub cells: &'a [i32],
    /// The position of each query, `n_tokens` values.
    pub query_pos: &'a [i32],
    /// The position of each cell of `cells` (parallel to it).
    pub cell_pos: &'a [i32],
}

/// [`attention`] where query `t` at position `p_t` reads only the cells of
/// its window at positions `> p_t - p.sliding_window`: the most recent
/// `sliding_window` positions, its own included (llama.cpp's standard
/// sliding window). Windows are ordered by position, so this is a suffix
/// of each window; cells before it are never read.
///
/// # Errors
/// As [`attention`], and [`GraphError::BadInput`] when the positions do
/// not match the windows or a window is not ordered by position.
#[allow(clippy::too_many_arguments)]
pub fn attention_sliding(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    w: &Windows,
    p: &AttnParams,
    pool: &ThreadPool,
    scratch: &mut AttnScratch,
    out: &mut [f32],
) -> Result<()> {
    let sliding = sliding(w, p.sliding_window)?;
    let cut = (Some(sliding), None);
    attend(q, k, v, w.offsets, w.cells, cut, p, pool, scratch, out)
}

/// [`attention`] (or [`attention_sliding`] when `p.sliding_window > 0`)
/// with attention sinks: `sinks[h]` joins query head `h`'s softmax as one
/// more logit of the denominator only, unscaled and with no value, as
/// ggml's `soft_max_add_sinks` does (gpt-oss): with `M = max(max_j s_j,
/// sinks[h])`, `p_j = exp(s_j - M) / (Σ_j exp(s_j - M) + exp(sinks[h] -
/// M))`. Without a sliding window the positions of `w` are not read (they
/// may be empty). A token with an empty window still gets zeros.
///
/// # Errors
/// As [`attention_sliding`], and [`GraphError::BadInput`] when `sinks` is
/// not one value per query head.
#[allow(clippy::too_many_arguments)]
pub fn attention_with_sinks(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    w: &Windows,
    sinks: &[f32],
    p: &AttnParams,
    pool: &ThreadPool,
    scratch: &mut AttnScratch,
    out: &mut [f32],
) -> Result<()> {
    if sinks.len() != p.n_head {
        return Err(bad_len(
            "attention sinks",
            format_args!("{} heads", p.n_head),
            sinks.len(),
        ));
    }
    let sliding = match p.sliding_window {
        0 => None,
        size => Some(sliding(w, size)?),
    };
    let cut = (sliding, Some(sinks));
    attend(q, k, v, w.offsets, w.cells, cut, p, pool, scratch, out)
}

/// The sliding-window cut of `w`'s windows, once its positions are
/// checked against them.
fn sliding<'a>(w: &Windows<'a>, size: u32) -> Result<Sliding<'a>> {
    let n_tok = w.offsets.len().saturating_sub(1);
    if w.query_pos.len() < n_tok || w.cell_pos.len() < w.cells.len() {
        return Err(GraphError::BadInput {
            what: "sliding-window positions",
            msg: format!(
                "{} query positions for {n_tok} queries, {} cell positions for {} cells",
                w.query_pos.len(),
                w.cell_pos.len(),
                w.cells.len()
            ),
        });
    }
    for t in 0..n_tok {
        // Offsets out of range are refused by the validation of `attend`.
        let (Ok(from), Ok(to)) = (
            usize::try_from(w.offsets[t]),
            usize::try_from(w.offsets[t + 1]),
        ) else {
            continue;
        };
        let ordered = w
            .cell_pos
            .get(from..to)
            .is_none_or(|ps| ps.windows(2).all(|pair| pair[0] <= pair[1]));
        if !ordered {
            return Err(GraphError::BadInput {
                what: "sliding-window positions",
                msg: format!("the window of query {t} is not ordered by position"),
            });
        }
    }
    Ok(Sliding {
        query_pos: w.query_pos,
        cell_pos: w.cell_pos,
        size: i64::from(size),
    })
}

/// The work of [`attention`], [`attention_sliding`] and
/// [`attention_with_sinks`] once the windows (and their sliding cut) and
/// the sinks (one per query head) are known: validation, then the work
/// items on the pool.
#[allow(clippy::too_many_arguments)]
fn attend(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    offsets: &[i32],
    cells: &[i32],
    (sliding, sinks): (Option<Sliding>, Option<&[f32]>),
    p: &AttnParams,
    pool: &ThreadPool,
    scratch: &mut AttnScratch,
    out: &mut [f32],
) -> Result<()> {
    let longest = validate(q.len(), out.len(), k, v, offsets, cells, p)?;
    if scratch.bufs.len() < pool.n_threads()
        || longest > scratch.n_ctx
        || p.head_dim > scratch.head_dim_max
    {
        return Err(GraphError::BadInput {
            what: "attention scratch",
            msg: format!(
                "scratch for {} threads, windows of {} and heads of {} cannot serve \
                 {} threads, a window of {longest} and heads of {}",
                scratch.bufs.len(),
                scratch.n_ctx,
                scratch.head_dim_max,
                pool.n_threads(),
                p.head_dim
            ),
        });
    }
    let n_tok = offsets.len() - 1;
    if n_tok == 0 || p.n_head == 0 {
        return Ok(());
    }
    let hd = p.head_dim;
    let group = p.n_head / p.n_head_kv;
    let room = (scratch.group, scratch.tile);
    let items = Items::new(n_tok, p.n_head_kv, group, room, pool.n_threads());
    let queries = Queries {
        q,
        out: SharedMut::new(out.as_mut_ptr()),
        n_head: p.n_head,
        offsets,
        cells,
        sliding,
    };
    let bufs = &scratch.bufs;
    let rk = scratch.rows;
    let failed = AtomicBool::new(false);
    // Items are claimed a few at a time, so a thread that is not running
    // (another process has its core) leaves its share to the others.
    pool.for_chunks_on(items.len(), 1, 4, |thread, chunk| {
        let mut guard = thread_buf(bufs, thread);
        for item in chunk {
            let (tokens, heads) = items.get(item);
            let head = Head {
                hd,
                start: (heads.start / group) * hd,
                scale: p.scale,
                rk,
                sinks: sinks.map(|s| &s[heads.clone()]),
            };
            // SAFETY: item `(tokens, heads)` owns the outputs of those heads
            // of those tokens; each item belongs to exactly one chunk, and
            // the items' tokens and heads do not overlap.
            let ok = unsafe { queries.attend_item(tokens, heads, head, (k, v), &mut guard) };
            if !ok {
                failed.store(true, Ordering::Relaxed);
                return;
            }
        }
    });
    if failed.into_inner() {
        return Err(GraphError::Exec {
            node: "attention".into(),
            msg: "a validated cell could not be read".into(),
        });
    }
    Ok(())
}
