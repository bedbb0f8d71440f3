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
    let mut x = layers::embed(b, t)?;
    let last = t.layers.len() - 1;
    for (l, lt) in t.layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{l}.{s}");
        let h = layers::norm(b, &n("attn_norm"), x, lt.attn_norm, hp.rms_eps)?;
        let a = layers::attention_block(b, hp, l, lt, h, RopeStyle::Neox)?;
        x = b.add(n("attn_residual"), x, a)?;
        if l == last {
            // Rows whose logits nobody wants stop here (llama.cpp's cut).
            x = b.select_outputs("out_rows", x)?;
        }
        let h = layers::norm(b, &n("ffn_norm"), x, lt.ffn_norm, hp.rms_eps)?;
        let f = layers::ffn_swiglu(b, l, lt, h)?;
        x = b.add(n("ffn_residual"), x, f)?;
    }
    layers::lm_head(b, hp, t, x)
}
