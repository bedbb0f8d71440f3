//! Writing K/V rows into the cache and attending over explicit windows of
//! cells.
//!
//! Attention never derives what to read from a position or a cache length:
//! each query gets the exact list of cells it may see (built by
//! [`KvCells`](crate::kv::KvCells)), so several sequences can share one
//! batch and one region, and cells past a sequence's cursor are never read.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard, PoisonError};

use minfer_kernels::blocks::QK;
use minfer_kernels::pool::{SharedMut, ThreadPool};
use minfer_kernels::rows::dot_f32;
use minfer_kernels::{HeadRows, RowKernels, Rows};

use super::bad_len;
use crate::error::{GraphError, Result};
use crate::ir::AttnParams;
use crate::kv::{KvData, KvRegion};

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

fn check_cells(cells: &[i32], n_ctx: usize) -> Result<()> {
    match cells
        .iter()
        .find(|&&c| usize::try_from(c).map_or(true, |c| c >= n_ctx))
    {
        Some(&cell) => Err(GraphError::CellOutOfRange {
            cell: cell.into(),
            n_ctx,
        }),
        None => Ok(()),
    }
}

/// One thread's working memory.
#[derive(Debug)]
struct ThreadBuf {
    /// Scores of the window's cells, then their softmax: `n_ctx` values for
    /// each query head of the run being computed (up to the scratch's
    /// `group`).
    scores: Vec<f32>,
    /// A head of K decoded from a Q8_0 region.
    k: Vec<f32>,
    /// A head of V, likewise.
    v: Vec<f32>,
}

/// Preallocated working memory of [`attention`]: per thread, room for the
/// scores of a window of up to `n_ctx` cells and for one head of K and of V
/// decoded from a quantized region.
#[derive(Debug)]
pub struct AttnScratch {
    /// One buffer per pool thread. A chunk locks whichever is free (at most
    /// `n_threads` chunks run at once); the locks are what lets threads of
    /// a shared job each get a mutable buffer without `unsafe`.
    bufs: Vec<Mutex<ThreadBuf>>,
    n_ctx: usize,
    head_dim_max: usize,
    /// Query heads whose scores each buffer holds at once: the most that
    /// one work item computes together over shared K/V reads.
    group: usize,
    /// The f32/f16 row kernels attention reads the cache with.
    rows: RowKernels,
}

impl AttnScratch {
    /// Scratch for a pool of `n_threads`, windows of up to `n_ctx` cells
    /// and heads of up to `head_dim_max` values.
    pub fn new(n_threads: usize, n_ctx: usize, head_dim_max: usize) -> Self {
        // A Q8_0 head that starts and ends inside a block decodes both
        // partial blocks whole.
        let head = head_dim_max + 2 * QK;
        let bufs = (0..n_threads.max(1))
            .map(|_| {
                Mutex::new(ThreadBuf {
                    scores: vec![0.0; n_ctx],
                    k: vec![0.0; head],
                    v: vec![0.0; head],
                })
            })
            .collect();
        AttnScratch {
            bufs,
            n_ctx,
            head_dim_max,
            group: 1,
            rows: RowKernels::detect(),
        }
    }

    /// Room for the scores of `group` query heads per thread, so that the
    /// query heads sharing a KV head (grouped-query attention) read each
    /// K/V row once between them. Without it every head reads its own.
    pub fn with_group(mut self, group: usize) -> Self {
        let group = group.max(1);
        for b in &mut self.bufs {
            let b = b.get_mut().unwrap_or_else(PoisonError::into_inner);
            b.scores = vec![0.0; self.n_ctx * group];
        }
        self.group = group;
        self
    }

    /// Uses the row kernels `rows` (by default the fastest this CPU has),
    /// so that a kernel level chosen at start-up reaches attention too.
    pub fn with_row_kernels(mut self, rows: RowKernels) -> Self {
        self.rows = rows;
        self
    }
}

