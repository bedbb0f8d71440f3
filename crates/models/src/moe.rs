//! The routed FFN shared by the mixture-of-experts families: the expert
//! counts read from the GGUF keys, the router and the stacked expert
//! tensors resolved with their shapes, and the graph of one block's FFN
//! (llama.cpp's `build_moe_ffn`): router logits, the gating, then one
//! [`minfer_graph::Op::MoeFfn`] node.

use minfer_graph::{
    Gating, GraphBuilder, MoeAct, MoeParams, NodeId, Result as GraphResult, WeightId, WeightStore,
};

use crate::error::Result;
use crate::hparams::Keys;
use crate::resolve::Resolver;

/// How many experts a layer has, how many each row uses, and their width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertShape {
    /// `{arch}.expert_count`.
    pub n_expert: usize,
    /// `{arch}.expert_used_count`.
    pub n_used: usize,
    /// `{arch}.expert_feed_forward_length`: one expert's hidden width.
    pub n_ff: usize,
}

impl ExpertShape {
    /// Reads the three keys of the architecture.
    ///
    /// # Errors
    /// A missing key; counts that cannot work (no experts, more used than
    /// there are, or more than the CPU op takes per row).
    pub(crate) fn read(k: &Keys) -> Result<Self> {
        let s = ExpertShape {
            n_expert: k.usize_req("expert_count")?,
            n_used: k.usize_req("expert_used_count")?,
            n_ff: k.usize_req("expert_feed_forward_length")?,
        };
        if s.n_used == 0 || s.n_used > s.n_expert || s.n_used > MoeParams::MAX_USED || s.n_ff == 0 {
            return Err(k.bad(
                "expert_used_count",
                format!(
                    "{} of {} experts of width {} (at most {} per row)",
                    s.n_used,
                    s.n_expert,
                    s.n_ff,
                    MoeParams::MAX_USED
                ),
            ));
        }
        Ok(s)
    }
}

/// One block's router and experts.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpertTensors {
    /// `ffn_gate_inp.weight`: `[n_embd, n_expert]`, the router.
    pub router: WeightId,
    /// `ffn_up_exps.weight`: `[n_embd, n_ff, n_expert]`.
    pub up: WeightId,
    /// `ffn_gate_exps.weight`: as `up`.
    pub gate: WeightId,
    /// `ffn_down_exps.weight`: `[n_ff, n_embd, n_expert]`.
    pub down: WeightId,
    /// Their shape.
    pub shape: ExpertShape,
    /// How the router's output weighs them.
    pub rule: RoutingRule,
    /// With [`RoutingRule::biases`]: `ffn_gate_inp.bias` (`[n_expert]`)
    /// and the per-expert biases of up, gate and down
    /// (`ffn_{up,gate,down}_exps.bias`: `[n_ff, n_expert]` twice, then
    /// `[n_embd, n_expert]`).
    pub biases: Option<ExpertBiases>,
}

/// The biases of a routed FFN that has them (gpt-oss).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertBiases {
    /// Added to the router's logits.
    pub router: WeightId,
    /// Added to each chosen expert's up, gate and down products.
    pub experts: [WeightId; 3],
}

impl ExpertTensors {
    /// Tells the store that the three expert tensors stack `n_expert`
    /// matrices each, read one at a time.
    pub fn mark_stacked(&self, store: &mut WeightStore) {
        for id in [self.up, self.gate, self.down] {
            store.set_stacked(id, self.shape.n_expert);
        }
    }
}

/// Block `l`'s router and experts, shapes checked (the store folds a 3-D
/// tensor's outer dimensions into rows: `n_ff * n_expert` rows for up and
/// gate).
pub(crate) fn resolve_experts(
    r: &Resolver,
    n_embd: usize,
    l: usize,
    s: ExpertShape,
    rule: RoutingRule,
) -> Result<ExpertTensors> {
    let n = |t: &str| format!("blk.{l}.{t}");
    let (d, ff, e) = (n_embd, s.n_ff, s.n_expert);
    let biases = match rule.biases {
        false => None,
        true => Some(ExpertBiases {
            router: r.required(&n("ffn_gate_inp.bias"), [e, 1])?,
            experts: [
                r.required(&n("ffn_up_exps.bias"), [ff, e])?,
                r.required(&n("ffn_gate_exps.bias"), [ff, e])?,
                r.required(&n("ffn_down_exps.bias"), [d, e])?,
            ],
        }),
    };
    Ok(ExpertTensors {
        biases,
        router: r.required(&n("ffn_gate_inp.weight"), [d, e])?,
        up: r.required(&n("ffn_up_exps.weight"), [d, ff * e])?,
        gate: r.required(&n("ffn_gate_exps.weight"), [d, ff * e])?,
        down: r.required(&n("ffn_down_exps.weight"), [ff, d * e])?,
        shape: s,
        rule,
    })
}

/// How a family turns router logits into expert weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoutingRule {
    /// Softmax over every expert before the choice, or over the chosen.
    pub gating: Gating,
    /// Divide the chosen weights by their sum.
    pub norm_weights: bool,
    /// Multiply them by this afterwards (1: no change).
    pub weights_scale: f32,
    /// The experts' gated activation.
    pub act: MoeAct,
    /// Whether the router and the experts carry biases.
    pub biases: bool,
}

/// The routed FFN of block `l` on its normed input `h`.
pub fn ffn_moe(
    b: &mut GraphBuilder,
    l: usize,
    t: &ExpertTensors,
    h: NodeId,
) -> GraphResult<NodeId> {
    let rule = t.rule;
    let n = |s: &str| format!("blk.{l}.{s}");
    let router = b.weight(t.router);
    let mut logits = b.mat_mul(n("ffn_moe_logits"), router, h)?;
    if let Some(bias) = t.biases {
        let bias = b.weight(bias.router);
        logits = b.add(n("ffn_moe_logits_biased"), logits, bias)?;
    }
    let router = match rule.gating {
        Gating::Probs => b.softmax(n("ffn_moe_probs"), logits)?,
        Gating::SoftmaxChosen => logits,
    };
    let experts = [t.up, t.gate, t.down].map(|w| b.weight(w));
    let p = MoeParams {
        n_expert: t.shape.n_expert,
        n_used: t.shape.n_used,
        n_ff: t.shape.n_ff,
        gating: rule.gating,
        norm_weights: rule.norm_weights,
        weights_scale: rule.weights_scale,
        act: rule.act,
    };
    let biases = t.biases.map(|x| x.experts);
    b.moe_ffn_biased(n("ffn_moe_out"), h, router, experts, biases, p)
}
