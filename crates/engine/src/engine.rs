//! [`Engine`]: one sequence on its own [`Runtime`], for callers that run a
//! single stream of tokens (`perplexity`, tools, tests).
//!
//! A call appends tokens at the next positions: positions, cells and
//! attention windows are step data, so every decode step reuses the graph
//! built for the first one, and a prefill of the same length reuses the
//! prefill graph.

use std::sync::Arc;

use minfer_graph::{Fusion, KvFormat, SimdLevel, StepTimings};
use minfer_models::Model;

use crate::error::{EngineError, Result};
use crate::runtime::{BatchEntry, Runtime, SeqId};

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
    /// Repack weight matrices at start-up into the interleaved layout the
    /// fastest kernels read (where the CPU has them); results are the same
    /// bits either way. llama.cpp's `--no-repack` turns its repacking off.
    pub repack: bool,
    /// Which device runs the layers (the CPU unless a front end asks).
    pub device: crate::device::DeviceChoice,
    /// How many layers the GPU runs, the last ones (llama.cpp's `-ngl`);
    /// `None` offloads every layer and the output part.
    pub n_gpu_layers: Option<u32>,
    /// Bytes of host memory for the prompt cache below the KV cells:
    /// prefixes of released sequences kept as their K/V rows, so that a
    /// long prompt that comes back after its cells were evicted is copied
    /// back instead of recomputed (llama.cpp's `--cache-ram`). 0 (the
    /// default here; front ends size it with [`default_cache_ram`]) keeps
    /// none.
    ///
    /// [`default_cache_ram`]: crate::default_cache_ram
    pub cache_ram: usize,
    /// Folder of the prompt cache's disk tier: the same blocks as files,
    /// so that a restarted process restores what an earlier one computed.
    /// Setting it costs one read of every weight at start-up (the model's
    /// identity names the files' folder). `None` keeps nothing on disk.
    pub cache_dir: Option<crate::CacheDir>,
}

impl EngineConfig {
    /// Checks the settings for a model whose K/V rows are `kv_width` values.
    ///
    /// # Errors
    /// [`EngineError::Config`] for a zero `n_ctx`, `n_threads` or
    /// `n_batch`, an `n_ctx` beyond `i32::MAX`, or a Q8_0 cache whose rows
    /// are not whole blocks.
    pub fn validate(&self, kv_width: usize) -> Result<()> {
        if self.n_ctx == 0 || self.n_ctx > i32::MAX as u32 {
            return Err(EngineError::Config(format!(
                "n_ctx {} must be between 1 and {}",
                self.n_ctx,
                i32::MAX
            )));
        }
        if self.n_threads == 0 || self.n_batch == 0 {
            return Err(EngineError::Config(format!(
                "n_threads ({}) and n_batch ({}) must be positive",
                self.n_threads, self.n_batch
            )));
        }
        if self.kv_format == KvFormat::Q8_0 && !kv_width.is_multiple_of(32) {
            return Err(EngineError::Config(format!(
                "a q8_0 KV cache needs rows of whole 32-value blocks; this model's are {kv_width}"
            )));
        }
        Ok(())
    }
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
            repack: true,
            device: crate::device::DeviceChoice::Cpu,
            n_gpu_layers: None,
            cache_ram: 0,
            cache_dir: None,
        }
    }
}

/// One model, one sequence, one KV cache.
pub struct Engine {
    rt: Runtime,
    seq: SeqId,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("n_past", &self.n_past())
            .field("runtime", &self.rt)
            .finish()
    }
}

impl Engine {
    /// An engine for `model` with an empty KV cache.
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn new(model: Arc<Model>, cfg: EngineConfig) -> Result<Engine> {
        let mut rt = Runtime::new(model, cfg)?;
        let seq = rt.new_sequence()?;
        Ok(Engine { rt, seq })
    }

    /// The runtime underneath (one sequence of it is this engine's).
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        self.rt.model()
    }

    /// The configuration the engine was created with.
    pub fn config(&self) -> &EngineConfig {
        self.rt.config()
    }

    /// The SIMD level the kernels run at.
    pub fn simd(&self) -> SimdLevel {
        self.rt.simd()
    }

    /// Width of a logits row.
    pub fn n_vocab(&self) -> usize {
        self.rt.n_vocab()
    }

    /// The context window.
    pub fn n_ctx(&self) -> u32 {
        self.rt.n_ctx()
    }

    /// Tokens in the KV cache: the position the next token gets.
    pub fn n_past(&self) -> u32 {
        // The engine's sequence lives as long as the engine.
        self.rt.n_past(self.seq).unwrap_or(0)
    }

    /// The tokens in the KV cache, by position.
    pub fn history(&self) -> &[u32] {
        self.rt.history(self.seq).unwrap_or(&[])
    }

    /// Graphs built so far (one per distinct shape of step).
    pub fn graph_builds(&self) -> u64 {
        self.rt.graph_builds()
    }

    /// Steps that ran an already built graph.
    pub fn graph_reuses(&self) -> u64 {
        self.rt.graph_reuses()
    }

    /// Rebuild the graph on every reuse and compare it with the cached one
    /// (a check that the params determine the topology; costs a build per
    /// step, for tests).
    pub fn set_verify_graphs(&mut self, on: bool) {
        self.rt.set_verify_graphs(on);
    }

    /// Measure where each step's time goes.
    pub fn set_timing(&mut self, on: bool) {
        self.rt.set_timing(on);
    }

    /// Timings of the last step, when timing is on.
    pub fn last_step_timings(&self) -> StepTimings {
        self.rt.last_step_timings()
    }

    /// Moves the cursor back to `pos`: the tokens at positions `pos..`
    /// are forgotten (their cells freed; the next token goes to `pos`).
    ///
    /// # Errors
    /// [`EngineError::Rollback`] when `pos` is past the cursor.
    pub fn rollback(&mut self, pos: u32) -> Result<()> {
        self.rt.rollback(self.seq, pos)
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) {
        // Position 0 is never past the cursor.
        let _ = self.rt.rollback(self.seq, 0);
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
        let entry = BatchEntry {
            seq: self.seq,
            tokens,
            first_out,
        };
        Ok(self.rt.step(&[entry])?.all())
    }
}
