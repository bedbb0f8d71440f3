//! Looking at the graphs a runtime runs: dumps of the prefill and decode
//! graphs and their op census, without evaluating anything.

use minfer_graph::{ComputeParams, GraphKind, GraphParams, GraphUid, OutputKind};
use serde_json::Value;

use super::Runtime;
use crate::error::Result;

impl Runtime {
    /// The params of a forward of `n_tokens` rows with `n_out` outputs of
    /// kind `output`, as a step builds them.
    pub(super) fn params_for(
        &self,
        n_tokens: usize,
        n_out: usize,
        output: OutputKind,
    ) -> GraphParams {
        GraphParams {
            n_tokens: n_tokens as u32,
            n_out: n_out as u32,
            kind: if n_tokens == 1 {
                GraphKind::Decode
            } else {
                GraphKind::Prefill
            },
            output,
            compute: ComputeParams {
                n_ctx: self.cfg.n_ctx,
                kv_format: self.cfg.kv_format,
                backend: self.offload,
                fusion: self.cfg.fusion,
            },
            // The model is immutable for the life of the runtime.
            weights_version: 0,
        }
    }

    /// Builds (or finds in the cache) the graph of a forward of `n_tokens`
    /// rows whose last row's logits are wanted.
    fn prepare_for(&mut self, n_tokens: usize) -> Result<GraphUid> {
        let n = n_tokens.clamp(1, self.cfg.n_batch.min(self.cfg.n_ctx as usize));
        let params = self.params_for(n, 1, OutputKind::Logits);
        let model = &self.model;
        Ok(self
            .cache
            .prepare(&params, &model.weights, |b| model.build_graph(b))?)
    }

    /// Dumps of the prefill graph for a prompt of `n_prompt` tokens (at
    /// least 2, at most a micro-batch) and of the decode graph, in that
    /// order (see `minfer_graph::dump::dump_json`).
    ///
    /// # Errors
    /// Graph build errors.
    pub fn dump_graphs(&mut self, n_prompt: usize) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        for n in [n_prompt.max(2), 1] {
            let uid = self.prepare_for(n)?;
            let model = &self.model;
            out.push(
                self.cache
                    .dump(uid, &model.weights, |b| model.build_graph(b))?,
            );
        }
        Ok(out)
    }

    /// The decode graph's nodes per op name (builds the graph if no step
    /// has yet).
    ///
    /// # Errors
    /// Graph build errors.
    pub fn decode_census(&mut self) -> Result<Vec<(&'static str, usize)>> {
        let uid = self.prepare_for(1)?;
        Ok(self
            .cache
            .census(uid)
            .map(<[_]>::to_vec)
            .unwrap_or_default())
    }
}
