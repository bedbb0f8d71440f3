//! Pieces shared by the llama-family architectures: resolving tensors by
//! name once at load time, and the building blocks of a forward pass (RMS
//! norm with its weight, per-head Q/K norms, the attention block with its
//! options, the SwiGLU and GeGLU FFNs), each with llama.cpp's order of
//! operations so the rounding matches.

use minfer_graph::{
    AttnParams, GraphBuilder, KvKind, NodeId, OutputKind, Result as GraphResult, RopeParams,
    RopeStyle, WeightId, WeightStore, Yarn,
};

use crate::error::Result;
use crate::hparams::HParams;
pub use crate::resolve::Resolver;

/// The tensors of one transformer block.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerTensors {
    /// `attn_norm.weight`: RMS norm weight before attention.
    pub attn_norm: WeightId,
    /// `attn_q.weight`, `attn_k.weight`, `attn_v.weight`: projections.
    pub wq: WeightId,
    /// See `wq`.
    pub wk: WeightId,
    /// See `wq`.
    pub wv: WeightId,
    /// `attn_q.bias`, `attn_k.bias`, `attn_v.bias`, where the model has them.
    pub bq: Option<WeightId>,
    /// See `bq`.
    pub bk: Option<WeightId>,
    /// See `bq`.
    pub bv: Option<WeightId>,
    /// `attn_output.weight`: the attention output projection.
    pub wo: WeightId,
    /// `attn_output.bias`, where the model has it (gpt-oss).
    pub bo: Option<WeightId>,
    /// `ffn_norm.weight`: RMS norm weight before the FFN.
    pub ffn_norm: WeightId,
    /// The FFN's matrices.
    pub ffn: FfnTensors,
}

/// The matrices of a block's FFN.
#[derive(Clone, Debug, PartialEq)]
pub enum FfnTensors {
    /// `ffn_gate.weight`, `ffn_up.weight`, `ffn_down.weight`: one gated
    /// FFN.
    Dense {
        /// `ffn_gate.weight`.
        gate: WeightId,
        /// `ffn_up.weight`.
        up: WeightId,
        /// `ffn_down.weight`.
        down: WeightId,
    },
    /// A router and stacked experts (see [`crate::moe`]).
    Experts(crate::moe::ExpertTensors),
}

/// Which FFN the blocks of a family have.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FfnShape {
    /// One gated FFN of `feed_forward_length`.
    Dense,
    /// Routed experts of this shape, routed by this rule.
    Experts(crate::moe::ExpertShape, crate::moe::RoutingRule),
}

/// Every tensor a llama-family forward pass reads, resolved to handles.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelTensors {
    /// `token_embd.weight`: one row per vocabulary entry.
    pub token_embd: WeightId,
    /// The blocks, in order.
    pub layers: Vec<LayerTensors>,
    /// `output_norm.weight`: the final RMS norm weight.
    pub output_norm: WeightId,
    /// The LM head: `output.weight`, or `token_embd.weight` when the
    /// embeddings are tied.
    pub output: WeightId,
}

/// Whether the q/k/v projections carry biases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Biases {
    /// Every layer has them (qwen2).
    Required,
    /// Used where present (llama: some fine-tunes add them).
    Optional,
}

/// Resolves the standard llama-family tensor set. A missing
/// `output.weight` means tied embeddings: the LM head is `token_embd`.
///
/// # Errors
/// [`ModelError::MissingTensor`] or [`ModelError::TensorShape`] naming the
/// first tensor at fault.
pub fn resolve_tensors(
    store: &WeightStore,
    hp: &HParams,
    biases: Biases,
    ffn: FfnShape,
) -> Result<ModelTensors> {
    resolve_tensors_named(store, hp, biases, ffn, "ffn_norm.weight")
}

