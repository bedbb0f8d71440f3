//! Gemma 3: embeddings scaled by `sqrt(d_model)`, per-head RMS norms on Q
//! and K, RMS norms both before and after attention and the FFN (the
//! post-norms apply to the block's output before the residual add), a
//! GeGLU FFN, tied embeddings, and interleaved attention: five local
//! layers with a sliding window and RoPE base 10000, then one global
//! layer with full attention and the file's `rope.freq_base`. The norm
//! weights are used as the GGUF stores them (llama.cpp's converter has
//! already folded gemma's `1 + w` into them). A file that sets
//! `final_logit_softcapping` gets its logits capped to `c * tanh(x / c)`.

use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, RopeStyle, WeightId};

use crate::error::Result;
use crate::hparams::{HParams, Keys};
use crate::layers::{self, AttnOptions, Biases, FfnShape, ModelTensors, Resolver};
use crate::registry::{Family, Forward, LoadCx};

/// The registry entry.
pub(crate) const FAMILY: Family = Family {
    name: "gemma3",
    load,
};

/// RoPE base of the local (sliding-window) layers, fixed by the
/// architecture rather than stored in the file; their positions are never
/// scaled (the file's RoPE scaling applies to the global layers only).
const LOCAL_ROPE_BASE: f32 = 10_000.0;
/// One global layer in every this many, the last of each group, unless
/// the file says otherwise (`attention.sliding_window_pattern`).
const DEFAULT_PATTERN: usize = 6;

/// Gemma 3's own hyperparameters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Gemma3Params {
    /// Positions a local layer's query sees, its own included.
    sliding_window: u32,
    /// Layer `l` is global when `l % pattern == pattern - 1`.
    pattern: usize,
    /// Multiplier of Q before attention.
    q_scale: f32,
    /// `final_logit_softcapping`: logits become `c * tanh(logits / c)`.
    softcap: Option<f32>,
}

/// The extra tensors of one gemma3 block.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Gemma3Layer {
    qk_norm: (WeightId, WeightId),
    post_attention_norm: WeightId,
    post_ffw_norm: WeightId,
}

#[derive(Debug)]
struct Gemma3 {
    t: ModelTensors,
    extra: Vec<Gemma3Layer>,
    p: Gemma3Params,
}

fn params(cx: &LoadCx) -> Result<Gemma3Params> {
    let hp = cx.hparams;
    let k = Keys::new(cx.file, hp.arch);
    let window = k.usize_req("attention.sliding_window")?;
    let sliding_window = u32::try_from(window)
        .ok()
        .filter(|&w| w > 0)
        .ok_or_else(|| {
            k.bad(
                "attention.sliding_window",
                format!("{window} is not a window size"),
            )
        })?;
    let pattern = k
        .usize_opt("attention.sliding_window_pattern")?
        .unwrap_or(DEFAULT_PATTERN);
    if pattern == 0 {
        return Err(k.bad("attention.sliding_window_pattern", "must be at least 1"));
    }
    // llama.cpp's rule: the 27B model (62 layers) scales by the model
    // width per head, every other size by the key head size
    // (gemma's query_pre_attn_scalar).
    let scale_dim = if hp.n_layer == 62 {
        hp.n_embd / hp.n_head
    } else {
        hp.head_dim
    };
    // llama.cpp's converter writes no soft-capping for Gemma 3 (its
    // Hugging Face config has none), and llama.cpp's sliding-window graph
    // would ignore it; a file that does set it asks for the model's own
    // definition, which caps the logits.
    let softcap = k.f32_opt("final_logit_softcapping")?;
    if let Some(c) = softcap {
        if !(c.is_finite() && c > 0.0) {
            return Err(k.bad("final_logit_softcapping", format!("{c} is not positive")));
        }
    }
    Ok(Gemma3Params {
        sliding_window,
        pattern,
        q_scale: 1.0 / (scale_dim as f32).sqrt(),
        softcap,
    })
}

fn load(cx: &mut LoadCx) -> Result<Box<dyn Forward>> {
    let hp = cx.hparams;
    let p = params(cx)?;
    let t = layers::resolve_tensors(cx.weights, hp, Biases::Optional, FfnShape::Dense)?;
    let qk = layers::resolve_qk_norms(cx.weights, hp)?;
    let r = Resolver { store: cx.weights };
    let d = hp.n_embd;
    let extra = qk
        .into_iter()
        .enumerate()
        .map(|(l, qk_norm)| {
            Ok(Gemma3Layer {
                qk_norm,
                post_attention_norm: r
                    .required(&format!("blk.{l}.post_attention_norm.weight"), [d, 1])?,
                post_ffw_norm: r.required(&format!("blk.{l}.post_ffw_norm.weight"), [d, 1])?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Box::new(Gemma3 { t, extra, p }))
}

impl Gemma3 {
    /// The attention options of layer `l`: local or global.
    fn attn_options(&self, hp: &HParams, l: usize) -> AttnOptions {
        let global = l % self.p.pattern == self.p.pattern - 1;
        let (freq_base, freq_scale, sliding_window) = if global {
            (hp.rope_freq_base, hp.rope_freq_scale, 0)
        } else {
            (LOCAL_ROPE_BASE, 1.0, self.p.sliding_window)
        };
        AttnOptions {
            freq_base,
            freq_scale,
            qk_norm: Some(self.extra[l].qk_norm),
            q_scale: Some(self.p.q_scale),
            sliding_window,
            ..AttnOptions::plain(hp, RopeStyle::Neox)
        }
    }
}

impl Forward for Gemma3 {
    fn tensors(&self) -> &ModelTensors {
        &self.t
    }

    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId> {
        let t = &self.t;
        let embd = layers::embed(b, t)?;
        let mut x = b.scale("inp_scaled", embd, (hp.n_embd as f32).sqrt())?;
        let last = t.layers.len() - 1;
        for (l, (lt, ex)) in t.layers.iter().zip(&self.extra).enumerate() {
            let n = |s: &str| format!("blk.{l}.{s}");
            let h = layers::norm(b, &n("attn_norm"), x, lt.attn_norm, hp.rms_eps)?;
            let opts = self.attn_options(hp, l);
            let mut a = layers::attention_block(b, hp, l, lt, h, &opts)?;
            if l == last {
                a = b.select_outputs("attn_out_rows", a)?;
                x = b.select_outputs("out_rows", x)?;
            }
            let a = layers::norm(
                b,
                &n("post_attention_norm"),
                a,
                ex.post_attention_norm,
                hp.rms_eps,
            )?;
            let sa = b.add(n("attn_residual"), a, x)?;
            let h = layers::norm(b, &n("ffn_norm"), sa, lt.ffn_norm, hp.rms_eps)?;
            let f = layers::ffn_geglu(b, l, lt, h)?;
            let f = layers::norm(b, &n("post_ffw_norm"), f, ex.post_ffw_norm, hp.rms_eps)?;
            x = b.add(n("ffn_residual"), f, sa)?;
        }
        layers::output_head(b, hp, t, x, self.p.softcap)
    }
}
