//! [`Engine`]: evaluates tokens of one sequence through the model's
//! graphs, keeping the KV cache between calls.
//!
//! The engine owns a [`GraphCache`] (which owns the KV regions) and the
//! [`KvCells`] bookkeeping. A call appends tokens at the next positions:
//! positions, cells and attention windows are step data, so every decode
//! step reuses the graph built for the first one, and a prefill of the
//! same length reuses the prefill graph.

use std::sync::Arc;

use minfer_graph::kv::{BatchPlan, KvCells};
use minfer_graph::{
    BackendPlan, ComputeParams, Fusion, GraphCache, GraphKind, GraphParams, KvFormat, StepInputs,
    StepTimings,
};
use minfer_kernels::{Kernels, SimdLevel};
use minfer_models::Model;

use crate::error::{EngineError, Result};

/// The sequence id of the engine's single sequence.
const SEQ: u32 = 0;

/// Settings of an [`Engine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Context window: KV cells per layer, and the bound on positions.
    pub n_ctx: u32,
    /// Threads of the compute pool (the caller's thread included).
    pub n_threads: usize,
    /// Longest micro-batch: longer evaluations are split into batches of
    /// at most this many tokens.
    pub n_batch: usize,
    /// Storage format of the KV cache (llama.cpp's default is F16).
    pub kv_format: KvFormat,
    /// Graph rewrites to apply.
    pub fusion: Fusion,
    /// SIMD level of the kernels; `None` picks the best this CPU has.
    pub simd: Option<SimdLevel>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            n_ctx: 4096,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            n_batch: 512,
            kv_format: KvFormat::F16,
            fusion: Fusion::ALL,
            simd: None,
        }
    }
}

/// One model, one sequence, one KV cache.
pub struct Engine {
    model: Arc<Model>,
    cfg: EngineConfig,
    kernels: Kernels,
    cache: GraphCache,
    cells: KvCells,
    plan: BatchPlan,
    // Per-step buffers, kept so that a decode step allocates nothing.
    batch: Vec<(u32, i32)>,
    ids: Vec<i32>,
    positions: Vec<i32>,
    out_ids: Vec<i32>,
    logits: Vec<f32>,
    /// Tokens at positions `0..n_past`.
    history: Vec<u32>,
    n_past: u32,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cfg", &self.cfg)
            .field("n_past", &self.n_past)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Engine {
    /// An engine for `model` with an empty KV cache.
    ///
    /// # Errors
    /// [`EngineError::Config`] for a zero `n_ctx`, `n_threads` or
    /// `n_batch`, an `n_ctx` beyond `i32::MAX`, or a Q8_0 cache whose rows
    /// are not whole blocks; [`EngineError::Kernel`] when the requested
    /// SIMD level is not available on this CPU.
    pub fn new(model: Arc<Model>, cfg: EngineConfig) -> Result<Engine> {
        if cfg.n_ctx == 0 || cfg.n_ctx > i32::MAX as u32 {
            return Err(EngineError::Config(format!(
                "n_ctx {} must be between 1 and {}",
                cfg.n_ctx,
                i32::MAX
            )));
        }
        if cfg.n_threads == 0 || cfg.n_batch == 0 {
            return Err(EngineError::Config(format!(
                "n_threads ({}) and n_batch ({}) must be positive",
                cfg.n_threads, cfg.n_batch
            )));
        }
        let kv_width = model.hparams.kv_width();
        if cfg.kv_format == KvFormat::Q8_0 && !kv_width.is_multiple_of(32) {
            return Err(EngineError::Config(format!(
                "a q8_0 KV cache needs rows of whole 32-value blocks; this model's are {kv_width}"
            )));
        }
        let kernels = Kernels::new(cfg.simd.unwrap_or_else(SimdLevel::detect))?;
        let n_ctx = cfg.n_ctx as usize;
        let n_batch = cfg.n_batch.min(n_ctx);
        let mut plan = BatchPlan::default();
        // A decode step's window grows by one cell per token; reserving the
        // whole context keeps it from ever reallocating.
        plan.window_cells.reserve(n_ctx);
        plan.kv_cells.reserve(n_batch);
        plan.window_offsets.reserve(n_batch + 1);
        Ok(Engine {
            cache: GraphCache::new(kernels, cfg.n_threads),
            kernels,
            cells: KvCells::new(n_ctx),
            plan,
            batch: Vec::with_capacity(n_batch),
            ids: Vec::with_capacity(n_batch),
            positions: Vec::with_capacity(n_batch),
            out_ids: Vec::with_capacity(n_batch),
            logits: Vec::with_capacity(model.n_vocab()),
            history: Vec::with_capacity(n_ctx),
            n_past: 0,
            model,
            cfg,
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The configuration the engine was created with.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The SIMD level the kernels run at.
    pub fn simd(&self) -> SimdLevel {
        self.kernels.level()
    }

    /// Width of a logits row.
    pub fn n_vocab(&self) -> usize {
        self.model.n_vocab()
    }

    /// The context window.
    pub fn n_ctx(&self) -> u32 {
        self.cfg.n_ctx
    }

    /// Tokens in the KV cache: the position the next token gets.
    pub fn n_past(&self) -> u32 {
        self.n_past
    }

    /// The tokens in the KV cache, by position.
    pub fn history(&self) -> &[u32] {
        &self.history
    }

    /// Graphs built so far (one per distinct shape of step).
    pub fn graph_builds(&self) -> u64 {
        self.cache.builds()
    }

    /// Steps that ran an already built graph.
    pub fn graph_reuses(&self) -> u64 {
        self.cache.reuses()
    }

    /// Rebuild the graph on every reuse and compare it with the cached one
    /// (a check that the params determine the topology; costs a build per
    /// step, for tests).
    pub fn set_verify_graphs(&mut self, on: bool) {
        self.cache.set_verify(on);
    }

    /// Measure where each step's time goes.
    pub fn set_timing(&mut self, on: bool) {
        self.cache.set_timing(on);
    }

    /// Timings of the last step, when timing is on.
    pub fn last_step_timings(&self) -> StepTimings {
        self.cache.last_step_timings()
    }

    /// Moves the cursor back to `pos`: the tokens at positions `pos..`
    /// are forgotten (their cells freed; the next token goes to `pos`).
    ///
    /// # Errors
    /// [`EngineError::Rollback`] when `pos` is past the cursor.
    pub fn rollback(&mut self, pos: u32) -> Result<()> {
        if pos > self.n_past {
            return Err(EngineError::Rollback {
                pos,
                n_past: self.n_past,
            });
        }
        // `pos <= n_past <= n_ctx <= i32::MAX`, checked in `new`.
        self.cells.remove(SEQ, pos as i32)?;
        self.n_past = pos;
        self.history.truncate(pos as usize);
        Ok(())
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        self.cells.clear();
        self.n_past = 0;
        self.history.clear();
    }

    /// Appends `tokens` at positions `n_past..` and returns the logits of
    /// the last token (`n_vocab` values), or of every token (`len ×
    /// n_vocab`, row by row) when `all_logits`.
    ///
    /// # Errors
    /// As [`eval_outputs`](Engine::eval_outputs).
    pub fn eval(&mut self, tokens: &[u32], all_logits: bool) -> Result<&[f32]> {
        let first = if all_logits {
            0
        } else {
            tokens.len().saturating_sub(1)
        };
        self.eval_outputs(tokens, first)
    }

    /// Appends `tokens` at positions `n_past..` and returns the logits of
    /// tokens `first_out..`, row by row (`(len - first_out) × n_vocab`).
    /// Only those rows go through the last layer's FFN and the LM head.
    /// Long inputs run as micro-batches of at most `n_batch` tokens.
    ///
    /// # Errors
    /// [`EngineError::EmptyBatch`]; [`EngineError::InvalidArgument`] when
    /// `first_out >= len`; [`EngineError::ContextFull`] when a token would
    /// land at a position at or past `n_ctx`;
    /// [`EngineError::TokenOutOfRange`]. These are checked before anything
    /// runs. A failure while running leaves the cache as it was before
    /// the call.
    pub fn eval_outputs(&mut self, tokens: &[u32], first_out: usize) -> Result<&[f32]> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyBatch);
        }
        if first_out >= tokens.len() {
            return Err(EngineError::InvalidArgument(format!(
                "first output row {first_out} of a batch of {}",
                tokens.len()
            )));
        }
        let n_ctx = self.cfg.n_ctx;
        if self.n_past as usize + tokens.len() > n_ctx as usize {
            return Err(EngineError::ContextFull { n_ctx });
        }
        let n_vocab = self.n_vocab();
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(EngineError::TokenOutOfRange { token, n_vocab });
        }
        let start = self.n_past;
        self.logits.clear();
        let n_batch = self.cfg.n_batch.min(n_ctx as usize);
        for (i, chunk) in tokens.chunks(n_batch).enumerate() {
            let first = first_out.saturating_sub(i * n_batch);
            if let Err(e) = self.eval_batch(chunk, first) {
                // Forget the batches that did run: the cursor stays where
                // the caller left it.
                self.cells.remove(SEQ, start as i32)?;
                self.n_past = start;
                self.history.truncate(start as usize);
                self.logits.clear();
                return Err(e);
            }
        }
        Ok(&self.logits)
    }

