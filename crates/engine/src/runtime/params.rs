//! The graph parameters of one forward: what a step asks the graph cache
//! for, on every step.

use minfer_graph::{ComputeParams, GraphParams, OutputKind};

use super::base::Runtime;

impl Runtime {
    /// The params of a forward of `n_tokens` rows with `n_out` outputs of
    /// kind `output`, as a step builds them.
    pub(super) fn params_for(
        &self,
        n_tokens: usize,
        n_out: usize,
        output: OutputKind,
    ) -> GraphParams {
        let compute = ComputeParams {
            n_ctx: self.cfg.n_ctx,
            kv_format: self.cfg.kv_format,
            backend: self.offload,
            fusion: self.cfg.fusion,
        };
        // The model is immutable for the life of the runtime: version 0.
        GraphParams::forward(n_tokens as u32, n_out as u32, output, compute)
    }
}