/// Validates the shapes of an attention call; returns the longest window.
fn validate(
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

/// One query head over its window: `out = Σ softmax(scale · q·k_j)_j v_j`,
/// each dot product as [`dot_f32`] computes it and each output element
/// summed over the window in order. F32 and F16 regions are read in place
/// (f16 widened exactly as it is loaded, so no row is converted into a
/// buffer); Q8_0 rows are decoded into the thread's buffers. Returns
/// `false` if a cell could not be read, which validation rules out.
#[allow(clippy::too_many_arguments)]
fn attend_head(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    window: &[i32],
    start: usize,
    scale: f32,
    rk: RowKernels,
    buf: &mut ThreadBuf,
    out: &mut [f32],
) -> bool {
    let hd = q.len();
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

/// Keys per block of [`attend_heads`]: 64 rows of one KV head (8 KiB of
/// f16 at a head of 64) stay in L1 while every query head of the run
/// reads them.
const KEY_BLOCK: usize = 64;

/// One work item of [`attend`]: consecutive query heads of one token that
/// share a KV head, and the window they attend over.
#[derive(Clone, Copy)]
struct Run<'a> {
    /// The heads' queries, `hd` values each, one after another.
    qs: &'a [f32],
    hd: usize,
    window: &'a [i32],
    /// Where the KV head starts inside each cache row.
    start: usize,
    scale: f32,
    rk: RowKernels,
}

/// The heads of `run` over its window, with the results of [`attend_head`]
/// for each: the window is walked in blocks of [`KEY_BLOCK`] keys and every
/// head scores (and later sums) a block before the next is read, so each K
/// and V row comes from memory once for the whole run (and, on the SIMD f16
/// paths, is loaded and converted once for two or four heads). Per head,
/// the score of a key and the order of the sums over keys are unchanged.
fn attend_heads<T: HeadRows>(
    run: Run,
    (k, v): (&[T], &[T]),
    region: (&KvRegion, &KvRegion),
    scores: &mut [f32],
    out: &mut [f32],
) -> bool {
    let Run {
        qs,
        hd,
        window,
        start,
        scale,
        rk,
    } = run;
    let n_heads = qs.len() / hd;
    let n = window.len();
    if n == 0 {
        // No cell to attend to: zeros, as for a single head.
        out.fill(0.0);
        return true;
    }
    let scores = &mut scores[..n_heads * n];
    for (b, keys) in window.chunks(KEY_BLOCK).enumerate() {
        let at = b * KEY_BLOCK;
        let rows = head_rows(k, region.0, start, keys);
        // Head `g`'s scores of this block land at `g * n + at`.
        if T::dot_heads(rk, qs, hd, rows, scale, &mut scores[at..], n).is_err() {
            return false;
        }
    }
    for s in scores.chunks_exact_mut(n) {
        rk.softmax(s);
    }
    out.fill(0.0);
    for (b, keys) in window.chunks(KEY_BLOCK).enumerate() {
        let at = b * KEY_BLOCK;
        let rows = head_rows(v, region.1, start, keys);
        if T::axpy_heads(rk, &scores[at..], n, rows, out, hd).is_err() {
            return false;
        }
    }
    true
}

/// [`attend_heads`] on whatever storage the regions have; Q8_0 regions
/// (decoded row by row) go head by head through [`attend_head`].
fn attend_run(run: Run, k: &KvRegion, v: &KvRegion, buf: &mut ThreadBuf, out: &mut [f32]) -> bool {
    let scores = &mut buf.scores;
    match (k.data(), v.data()) {
        (KvData::F16(kd), KvData::F16(vd)) => attend_heads(run, (kd, vd), (k, v), scores, out),
        (KvData::F32(kd), KvData::F32(vd)) => attend_heads(run, (kd, vd), (k, v), scores, out),
        _ => run
            .qs
            .chunks_exact(run.hd)
            .zip(out.chunks_exact_mut(run.hd))
            .all(|(q, o)| {
                let (w, s, sc, rk) = (run.window, run.start, run.scale, run.rk);
                attend_head(q, k, v, w, s, sc, rk, buf, o)
            }),
    }
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
/// The work is split across the pool's threads in runs of query heads of
/// one token that share a KV head (see `Runs`); each head is computed by
/// one thread in a fixed order, so the output does not depend on the
/// number of threads or on how heads are grouped into runs. F32 and F16 regions are read in place,
/// Q8_0 regions decoded head by head into the scratch; the path (scalar or
/// SIMD) does not change the bits. Nothing is allocated.
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
    attend(q, k, v, offsets, cells, None, p, pool, scratch, out)
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
    let sliding = Sliding {
        query_pos: w.query_pos,
        cell_pos: w.cell_pos,
        size: i64::from(p.sliding_window),
    };
    attend(
        q,
        k,
        v,
        w.offsets,
        w.cells,
        Some(sliding),
        p,
        pool,
        scratch,
        out,
    )
}

/// Positions that cut each window to its sliding suffix.
#[derive(Clone, Copy)]
struct Sliding<'a> {
    query_pos: &'a [i32],
    cell_pos: &'a [i32],
    size: i64,
}

