//! gpt-oss (gpt-oss-20b, gpt-oss-120b): a pre-norm decoder whose blocks
//! are all routed experts. Attention has biases on Q, K, V and the output
//! projection, one learned sink logit per head (a softmax term with no
//! value), NeoX RoPE under YaRN scaling, and alternates a sliding window
//! (`attention.sliding_window`, the even layers under llama.cpp's default
//! pattern of 2) with full attention. The FFN, after the norm gpt-oss calls
//! `post_attention_norm`, routes each row by a softmax over its chosen
//! router logits (router and experts with biases) through experts
//! activated by the clamped SwiGLU (`swiglu_oai`, alpha 1.702, limit 7),
//! stored as MXFP4 in the released files.

use minfer_graph::{
    Gating, GraphBuilder, MoeAct, NodeId, Result as GraphResult, RopeStyle, WeightId,
};

use crate::error::Result;
use crate::hparams::{HParams, Keys};
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors, Resolver};
use crate::moe::{ExpertShape, RoutingRule};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "gpt-oss",
    load,
};

/// gpt-oss's routing: top-k of the router's logits, a softmax over those,
/// no renormalisation; biases everywhere; the clamped SwiGLU.
const ROUTING: RoutingRule = RoutingRule {
    gating: Gating::SoftmaxChosen,
    norm_weights: false,
    weights_scale: 1.0,
    act: MoeAct::SwiGluOai {
        alpha: 1.702,
        limit: 7.0,
    },
    biases: true,
};

#[derive(Debug)]
struct GptOss {
    t: ModelTensors,
    /// Per layer, `attn_sinks.weight` (`[n_head]`).
    sinks: Vec<WeightId>,
    /// Per layer, the sliding window (0 for full attention).
    windows: Vec<u32>,
    /// RoPE base of the sliding-window layers.
    freq_base_swa: f32,
}

fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let hp = cx.hparams;
    let k = Keys::new(cx.file, hp.arch);
    let shape = ExpertShape::read(&k)?;
    let ffn = FfnShape::Experts(shape, ROUTING);
    let t = layers::resolve_tensors_named(
        cx.weights,
        hp,
        Biases::Required,
        ffn,
        "post_attention_norm.weight",
    )?;
    let r = Resolver { store: cx.weights };
    let sinks = (0..hp.n_layer)
        .map(|l| r.required(&format!("blk.{l}.attn_sinks.weight"), [hp.n_head, 1]))
        .collect::<Result<Vec<_>>>()?;
    let window = k.usize_req("attention.sliding_window")?;
    let window = u32::try_from(window)
        .ok()
        .filter(|&w| w > 0)
        .ok_or_else(|| {
            k.bad(
                "attention.sliding_window",
                format!("{window} is not a window"),
            )
        })?;
    let pattern = k
        .usize_opt("attention.sliding_window_pattern")?
        .unwrap_or(2);
    // llama.cpp's pattern: layer l slides when l % pattern < pattern - 1
    // (0: every layer).
    let windows = (0..hp.n_layer)
        .map(|l| match pattern == 0 || l % pattern < pattern - 1 {
            true => window,
            false => 0,
        })
        .collect();
    let freq_base_swa = k
        .f32_opt("rope.freq_base_swa")?
        .unwrap_or(hp.rope_freq_base);
    Ok(Box::new(GptOss {
        t,
        sinks,
        windows,
        freq_base_swa,
    }))
}

impl Forward for GptOss {
    fn tensors(&self) -> &ModelTensors {
        &self.t
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        layers::pre_norm_decoder(b, hp, &self.t, |l| AttnOptions {
            sliding_window: self.windows[l],
            freq_base: match self.windows[l] {
                0 => hp.rope_freq_base,
                _ => self.freq_base_swa,
            },
            sinks: Some(self.sinks[l]),
            ..AttnOptions::plain(hp, RopeStyle::Neox)
        })
    }
}
