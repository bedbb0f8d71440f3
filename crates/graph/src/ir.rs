//! The graph IR: a closed set of operations with typed parameters, and
//! nodes that carry their shape, element type, sources and a name.
//!
//! Every activation is 2-D in ggml order: `ne0` elements per row (the
//! contiguous dimension), `ne1` rows. Attention heads are packed along a
//! row (`n_head * head_dim`), tokens along rows, which is all the llama
//! family needs.

use crate::types::WeightId;

/// Index of a node in its graph's node list.
pub type NodeId = usize;

/// Element type of an activation buffer. Integers are never smuggled
/// through `f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit floats: activations.
    F32,
    /// 32-bit signed integers: token ids, positions, cells, row ids.
    I32,
}

/// `[ne0, ne1]`: elements per row, rows.
pub type Shape = [usize; 2];

/// Data that enters the graph each step. None of it is part of the
/// graph's identity: it is filled into input buffers after the reuse check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// Token ids, `[n_tokens]`.
    TokenIds,
    /// Absolute positions, `[n_tokens]`.
    Positions,
    /// KV cell each token writes its K/V into, `[n_tokens]`.
    KvCells,
    /// Start of each query's window in `WindowCells`, `[n_tokens + 1]`.
    WindowOffsets,
    /// The cells each query attends to, concatenated; capacity
    /// `[n_tokens * n_ctx]`, only the prefix named by the offsets is read.
    WindowCells,
    /// Rows whose logits are wanted, `[n_out]` (only when `n_out < n_tokens`).
    OutIds,
    /// The position of each cell of `WindowCells` (parallel to it), read
    /// only by sliding-window attention.
    WindowPositions,
}

impl InputKind {
    /// Every input kind, in a fixed order.
    pub const ALL: [InputKind; 7] = [
        InputKind::TokenIds,
        InputKind::Positions,
        InputKind::KvCells,
        InputKind::WindowOffsets,
        InputKind::WindowCells,
        InputKind::OutIds,
        InputKind::WindowPositions,
    ];
}

/// How RoPE pairs the dimensions it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` (llama).
    Normal,
    /// Halves `(i, i + n_rot/2)` (qwen2, GPT-NeoX).
    Neox,
}

/// Rotary position embedding parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// How the rotated dimensions are paired.
    pub style: RopeStyle,
    /// Number of heads packed in a row.
    pub n_head: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Rotated dimensions per head (partial rotary when `< head_dim`).
    pub n_rot: usize,
    /// Base of the rotation frequencies (`rope.freq_base`, often 10000).
    pub freq_base: f32,
    /// Factor on every position's angle (linear RoPE scaling; 1 for none).
    pub freq_scale: f32,
    /// Factor on every cosine and sine (ggml's `attn_factor`, the
    /// magnitude correction of LongRoPE and YaRN; 1 for none).
    pub attn_factor: f32,
    /// YaRN's blend of interpolated and extrapolated angles, if any.
    pub yarn: Option<Yarn>,
}

impl RopeParams {
    /// Whether the rotation is plain RoPE (no magnitude factor, no YaRN),
    /// the only kind every backend's kernels compute.
    pub fn is_unit(&self) -> bool {
        self.attn_factor == 1.0 && self.yarn.is_none()
    }
}

/// YaRN (ggml's `rope_yarn`): pair `i`'s angle blends the interpolated
/// `freq_scale * theta` and the extrapolated `theta` by a ramp that runs
/// from 1 below pair `corr_dims[0]` to 0 above `corr_dims[1]`, times
/// `ext_factor`; the magnitude factor grows by `1 + 0.1 ln(1/freq_scale)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// Weight of the extrapolated angle at the ramp's top (1 for YaRN).
    pub ext_factor: f32,
    /// The pair indices where the ramp starts and ends.
    pub corr_dims: [f32; 2],
}

impl Yarn {
    /// The correction range as ggml's `ggml_rope_yarn_corr_dims` computes
    /// it, in f32: the pairs whose wavelength fits `beta_fast` and
    /// `beta_slow` rotations in the original context `n_ctx_orig`.
    pub fn new(
        ext_factor: f32,
        n_rot: usize,
        n_ctx_orig: usize,
        freq_base: f32,
        [beta_fast, beta_slow]: [f32; 2],
    ) -> Self {
        let dim = |beta: f32| {
            n_rot as f32 * (n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * freq_base.ln())
        };
        let start = dim(beta_fast).floor();
        let end = dim(beta_slow).ceil();
        Yarn {
            ext_factor,
            corr_dims: [start.max(0.0), end.min(n_rot as f32 - 1.0)],
        }
    }

