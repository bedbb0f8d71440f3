//! Qwen3: the qwen2 decoder without q/k/v biases and with an RMS norm on
//! each head of Q and K before RoPE (NeoX style). Head size comes from
//! `attention.key_length`, so it need not be `d_model / n_head`. Without
//! `output.weight` the LM head is the token embeddings.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightId};

use crate::error::Result;
use crate::hparams::HParams;
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "qwen3",
    load,
};

#[derive(Debug)]
struct Qwen3 {
    t: ModelTensors,
    /// Per layer: `(attn_q_norm, attn_k_norm)`, `[head_dim]` each.
    qk_norms: Vec<(WeightId, WeightId)>,
}

fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    load_with_ffn(cx, FfnShape::Dense)
}

/// The qwen3 decoder with the FFN `ffn` in every block: dense here, routed
/// experts for qwen3moe, which is this architecture with experts.
pub(crate) fn load_with_ffn(cx: &LoadCx, ffn: FfnShape) -> Result<Box<dyn Forward>> {
    let hp = cx.hparams;
    let t = layers::resolve_tensors(cx.weights, hp, Biases::Optional, ffn)?;
    let qk_norms = layers::resolve_qk_norms(cx.weights, hp)?;
    Ok(Box::new(Qwen3 { t, qk_norms }))
}

impl Forward for Qwen3 {
    fn tensors(&self) -> &ModelTensors {
        &self.t
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        layers::pre_norm_decoder(b, hp, &self.t, |l| AttnOptions {
            qk_norm: Some(self.qk_norms[l]),
            ..AttnOptions::plain(hp, RopeStyle::Neox)
        })
    }
}