/// [`resolve_tensors`] with the FFN's norm under another name (gpt-oss
/// calls it `post_attention_norm.weight`).
///
/// # Errors
/// As [`resolve_tensors`].
pub fn resolve_tensors_named(
    store: &WeightStore,
    hp: &HParams,
    biases: Biases,
    ffn: FfnShape,
    ffn_norm: &str,
) -> Result<ModelTensors> {
    let r = Resolver { store };
    let (d, q, kv, ff, vocab) = (hp.n_embd, hp.q_width(), hp.kv_width(), hp.n_ff, hp.n_vocab);
    let token_embd = r.required("token_embd.weight", [d, vocab])?;
    let mut layers = Vec::with_capacity(hp.n_layer);
    for l in 0..hp.n_layer {
        let n = |s: &str| format!("blk.{l}.{s}");
        let bias = |s: &str, len: usize| -> Result<Option<WeightId>> {
            match biases {
                Biases::Required => r.required(&n(s), [len, 1]).map(Some),
                Biases::Optional => r.optional(&n(s), [len, 1]),
            }
        };
        layers.push(LayerTensors {
            attn_norm: r.required(&n("attn_norm.weight"), [d, 1])?,
            wq: r.required(&n("attn_q.weight"), [d, q])?,
            wk: r.required(&n("attn_k.weight"), [d, kv])?,
            wv: r.required(&n("attn_v.weight"), [d, kv])?,
            bq: bias("attn_q.bias", q)?,
            bk: bias("attn_k.bias", kv)?,
            bv: bias("attn_v.bias", kv)?,
            wo: r.required(&n("attn_output.weight"), [q, d])?,
            bo: r.optional(&n("attn_output.bias"), [d, 1])?,
            ffn_norm: r.required(&n(ffn_norm), [d, 1])?,
            ffn: match ffn {
                FfnShape::Dense => FfnTensors::Dense {
                    gate: r.required(&n("ffn_gate.weight"), [d, ff])?,
                    up: r.required(&n("ffn_up.weight"), [d, ff])?,
                    down: r.required(&n("ffn_down.weight"), [ff, d])?,
                },
                FfnShape::Experts(shape, rule) => {
                    FfnTensors::Experts(crate::moe::resolve_experts(&r, d, l, shape, rule)?)
                }
            },
        });
    }
    let output_norm = r.required("output_norm.weight", [d, 1])?;
    let output = r
        .optional("output.weight", [d, vocab])?
        .unwrap_or(token_embd);
    Ok(ModelTensors {
        token_embd,
        layers,
        output_norm,
        output,
    })
}

/// Every layer's per-head Q and K norm weights (`blk.N.attn_q_norm.weight`,
/// `blk.N.attn_k_norm.weight`, `[head_dim]` each), for the families that
/// normalize heads before RoPE.
///
/// # Errors
/// [`ModelError::MissingTensor`] or [`ModelError::TensorShape`] naming the
/// first tensor at fault.
pub fn resolve_qk_norms(store: &WeightStore, hp: &HParams) -> Result<Vec<(WeightId, WeightId)>> {
    let r = Resolver { store };
    (0..hp.n_layer)
        .map(|l| {
            let q = r.required(&format!("blk.{l}.attn_q_norm.weight"), [hp.head_dim, 1])?;
            let k = r.required(&format!("blk.{l}.attn_k_norm.weight"), [hp.head_dim, 1])?;
            Ok((q, k))
        })
        .collect()
}

/// `rms_norm(x) * weight`, as llama.cpp's `build_norm` computes it.
pub fn norm(
    b: &mut GraphBuilder,
    name: &str,
    x: NodeId,
    weight: WeightId,
    eps: f32,
) -> GraphResult<NodeId> {
    let h = b.rms_norm(format!("{name}_rms"), x, eps)?;
    let w = b.weight(weight);
    b.mul(name, h, w)
}

