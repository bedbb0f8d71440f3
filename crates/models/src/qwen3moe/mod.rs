//! Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): the qwen3 decoder
//! (per-head Q/K RMS norms, NeoX RoPE) with a routed FFN in every block:
//! a softmax over all experts' router logits, the `expert_used_count`
//! largest chosen and their weights renormalised to sum to one (llama.cpp
//! passes `norm_w = true` for this architecture).

use minfer_graph::{Gating, GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightId};

use crate::error::Result;
use crate::hparams::{HParams, Keys};
use crate::layers::{self, AttnOptions, Biases, FfnShape, FfnTensors, ModelTensors};
use crate::moe::{self, ExpertShape, RoutingRule};
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
    let t = layers::resolve_tensors(cx.weights, hp, Biases::Optional, FfnShape::Experts(shape))?;
    let qk_norms = layers::resolve_qk_norms(cx.weights, hp)?;
    Ok(Box::new(Qwen3Moe { t, qk_norms }))
}

impl Forward for Qwen3Moe {
    fn tensors(&self) -> &ModelTensors {
        &self.t
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        let t = &self.t;
        let mut x = layers::embed(b, t)?;
        let last = t.layers.len() - 1;
        for (l, lt) in t.layers.iter().enumerate() {
            let n = |s: &str| format!("blk.{l}.{s}");
            let opts = AttnOptions {
                qk_norm: Some(self.qk_norms[l]),
                ..AttnOptions::plain(hp, RopeStyle::Neox)
            };
            let h = layers::norm(b, &n("attn_norm"), x, lt.attn_norm, hp.rms_eps)?;
            let a = layers::attention_block(b, hp, l, lt, h, &opts)?;
            x = b.add(n("attn_residual"), x, a)?;
            if l == last {
                x = b.select_outputs("out_rows", x)?;
            }
            let h = layers::norm(b, &n("ffn_norm"), x, lt.ffn_norm, hp.rms_eps)?;
            let FfnTensors::Experts(e) = &lt.ffn else {
                // `load` resolves experts for every block.
                return Err(minfer_graph::GraphError::Shape {
                    node: n("ffn"),
                    op: "moe_ffn",
                    msg: "the block has no routed experts".into(),
                });
            };
            let f = moe::ffn_moe(b, l, e, h, ROUTING)?;
            x = b.add(n("ffn_residual"), x, f)?;
        }
        layers::output_head(b, hp, t, x, None)
    }
}
