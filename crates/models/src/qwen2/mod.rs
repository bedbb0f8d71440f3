//! Qwen2 / Qwen2.5: a llama-style decoder with biases on the Q, K and V
//! projections and NeoX-style RoPE (rotating the two halves of each head).
//! The LM head is `output.weight`, or the token embeddings when tied.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle};

use crate::error::Result;
use crate::hparams::HParams;
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "qwen2",
    load,
};

#[derive(Debug)]
struct Qwen2(ModelTensors);

/// Resolves qwen2's tensors; the q/k/v biases are required.
fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let t = layers::resolve_tensors(cx.weights, cx.hparams, Biases::Required, FfnShape::Dense)?;
    Ok(Box::new(Qwen2(t)))
}

impl Forward for Qwen2 {
    fn tensors(&self) -> &ModelTensors {
        &self.0
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        layers::pre_norm_decoder(b, hp, &self.0, |_| AttnOptions::plain(hp, RopeStyle::Neox))
    }
}