/// `w × x (+ bias)`.
fn proj(
    b: &mut GraphBuilder,
    name: String,
    w: WeightId,
    bias: Option<WeightId>,
    x: NodeId,
) -> GraphResult<NodeId> {
    let w = b.weight(w);
    let y = b.mat_mul(name.clone(), w, x)?;
    match bias {
        Some(bias) => {
            let bias = b.weight(bias);
            b.add(format!("{name}_bias"), y, bias)
        }
        None => Ok(y),
    }
}

/// How a family's attention block differs from llama's: the RoPE (style
/// and base, which can differ per layer), RMS norms on each head of Q and
/// K, the attention scale and a sliding window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnOptions {
    /// How RoPE pairs dimensions.
    pub rope: RopeStyle,
    /// RoPE base frequency of this layer.
    pub freq_base: f32,
    /// RoPE position scale of this layer.
    pub freq_scale: f32,
    /// `(q_norm, k_norm)`: weights of the per-head RMS norms applied to Q
    /// and K before RoPE (qwen3, gemma3).
    pub qk_norm: Option<(WeightId, WeightId)>,
    /// Multiplier of `q·k` before the softmax. `None`: `1/sqrt(head_dim)`
    /// inside the attention op. `Some(s)`: Q is scaled by `s` as a node
    /// of its own first, then attention runs with scale 1 (llama.cpp's
    /// order for gemma).
    pub q_scale: Option<f32>,
    /// Keys a query sees: 0 for all of its window, `n` for the last `n`
    /// positions up to and including its own.
    pub sliding_window: u32,
    /// Per-pair RoPE frequency factors (`[n_rot / 2]`, F32), dividing
    /// each pair's angle (Phi's LongRoPE).
    pub rope_factors: Option<WeightId>,
    /// Factor on RoPE's cosines and sines (ggml's `attn_factor`).
    pub attn_factor: f32,
    /// YaRN's angle blend, for models trained with YaRN scaling.
    pub yarn: Option<Yarn>,
    /// Per-head sink logits (`[n_head]`, F32): a softmax term with no
    /// value (gpt-oss).
    pub sinks: Option<WeightId>,
}

impl AttnOptions {
    /// Llama's attention: RoPE of `style` at the model's base (with the
    /// file's YaRN scaling and magnitude factor, if any), no Q/K norms,
    /// scale `1/sqrt(head_dim)`, full causal window.
    pub fn plain(hp: &HParams, style: RopeStyle) -> Self {
        AttnOptions {
            rope: style,
            freq_base: hp.rope_freq_base,
            freq_scale: hp.rope_freq_scale,
            qk_norm: None,
            q_scale: None,
            sliding_window: 0,
            rope_factors: None,
            attn_factor: hp.rope_attn_factor,
            yarn: hp.rope_yarn,
            sinks: None,
        }
    }
}

/// RMS norm of each head of `x` (`[n_head * head_dim, rows]`) with the
/// per-head weight `weight` (`[head_dim]`).
pub fn head_norm(
    b: &mut GraphBuilder,
    name: &str,
    x: NodeId,
    n_head: usize,
    weight: WeightId,
    eps: f32,
) -> GraphResult<NodeId> {
    let [width, rows] = b.shape(x);
    let head_dim = width / n_head.max(1);
    let heads = b.reshape(format!("{name}_heads"), x, [head_dim, n_head * rows])?;
    let h = norm(b, name, heads, weight, eps)?;
    b.reshape(format!("{name}_rows"), h, [width, rows])
}