    /// Runs one micro-batch and appends the logits of its rows `first..`
    /// (none when `first >= len`).
    fn eval_batch(&mut self, chunk: &[u32], first: usize) -> Result<()> {
        let n = chunk.len();
        let wanted = n.saturating_sub(first);
        // A graph computes at least one output row; when the batch has
        // none wanted, it computes the last and it is dropped.
        let n_out = wanted.max(1);
        let start = self.n_past as i32;
        self.batch.clear();
        self.batch.extend((0..n as i32).map(|t| (SEQ, start + t)));
        self.cells.plan_batch(&self.batch, &mut self.plan)?;
        self.ids.clear();
        self.ids.extend(chunk.iter().map(|&t| t as i32));
        self.positions.clear();
        self.positions.extend(self.batch.iter().map(|&(_, p)| p));
        self.out_ids.clear();
        if n_out < n {
            self.out_ids.extend((n - n_out) as i32..n as i32);
        }
        let params = GraphParams {
            n_tokens: n as u32,
            n_out: n_out as u32,
            kind: if n == 1 {
                GraphKind::Decode
            } else {
                GraphKind::Prefill
            },
            compute: ComputeParams {
                n_ctx: self.cfg.n_ctx,
                kv_format: self.cfg.kv_format,
                backend: BackendPlan::Cpu,
                fusion: self.cfg.fusion,
            },
            // The model is immutable for the life of the engine.
            weights_version: 0,
        };
        let model = &self.model;
        let uid = self
            .cache
            .prepare(&params, &model.weights, |b| model.build_graph(b))?;
        let inputs = StepInputs {
            token_ids: &self.ids,
            positions: &self.positions,
            kv_cells: &self.plan.kv_cells,
            window_offsets: &self.plan.window_offsets,
            window_cells: &self.plan.window_cells,
            out_ids: &self.out_ids,
        };
        let out = self.cache.execute(uid, &model.weights, &inputs)?;
        if wanted > 0 {
            self.logits.extend_from_slice(out);
        }
        self.n_past += n as u32;
        self.history.extend_from_slice(chunk);
        Ok(())
    }
}