    /// The ramp of pair `i` times `ext_factor`: how much of the
    /// extrapolated angle it takes.
    pub fn mix(&self, i: usize) -> f32 {
        let [low, high] = self.corr_dims;
        let y = (i as f32 - low) / (high - low).max(0.001);
        (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor
    }
}

/// Which half of a layer's cache an op touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvKind {
    /// The keys.
    K,
    /// The values.
    V,
}

/// Attention over the cached keys and values of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnParams {
    /// The layer whose K and V regions are read.
    pub layer: usize,
    /// Query heads packed in a row of `q`.
    pub n_head: usize,
    /// Key/value heads per cached row; each serves
    /// `n_head / n_head_kv` query heads (GQA).
    pub n_head_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Multiplier of `q·k` before the softmax (usually `1/sqrt(head_dim)`).
    pub scale: f32,
    /// Sliding window: when positive, a query at position `p` reads only
    /// the cells of its window at positions above `p - sliding_window`
    /// (gemma's local layers); 0 reads the whole window.
    pub sliding_window: u32,
}

impl AttnParams {
    /// Attention over layer `layer`'s cache with the usual `1/sqrt(head_dim)`
    /// scale and no sliding window.
    pub fn new(layer: usize, n_head: usize, n_head_kv: usize, head_dim: usize) -> Self {
        AttnParams {
            layer,
            n_head,
            n_head_kv,
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            sliding_window: 0,
        }
    }

    /// The same, reading only a window of `sliding_window` positions (0:
    /// the whole cache).
    pub fn with_sliding_window(self, sliding_window: u32) -> Self {
        AttnParams {
            sliding_window,
            ..self
        }
    }

    /// Which source of an attention node with `n_srcs` sources holds the
    /// sinks (one logit per query head, gpt-oss), if it has them: they
    /// come last, after the windows and the sliding-window positions, so
    /// the sources before them keep their places.
    pub fn sinks_src(&self, n_srcs: usize) -> Option<usize> {
        let base = if self.sliding_window > 0 { 7 } else { 5 };
        (n_srcs == base + 1).then_some(base)
    }
}

/// How a mixture-of-experts layer turns its router's row into the chosen
/// experts and their weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// The router row holds probabilities (a softmax over all experts, as
    /// its own node): the `n_used` largest are chosen and weigh their
    /// experts (Qwen3-MoE, Mixtral).
    Probs,
    /// The router row holds logits: the `n_used` largest are chosen and a
    /// softmax over just those gives the weights (gpt-oss).
    SoftmaxChosen,
}

/// A routed FFN: each row goes through the `n_used` experts its router
/// chooses, and their outputs are summed, weighted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeParams {
    /// Experts in the layer.
    pub n_expert: usize,
    /// Experts each row goes through.
    pub n_used: usize,
    /// Width of one expert's hidden layer.
    pub n_ff: usize,
    /// How the router's row becomes choices and weights.
    pub gating: Gating,
    /// Whether the chosen weights are divided by their sum.
    pub norm_weights: bool,
    /// A factor on the weights after that (1: none).
    pub weights_scale: f32,
    /// The gated activation between the up/gate and down products.
    pub act: MoeAct,
}

/// The activation of an expert's hidden layer, from its gate and up rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MoeAct {
    /// `silu(gate) * up`.
    SwiGlu,
    /// gpt-oss's clamped variant (ggml's `swiglu_oai`): with
    /// `x = min(gate, limit)` and `y = clamp(up, -limit, limit)`,
    /// `x / (1 + exp(-alpha x)) * (y + 1)`.
    SwiGluOai {
        /// The sigmoid's slope (1.702).
        alpha: f32,
        /// The clamp (7).
        limit: f32,
    },
}

impl MoeParams {
    /// The most experts one row may use (llama.cpp allows more; no model
    /// uses more than this per row).
    pub const MAX_USED: usize = 64;
}

