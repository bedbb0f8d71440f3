//! The preallocated working memory of attention: per pool thread, room for
//! the scores of a tile of queries and for a block of keys widened or
//! decoded to f32.

use std::sync::{Mutex, MutexGuard, PoisonError};

use minfer_kernels::RowKernels;

/// The most query tokens one work item takes together: the fixed bound of
/// the per-item arrays, never allocated.
pub(super) const MAX_TILE: usize = 16;

/// Query tokens per tile where the scratch has room:
/// [`AttnScratch::tile_for`] picks this many unless memory caps it. Eight
/// tokens divide the cache traffic of K and V by eight, while the tile's
/// scores (what each key block is scored into) still mostly stay in a
/// core's L2.
const DEFAULT_TILE: usize = 8;

/// The most bytes of scores [`AttnScratch::tile_for`] gives one thread:
/// past this, a longer context gets a smaller tile rather than scratch
/// growing with it.
const SCORE_BUDGET: usize = 16 << 20;

/// One thread's working memory.
#[derive(Debug)]
pub(super) struct ThreadBuf {
    /// Scores of the windows' cells, then their softmax: `n_ctx` values for
    /// each query head of each token of the work item being computed (up
    /// to the scratch's `group` heads and `tile` tokens).
    pub(super) scores: Vec<f32>,
    /// A block of keys widened to f32, read by every query of a tile.
    pub(super) block: Vec<f32>,
    /// A block of K or V rows decoded from a Q8_0 region, read by every
    /// query of a tile.
    pub(super) rows: Vec<f32>,
}

/// Preallocated working memory of [`attention`](super::attention): per
/// thread, room for the scores of a tile of queries over windows of up to
/// `n_ctx` cells, for a block of keys widened to f32 and for one decoded
/// from a Q8_0 region.
#[derive(Debug)]
pub struct AttnScratch {
    /// One buffer per pool thread. A chunk locks whichever is free (at most
    /// `n_threads` chunks run at once); the locks are what lets threads of
    /// a shared job each get a mutable buffer without `unsafe`.
    pub(super) bufs: Vec<Mutex<ThreadBuf>>,
    pub(super) n_ctx: usize,
    pub(super) head_dim_max: usize,
    /// Query heads whose scores each buffer holds at once: the most that
    /// one work item computes together over shared K/V reads.
    pub(super) group: usize,
    /// Query tokens whose scores each buffer holds at once (times
    /// `group` heads): the most that one work item computes together.
    pub(super) tile: usize,
    /// The f32/f16 row kernels attention reads the cache with.
    pub(super) rows: RowKernels,
}

impl AttnScratch {
    /// Scratch for a pool of `n_threads`, windows of up to `n_ctx` cells
    /// and heads of up to `head_dim_max` values.
    pub fn new(n_threads: usize, n_ctx: usize, head_dim_max: usize) -> Self {
        let bufs = (0..n_threads.max(1))
            .map(|_| {
                Mutex::new(ThreadBuf {
                    scores: vec![0.0; n_ctx],
                    block: vec![0.0; block_values(head_dim_max)],
                    rows: vec![0.0; block_values(head_dim_max)],
                })
            })
            .collect();
        AttnScratch {
            bufs,
            n_ctx,
            head_dim_max,
            group: 1,
            tile: 1,
            rows: RowKernels::detect(),
        }
    }

    /// Room for the scores of `group` query heads per thread, so that the
    /// query heads sharing a KV head (grouped-query attention) read each
    /// K/V row once between them. Without it every head reads its own.
    pub fn with_group(mut self, group: usize) -> Self {
        self.group = group.max(1);
        self.resize_scores();
        self
    }

    /// Room for the scores of `tokens` query tokens (each with the
    /// scratch's group of heads) per thread, at most 16, so that
    /// consecutive queries of one sequence in a prefill read each key
    /// block of their shared window once between them. Without it every
    /// token reads its whole window. Needs `tokens * group * n_ctx` values
    /// per thread; [`tile_for`](AttnScratch::tile_for) picks a size.
    pub fn with_tile(mut self, tokens: usize) -> Self {
        self.tile = tokens.clamp(1, MAX_TILE);
        self.resize_scores();
        self
    }

    /// The tile [`with_tile`](AttnScratch::with_tile) should get for
    /// batches of up to `n_tokens` queries over windows of up to `n_ctx`
    /// cells with `group` query heads per KV head: eight tokens, fewer
    /// when the batch is smaller or when the scores would pass 16 MiB per
    /// thread.
    pub fn tile_for(n_ctx: usize, group: usize, n_tokens: usize) -> usize {
        let per_token = n_ctx
            .saturating_mul(group.max(1))
            .saturating_mul(size_of::<f32>());
        let fits = SCORE_BUDGET / per_token.max(1);
        DEFAULT_TILE.min(n_tokens).min(fits).max(1)
    }

    /// Uses the row kernels `rows` (by default the fastest this CPU has),
    /// so that a kernel level chosen at start-up reaches attention too.
    pub fn with_row_kernels(mut self, rows: RowKernels) -> Self {
        self.rows = rows;
        self
    }

    fn resize_scores(&mut self) {
        let len = self.n_ctx * self.group * self.tile;
        for b in &mut self.bufs {
            let b = b.get_mut().unwrap_or_else(PoisonError::into_inner);
            b.scores = vec![0.0; len];
        }
    }
}

/// Thread `thread`'s buffers. Its chunks run one after another, so the
/// lock is uncontended within one call; it stays a lock so that even an
/// unexpected overlap (a nested call on another pool thread) is safe.
pub(super) fn thread_buf(bufs: &[Mutex<ThreadBuf>], thread: usize) -> MutexGuard<'_, ThreadBuf> {
    // A poisoned lock only means an earlier job panicked while holding it;
    // the buffers hold no invariant.
    bufs[thread].lock().unwrap_or_else(|p| p.into_inner())
}

/// The f32 values of a widened block: 16 KiB, so that the block and the
/// queries reading it fit L1.
pub(super) const BLOCK_VALUES: usize = 4096;

/// The f32 values a thread's block buffer needs for heads of up to
/// `head_dim_max` values.
pub(super) fn block_values(head_dim_max: usize) -> usize {
    BLOCK_VALUES.max(16 * head_dim_max)
}
