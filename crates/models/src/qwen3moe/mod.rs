//! Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): the qwen3 decoder
//! (per-head Q/K RMS norms, NeoX RoPE) with a routed FFN in every block:
//! a softmax over all experts' router logits, the `expert_used_count`
//! largest chosen and their weights renormalised to sum to one (llama.cpp
//! passes `norm_w = true` for this architecture).

use minfer_graph::{Gating, GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightId};

use crate::error::Result;
use crate::hparams::{HParams, Keys};
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors};
use crate::moe::{ExpertShape, RoutingRule};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "qwen3moe",
    load,
};

/// Qwen3-MoE's routing: softmax over all experts, top-k, renormalised.
const ROUTING: RoutingRule = RoutingRule {
    gating: Gating::Probs,
    norm_weights: true,
    weights_scale: 1.0,
};

#[derive(Debug)]
struct Qwen3Moe {
    t: ModelTensors,
    /// Per layer: `(attn_q_norm, attn_k_norm)`, `[head_dim]` each.
    qk_norms: Vec<(WeightId, WeightId)>,
}

fn load(cx: &LoadCx) -> Result<Box<dyn Forward>> {
    let hp = cx.hparams;
    let shape = ExpertShape::read(&Keys::new(cx.file, hp.arch))?;
    let t = layers::resolve_tensors(
        cx.weights,
        hp,
        Biases::Optional,
        FfnShape::Experts(shape, ROUTING),
    )?;
    let qk_norms = layers::resolve_qk_norms(cx.weights, hp)?;
    Ok(Box::new(Qwen3Moe { t, qk_norms }))
}

impl Forward for Qwen3Moe {
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