impl Sliding<'_> {
    /// Index in `cells` where token `t`'s sliding window starts, given its
    /// full window `cells[from..to]`.
    fn start(&self, t: usize, from: usize, to: usize) -> usize {
        let qp = i64::from(self.query_pos[t]);
        from + self.cell_pos[from..to].partition_point(|&kp| qp - i64::from(kp) >= self.size)
    }
}

/// The work items of one attention call: runs of consecutive query heads
/// of one token that share a KV head. A run reads its KV head's rows once
/// for all its heads; a group is split into several runs only when there
/// would otherwise be too few items to keep every thread busy (decode), or
/// when the scratch holds fewer heads. Items go KV head by KV head, so the
/// consecutive tokens one thread takes read the same (cached) rows. The
/// split changes which thread computes a head, never its result.
struct Runs {
    n_tok: usize,
    n_head_kv: usize,
    group: usize,
    /// Runs per KV head, and heads per run (the last may be shorter).
    parts: usize,
    per: usize,
}

impl Runs {
    fn new(n_tok: usize, n_head_kv: usize, group: usize, room: usize, threads: usize) -> Self {
        let mut parts = group.div_ceil(room.max(1));
        while parts < group && n_tok * n_head_kv * parts < 2 * threads {
            parts += 1;
        }
        let per = group.div_ceil(parts);
        Runs {
            n_tok,
            n_head_kv,
            group,
            parts: group.div_ceil(per),
            per,
        }
    }

    fn len(&self) -> usize {
        self.n_head_kv * self.n_tok * self.parts
    }

    /// Item `i`: its token and query heads.
    fn get(&self, i: usize) -> (usize, Range<usize>) {
        let part = i % self.parts;
        let t = (i / self.parts) % self.n_tok;
        let kv = i / (self.parts * self.n_tok);
        let first = kv * self.group + part * self.per;
        let last = (first + self.per).min((kv + 1) * self.group);
        (t, first..last)
    }
}

/// Thread `thread`'s buffers. Its chunks run one after another, so the
/// lock is uncontended within one call; it stays a lock so that even an
/// unexpected overlap (a nested call on another pool thread) is safe.
fn thread_buf(bufs: &[Mutex<ThreadBuf>], thread: usize) -> MutexGuard<'_, ThreadBuf> {
    // A poisoned lock only means an earlier job panicked while holding it;
    // the buffers hold no invariant.
    bufs[thread].lock().unwrap_or_else(|p| p.into_inner())
}

#[allow(clippy::too_many_arguments)]
fn attend(
    q: &[f32],
    k: &KvRegion,
    v: &KvRegion,
    offsets: &[i32],
    cells: &[i32],
    sliding: Option<Sliding>,
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
    let runs = Runs::new(n_tok, p.n_head_kv, group, scratch.group, pool.n_threads());
    let out_ptr = SharedMut::new(out.as_mut_ptr());
    let bufs = &scratch.bufs;
    let rk = scratch.rows;
    let failed = std::sync::atomic::AtomicBool::new(false);
    // Items are claimed a few at a time, so a thread that is not running
    // (another process has its core) leaves its share to the others.
    pool.for_chunks_on(runs.len(), 1, 4, |thread, items| {
        let mut guard = thread_buf(bufs, thread);
        let buf = &mut *guard;
        for item in items {
            let (t, heads) = runs.get(item);
            // Validated: offsets are non-negative, ordered and within `cells`.
            let (from, to) = (offsets[t] as usize, offsets[t + 1] as usize);
            let from = sliding.map_or(from, |s| s.start(t, from, to));
            let window = &cells[from..to];
            let first = t * p.n_head + heads.start;
            let n = heads.len() * hd;
            let qs = &q[first * hd..first * hd + n];
            // SAFETY: item `(t, heads)` owns the outputs of those heads of
            // token `t`, `out[first * hd..][..n]`, inside `out` (its length
            // equals `q`'s, checked); each item belongs to exactly one chunk.
            let os = unsafe { std::slice::from_raw_parts_mut(out_ptr.get().add(first * hd), n) };
            let run = Run {
                qs,
                hd,
                window,
                start: (heads.start / group) * hd,
                scale: p.scale,
                rk,
            };
            if !attend_run(run, k, v, buf, os) {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
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
