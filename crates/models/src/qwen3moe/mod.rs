//! Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): the qwen3 decoder
//! (per-head Q/K RMS norms, NeoX RoPE) with a routed FFN in every block:
//! a softmax over all experts' router logits, the `expert_used_count`
//! largest chosen and their weights renormalised to sum to one (llama.cpp
//! passes `norm_w = true` for this architecture). Everything but the FFN
//! is qwen3's, so the loader is qwen3's with the experts' shape.

use minfer_graph::{Gating, MoeAct};

use crate::error::Result;
use crate::hparams::Keys;
use crate::layers::FfnShape;
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
    act: MoeAct::SwiGlu,
    biases: false,
};

fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let shape = ExpertShape::read(&Keys::new(cx.file, cx.hparams.arch))?;
    crate::qwen3::load_with_ffn(cx, FfnShape::Experts(shape, ROUTING))
}
