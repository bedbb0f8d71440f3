//! [`Engine`]: one sequence on its own [`Runtime`], for callers that run a
//! single stream of tokens (`perplexity`, tools, tests).
//!
//! A call appends tokens at the next positions: positions, cells and
//! attention windows are step data, so every decode step reuses the graph
//! built for the first one, and a prefill of the same length reuses the
//! prefill graph.

use std::sync::Arc;

use minfer_graph::{SimdLevel, StepTimings};
use minfer_models::Model;

use crate::config::EngineConfig;
use crate::error::{EngineError, Result};
use crate::runtime::{BatchEntry, Runtime, SeqId};

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