/// Self-attention of block `l` over its normed input `h`: Q/K/V
/// projections (with biases where the model has them), the per-head Q/K
/// norms the options name, RoPE on Q and K, K and V stored into the
/// layer's cache cells, attention, and the output projection. Returns the
/// block's contribution to the residual stream.
pub fn attention_block(
    b: &mut GraphBuilder,
    hp: &HParams,
    l: usize,
    t: &LayerTensors,
    h: NodeId,
    opts: &AttnOptions,
) -> GraphResult<NodeId> {
    let n = |s: &str| format!("blk.{l}.{s}");
    let mut q = proj(b, n("attn_q"), t.wq, t.bq, h)?;
    let mut k = proj(b, n("attn_k"), t.wk, t.bk, h)?;
    let v = proj(b, n("attn_v"), t.wv, t.bv, h)?;
    if let Some((qn, kn)) = opts.qk_norm {
        q = head_norm(b, &n("attn_q_norm"), q, hp.n_head, qn, hp.rms_eps)?;
        k = head_norm(b, &n("attn_k_norm"), k, hp.n_head_kv, kn, hp.rms_eps)?;
    }
    let rope = |n_head| RopeParams {
        style: opts.rope,
        n_head,
        head_dim: hp.head_dim,
        n_rot: hp.n_rot,
        freq_base: opts.freq_base,
        freq_scale: opts.freq_scale,
        attn_factor: opts.attn_factor,
        yarn: opts.yarn,
    };
    let f = opts.rope_factors;
    let mut q = b.rope_ext(n("q_rope"), q, f, rope(hp.n_head))?;
    let k = b.rope_ext(n("k_rope"), k, f, rope(hp.n_head_kv))?;
    let scale = match opts.q_scale {
        Some(s) => {
            q = b.scale(n("q_scaled"), q, s)?;
            1.0
        }
        None => 1.0 / (hp.head_dim as f32).sqrt(),
    };
    let k_stored = b.kv_store(n("k_store"), k, l, KvKind::K)?;
    let v_stored = b.kv_store(n("v_store"), v, l, KvKind::V)?;
    let a = b.attention_with_sinks(
        n("attn"),
        q,
        k_stored,
        v_stored,
        opts.sinks,
        AttnParams {
            layer: l,
            n_head: hp.n_head,
            n_head_kv: hp.n_head_kv,
            head_dim: hp.head_dim,
            scale,
            sliding_window: opts.sliding_window,
        },
    )?;
    proj(b, n("attn_output"), t.wo, t.bo, a)
}

/// A gated FFN of block `l` on its normed input `h`:
/// `down × (act(gate × h, up × h))`, `act` building the gate's activation
/// times `up` from the two projections.
fn ffn_gated(
    b: &mut GraphBuilder,
    l: usize,
    t: &LayerTensors,
    h: NodeId,
    act: impl FnOnce(&mut GraphBuilder, NodeId, NodeId) -> GraphResult<NodeId>,
) -> GraphResult<NodeId> {
    let n = |s: &str| format!("blk.{l}.{s}");
    let FfnTensors::Dense {
        gate: w_gate,
        up: w_up,
        down: w_down,
    } = t.ffn
    else {
        // A family resolves the FFN it builds; this is a wiring error.
        return Err(minfer_graph::GraphError::Shape {
            node: n("ffn"),
            op: "ffn",
            msg: "a dense FFN was asked of a block with routed experts".into(),
        });
    };
    let up = proj(b, n("ffn_up"), w_up, None, h)?;
    let gate = proj(b, n("ffn_gate"), w_gate, None, h)?;
    let act = act(b, gate, up)?;
    let down = b.weight(w_down);
    b.mat_mul(n("ffn_down"), down, act)
}

/// The SwiGLU FFN of block `l` on its normed input `h`:
/// `down × (silu(gate × h) * (up × h))`. Built as `Silu` then `Mul` so
/// the fusion toggle decides whether it runs as one `SwiGlu` node.
pub fn ffn_swiglu(
    b: &mut GraphBuilder,
    l: usize,
    t: &LayerTensors,
    h: NodeId,
) -> GraphResult<NodeId> {
    ffn_gated(b, l, t, h, |b, gate, up| {
        let gate = b.silu(format!("blk.{l}.ffn_silu"), gate)?;
        b.mul(format!("blk.{l}.ffn_act"), gate, up)
    })
}

