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
    let mut x = layers::embed(b, t)?;
    let last = t.layers.len() - 1;
    for (l, lt) in t.layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{l}.{s}");
        let h = layers::norm(b, &n("attn_norm"), x, lt.attn_norm, hp.rms_eps)?;
        let a = layers::attention_block(b, hp, l, lt, h, RopeStyle::Normal)?;
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
