//! Llama and its relatives (SmolLM2, TinyLlama, ...): pre-norm decoder,
//! RoPE on adjacent pairs, optional q/k/v biases. Without `output.weight`
//! the embeddings are tied and the LM head is `token_embd.weight`.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightStore};

use crate::error::{ModelError, Result};
use crate::hparams::HParams;
use crate::layers::{self, Biases, ModelTensors};

/// Resolves llama's tensors. Llama-3 style RoPE frequency factors and
/// mixture-of-experts layers change the math and are refused by name.
pub(crate) fn tensors(store: &WeightStore, hp: &HParams) -> Result<ModelTensors> {
    if store.get("rope_freqs.weight").is_some() {
        return Err(ModelError::Unsupported(
            "per-dimension RoPE frequency factors (rope_freqs.weight)".into(),
        ));
    }
    if store.get("blk.0.ffn_gate_inp.weight").is_some() {
        return Err(ModelError::Unsupported(
            "mixture-of-experts layers (blk.0.ffn_gate_inp.weight)".into(),
        ));
    }
    layers::resolve_tensors(store, hp, Biases::Optional)
}

/// The forward pass; returns logits `[n_vocab, n_out]`.
pub(crate) fn build(b: &mut GraphBuilder, hp: &HParams, t: &ModelTensors) -> GraphResult<NodeId> {
    layers::pre_norm_decoder(b, hp, t, RopeStyle::Normal)
}
