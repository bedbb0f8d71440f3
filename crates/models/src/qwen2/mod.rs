//! Qwen2 / Qwen2.5: a llama-style decoder with biases on the Q, K and V
//! projections and NeoX-style RoPE (rotating the two halves of each head).
//! The LM head is `output.weight`, or the token embeddings when tied.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightStore};

use crate::error::Result;
use crate::hparams::HParams;
use crate::layers::{self, Biases, ModelTensors};

/// Resolves qwen2's tensors; the q/k/v biases are required.
pub(crate) fn tensors(store: &WeightStore, hp: &HParams) -> Result<ModelTensors> {
    layers::resolve_tensors(store, hp, Biases::Required)
}

/// The forward pass; returns logits `[n_vocab, n_out]`.
pub(crate) fn build(b: &mut GraphBuilder, hp: &HParams, t: &ModelTensors) -> GraphResult<NodeId> {
    layers::pre_norm_decoder(b, hp, t, RopeStyle::Neox)
}
