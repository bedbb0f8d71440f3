//! Phi-3, Phi-3.5 and Phi-4-mini: the llama decoder with fused tensors and
//! LongRoPE. Q, K and V come from one `attn_qkv` matrix and the FFN's gate
//! and up halves from one `ffn_up` of twice the FFN width (gate first);
//! both are split into row ranges at load, so the shared blocks read them
//! as separate matrices without copying a byte. RoPE is NeoX style over
//! `rope.dimension_count` dimensions (partial for Phi-4-mini), with
//! per-pair frequency factors where the file has them: the short ones
//! while the context fits the original training window
//! (`rope.scaling.original_context_length`), the long ones beyond it, and
//! `rope.scaling.attn_factor` on every cosine and sine (read for every
//! family, see [`HParams::rope_attn_factor`]), as llama.cpp applies them. Q is scaled by `1/sqrt(head_dim)` on its own after RoPE.
//! The sliding window some files declare is not applied: llama.cpp turned
//! it off for this architecture, and its outputs are the reference.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightId};

use crate::error::{ModelError, Result};
use crate::hparams::{HParams, Keys};
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors, Resolver};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family { name: "phi3", load };

#[derive(Debug)]
struct Phi3 {
    t: ModelTensors,
    rope: LongRope,
}

/// LongRoPE's tensors and numbers.
#[derive(Debug)]
struct LongRope {
    /// `rope_factors_short.weight`, `[n_rot / 2]`.
    short: Option<WeightId>,
    /// `rope_factors_long.weight`, `[n_rot / 2]`.
    long: Option<WeightId>,
    /// The context the short factors are for.
    n_ctx_orig: usize,
}

impl LongRope {
    /// The factors for a context of `n_ctx` cells (llama.cpp's choice:
    /// long only past the original window).
    fn factors(&self, n_ctx: usize) -> Option<WeightId> {
        if n_ctx > self.n_ctx_orig {
            self.long
        } else {
            self.short
        }
    }
}

fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let hp = cx.hparams;
    if cx.weights.get("blk.0.ffn_gate_inp.weight").is_some() {
        return Err(ModelError::Unsupported(
            "mixture-of-experts layers in a phi3 file (blk.0.ffn_gate_inp.weight)".into(),
        ));
    }
    for l in 0..hp.n_layer {
        split_fused(cx, l)?;
    }
    let t = layers::resolve_tensors(cx.weights, hp, Biases::Optional, FfnShape::Dense)?;
    let r = Resolver { store: cx.weights };
    let half = [hp.n_rot / 2, 1];
    let k = Keys::new(cx.file, hp.arch);
    let rope = LongRope {
        short: r.optional("rope_factors_short.weight", half)?,
        long: r.optional("rope_factors_long.weight", half)?,
        n_ctx_orig: k
            .usize_opt("rope.scaling.original_context_length")?
            .unwrap_or(hp.n_ctx_train),
    };
    Ok(Box::new(Phi3 { t, rope }))
}

/// Splits layer `l`'s fused `attn_qkv` into Q, K and V, and a fused
/// `ffn_up` (one without an `ffn_gate` beside it) into gate and up, under
/// the names the shared resolver reads. Files with separate tensors are
/// left as they are.
fn split_fused(cx: &mut LoadCx, l: usize) -> Result<()> {
    let hp = cx.hparams;
    let (d, q, kv, ff) = (hp.n_embd, hp.q_width(), hp.kv_width(), hp.n_ff);
    let n = |s: &str| format!("blk.{l}.{s}");
    let r = Resolver { store: cx.weights };
    let qkv = r.optional(&n("attn_qkv.weight"), [d, q + 2 * kv])?;
    if cx.weights.get(&n("attn_qkv.bias")).is_some() {
        return Err(ModelError::Unsupported(format!(
            "a fused q/k/v bias ({})",
            n("attn_qkv.bias")
        )));
    }
    let up = match cx.weights.get(&n("ffn_gate.weight")) {
        Some(_) => None,
        None => r.optional(&n("ffn_up.weight"), [d, 2 * ff])?,
    };
    let (wq, wk, wv) = (n("attn_q.weight"), n("attn_k.weight"), n("attn_v.weight"));
    if let Some(id) = qkv {
        let parts = [
            (wq.as_str(), "q", q),
            (wk.as_str(), "k", kv),
            (wv.as_str(), "v", kv),
        ];
        cx.weights.split_rows(id, &parts)?;
    }
    let (gate, up_name) = (n("ffn_gate.weight"), n("ffn_up.weight"));
    if let Some(id) = up {
        let parts = [(gate.as_str(), "gate", ff), (up_name.as_str(), "up", ff)];
        cx.weights.split_rows(id, &parts)?;
    }
    Ok(())
}

impl Forward for Phi3 {
    fn tensors(&self) -> &ModelTensors {
        &self.t
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        let factors = self.rope.factors(b.params().compute.n_ctx as usize);
        let opts = AttnOptions {
            q_scale: Some(1.0 / (hp.head_dim as f32).sqrt()),
            rope_factors: factors,
            ..AttnOptions::plain(hp, RopeStyle::Neox)
        };
        layers::pre_norm_decoder(b, hp, &self.t, |_| opts)
    }
}