/// The GeGLU FFN of block `l` on its normed input `h`:
/// `down × (gelu(gate × h) * (up × h))`, GELU with the tanh approximation
/// (gemma).
pub fn ffn_geglu(
    b: &mut GraphBuilder,
    l: usize,
    t: &LayerTensors,
    h: NodeId,
) -> GraphResult<NodeId> {
    ffn_gated(b, l, t, h, |b, gate, up| {
        b.geglu(format!("blk.{l}.ffn_geglu"), gate, up)
    })
}

/// The pre-norm decoder stack shared by the llama family: per layer,
/// RMS norm → attention (with the options `attn` gives for the layer) →
/// residual, RMS norm → the block's FFN ([`ffn_block`]) → residual; then
/// [`output_head`]. The last layer's FFN runs only on the rows whose output
/// is wanted (llama.cpp makes the same cut). Architectures differ in their
/// attention options and in which tensors they resolve.
pub fn pre_norm_decoder(
    b: &mut GraphBuilder,
    hp: &HParams,
    t: &ModelTensors,
    attn: impl Fn(usize) -> AttnOptions,
) -> GraphResult<NodeId> {
    let mut x = embed(b, t)?;
    let last = t.layers.len() - 1;
    for (l, lt) in t.layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{l}.{s}");
        let h = norm(b, &n("attn_norm"), x, lt.attn_norm, hp.rms_eps)?;
        let a = attention_block(b, hp, l, lt, h, &attn(l))?;
        x = b.add(n("attn_residual"), x, a)?;
        if l == last {
            x = b.select_outputs("out_rows", x)?;
        }
        let h = norm(b, &n("ffn_norm"), x, lt.ffn_norm, hp.rms_eps)?;
        let f = ffn_block(b, l, lt, h)?;
        x = b.add(n("ffn_residual"), x, f)?;
    }
    output_head(b, hp, t, x, None)
}

/// Block `l`'s FFN on its normed input `h`: the SwiGLU FFN, or the routed
/// experts with the routing rule the family resolved them with.
pub fn ffn_block(
    b: &mut GraphBuilder,
    l: usize,
    t: &LayerTensors,
    h: NodeId,
) -> GraphResult<NodeId> {
    match &t.ffn {
        FfnTensors::Dense { .. } => ffn_swiglu(b, l, t, h),
        FfnTensors::Experts(e) => crate::moe::ffn_moe(b, l, e, h),
    }
}

/// The token embeddings of the step's tokens: `[n_embd, n_tokens]`.
pub fn embed(b: &mut GraphBuilder, t: &ModelTensors) -> GraphResult<NodeId> {
    let ids = b.input(minfer_graph::InputKind::TokenIds);
    let embd = b.weight(t.token_embd);
    b.get_rows("inp_embd", embd, ids)
}

/// The end of every architecture's graph, on the rows of `x` whose output
/// is wanted: the final norm, then by the params' [`OutputKind`] either
/// those normed hidden states, `[n_embd, rows]` (embeddings, as llama.cpp
/// takes them for decoder models: after the output norm, before the LM
/// head), or the LM head's logits, `[n_vocab, rows]`, soft-capped to
/// `c * tanh(logits / c)` when `softcap` is `Some(c)`.
pub fn output_head(
    b: &mut GraphBuilder,
    hp: &HParams,
    t: &ModelTensors,
    x: NodeId,
    softcap: Option<f32>,
) -> GraphResult<NodeId> {
    let h = norm(b, "output_norm", x, t.output_norm, hp.rms_eps)?;
    if b.params().output == OutputKind::Hidden {
        return Ok(h);
    }
    let head = b.weight(t.output);
    let logits = b.mat_mul("logits", head, h)?;
    match softcap {
        // ggml's order: scale down, tanh, scale up.
        Some(c) => {
            let l = b.scale("logits_softcap_in", logits, 1.0 / c)?;
            let l = b.tanh("logits_softcap_tanh", l)?;
            b.scale("logits_softcapped", l, c)
        }
        None => Ok(logits),
    }
}