/// The operations of the IR.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Step data, see [`InputKind`].
    Input(InputKind),
    /// A model tensor, by handle.
    Weight(WeightId),
    /// `[table, ids]`: rows of a (possibly quantized) table, as f32.
    GetRows,
    /// `[x]`: `x / sqrt(mean(x²) + eps)` per row.
    RmsNorm {
        /// Added to the mean square before the square root.
        eps: f32,
    },
    /// `[a, b]`: elementwise; `b` may be one row broadcast over `a`'s rows.
    Add,
    /// `[a, b]`: elementwise product, same broadcast rule as `Add`.
    Mul,
    /// `[x]`: `x * s`.
    Scale(f32),
    /// `[w, x]`: `out[t][r] = w[r] · x[t]`.
    MatMul,
    /// `[x, positions]`: rotary embedding of every head of every row.
    Rope(RopeParams),
    /// `[x, kv_cells]`: writes each row into the layer's K or V region at
    /// its cell; outputs a one-element token that orders readers after it.
    KvStore {
        /// The layer whose region is written.
        layer: usize,
        /// Which of its two regions.
        kind: KvKind,
    },
    /// `[x, positions, kv_cells]`: `Rope` then `KvStore` in one pass (fused).
    RopeKvStore {
        /// The rotation applied to `x`.
        rope: RopeParams,
        /// The layer whose K region is written.
        layer: usize,
    },
    /// `[q, k_token, v_token, window_offsets, window_cells]`, plus
    /// `[positions, window_positions]` with a sliding window: causal, GQA
    /// attention of each query over exactly the cells its window names
    /// (and, with a sliding window, only their most recent positions).
    Attention(AttnParams),
    /// `[x]`: `x * sigmoid(x)`.
    Silu,
    /// `[x]`: `tanh(x)` (logit soft-capping).
    Tanh,
    /// `[gate, up]`: `silu(gate) * up` (fused from `Silu` + `Mul`).
    SwiGlu,
    /// `[gate, up]`: `gelu(gate) * up` with GELU's tanh approximation, as
    /// ggml's CPU backend computes it (gemma's FFN).
    GeGlu,
    /// `[x]`: softmax of each row.
    Softmax,
    /// `[x]`: same data, new shape with the same element count.
    Reshape,
    /// `[x, router, up, gate, down]`: a routed SwiGLU FFN (llama.cpp's
    /// `build_moe_ffn` over `mul_mat_id`). `router` is `[n_expert]` per row
    /// of `x`; the three expert weights stack their experts' matrices
    /// (`up`, `gate`: `n_ff` rows per expert; `down`: `n_embd` rows per
    /// expert). Row `t`'s output is `Σ_k w_k · down_e(silu(gate_e · x_t) *
    /// (up_e · x_t))` over its chosen experts `e` in order of choice.
    MoeFfn(MoeParams),
}

impl Op {
    /// Short name for dumps and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input(_) => "input",
            Op::Weight(_) => "weight",
            Op::GetRows => "get_rows",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Scale(_) => "scale",
            Op::MatMul => "mat_mul",
            Op::Rope(_) => "rope",
            Op::KvStore { .. } => "kv_store",
            Op::RopeKvStore { .. } => "rope_kv_store",
            Op::Attention(_) => "attention",
            Op::Silu => "silu",
            Op::Tanh => "tanh",
            Op::SwiGlu => "swiglu",
            Op::GeGlu => "geglu",
            Op::Softmax => "softmax",
            Op::Reshape => "reshape",
            Op::MoeFfn(_) => "moe_ffn",
        }
    }

    /// Whether the op may write its result over its first source's buffer
    /// (elementwise ops whose output has the first source's shape).
    pub fn can_be_inplace(&self) -> bool {
        matches!(
            self,
            Op::Add
                | Op::Mul
                | Op::Scale(_)
                | Op::Silu
                | Op::Tanh
                | Op::SwiGlu
                | Op::GeGlu
                | Op::Softmax
                | Op::Rope(_)
        )
    }
}

/// One node: an op applied to earlier nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What the node computes.
    pub op: Op,
    /// Its operands, earlier nodes, in the order the op documents.
    pub srcs: Vec<NodeId>,
    /// The shape of its value.
    pub shape: Shape,
    /// The element type of its value.
    pub dtype: DType,
    /// Unique, stable name (`blk.3.attn_q`), for dumps and comparisons.
    pub name: String,
}

impl Node {
    /// Number of elements.
    pub fn n_elements(&self) -> usize {
        self.shape[0] * self.shape[1]
    }
}
