//! Looking at the graphs a runtime runs: dumps of the prefill and decode
//! graphs and their op census, without evaluating anything.

use minfer_graph::{GraphUid, OutputKind};
use serde_json::Value;

use super::base::Runtime;
use crate::error::Result;

impl Runtime {
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
