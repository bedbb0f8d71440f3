//! A llama/qwen2-shaped model for graph tests: random weights, a builder
//! and a helper that runs one sequence through a cache.

#![allow(dead_code)]

use minfer_graph::{
    AttnParams, BackendPlan, ComputeParams, Fusion, GraphBuilder, GraphCache, GraphParams,
    GraphUid, KvFormat, KvKind, NodeId, OutputKind, Result, RopeParams, RopeStyle, StepInputs,
    WeightStore,
};
use minfer_kernels::GgmlType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Hyperparameters of the test model.
#[derive(Clone, Copy, Debug)]
pub struct Hp {
    pub n_layer: usize,
    pub d: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub eps: f32,
    pub rope_base: f32,
    /// q/k/v biases, as qwen2 has.
    pub bias: bool,
}

impl Hp {
    /// A model small enough for debug-speed tests.
    pub const SMALL: Hp = Hp {
        n_layer: 2,
        d: 64,
        n_head: 4,
        n_head_kv: 2,
        head_dim: 16,
        ffn: 128,
        vocab: 96,
        eps: 1e-6,
        rope_base: 10000.0,
        bias: true,
    };
}

/// Every tensor of the model: name, ggml shape `[ne0, ne1]`, whether it
/// is a projection (quantized) or a norm/bias (f32).
pub fn tensors(hp: &Hp) -> Vec<(String, [usize; 2], bool)> {
    let q = hp.n_head * hp.head_dim;
    let kv = hp.n_head_kv * hp.head_dim;
    let mut t = vec![("token_embd.weight".to_string(), [hp.d, hp.vocab], true)];
    for l in 0..hp.n_layer {
        let p = |s: &str| format!("blk.{l}.{s}");
        t.push((p("attn_norm.weight"), [hp.d, 1], false));
        t.push((p("attn_q.weight"), [hp.d, q], true));
        t.push((p("attn_k.weight"), [hp.d, kv], true));
        t.push((p("attn_v.weight"), [hp.d, kv], true));
        if hp.bias {
            t.push((p("attn_q.bias"), [q, 1], false));
            t.push((p("attn_k.bias"), [kv, 1], false));
            t.push((p("attn_v.bias"), [kv, 1], false));
        }
        t.push((p("attn_output.weight"), [q, hp.d], true));
        t.push((p("ffn_norm.weight"), [hp.d, 1], false));
        t.push((p("ffn_gate.weight"), [hp.d, hp.ffn], true));
        t.push((p("ffn_up.weight"), [hp.d, hp.ffn], true));
        t.push((p("ffn_down.weight"), [hp.ffn, hp.d], true));
    }
    t.push(("output_norm.weight".to_string(), [hp.d, 1], false));
    t.push(("output.weight".to_string(), [hp.d, hp.vocab], true));
    t
}

/// Random bytes of one tensor: projections quantized to `ty` with values
/// scaled by `1/sqrt(ne0)`, norms near 1, biases small.
pub fn tensor_bytes(
    rng: &mut StdRng,
    name: &str,
    shape: [usize; 2],
    proj: bool,
    ty: GgmlType,
) -> Vec<u8> {
    let n = shape[0] * shape[1];
    let f: Vec<f32> = if !proj {
        if name.contains("norm") {
            (0..n).map(|_| 1.0 + rng.gen_range(-0.1..0.1)).collect()
        } else {
            (0..n).map(|_| rng.gen_range(-0.1..0.1)).collect()
        }
    } else {
        let s = 1.0 / (shape[0] as f32).sqrt();
        (0..n).map(|_| rng.gen_range(-s..s) * 1.7).collect()
    };
    let ty = if proj { ty } else { GgmlType::F32 };
    let row = minfer_kernels::matmul::row_bytes(ty, shape[0]).expect("block-aligned rows");
    let mut out = vec![0u8; row * shape[1]];
    for (src, dst) in f.chunks_exact(shape[0]).zip(out.chunks_exact_mut(row)) {
        minfer_kernels::quant::quantize_row(ty, src, dst).expect("quantizable");
    }
    out
}

/// An in-memory store with random weights.
pub fn store(hp: &Hp, ty: GgmlType, seed: u64) -> WeightStore {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut w = WeightStore::new();
    for (name, shape, proj) in tensors(hp) {
        let bytes = tensor_bytes(&mut rng, &name, shape, proj, ty);
        let ty = if proj { ty } else { GgmlType::F32 };
        w.add_owned(name, ty, shape, bytes)
            .expect("consistent tensor");
    }
    w
}

/// Params of a graph over `n_tokens` tokens.
pub fn params(n_tokens: u32, n_out: u32, n_ctx: u32, fusion: Fusion) -> GraphParams {
    let compute = ComputeParams {
        n_ctx,
        kv_format: KvFormat::F32,
        backend: BackendPlan::Cpu,
        fusion,
    };
    GraphParams::forward(n_tokens, n_out, OutputKind::Logits, compute)
}

/// The forward pass: embedding → per layer attention and SwiGLU FFN with
/// pre-norms and residuals → final norm → output rows → LM head.
pub fn build(b: &mut GraphBuilder, hp: &Hp) -> Result<NodeId> {
    build_with_sinks(b, hp, false)
}

/// [`build`], with attention sinks (`blk.N.attn_sinks.weight`, which the
/// caller adds to the store) when `sinks` is set.
pub fn build_with_sinks(b: &mut GraphBuilder, hp: &Hp, sinks: bool) -> Result<NodeId> {
    let w = b.weights();
    let ids = b.input(minfer_graph::InputKind::TokenIds);
    let embd = b.weight(w.id("token_embd.weight")?);
    let mut x = b.get_rows("inp_embd", embd, ids)?;
    let rope = |n_head| RopeParams {
        style: RopeStyle::Neox,
        n_head,
        head_dim: hp.head_dim,
        n_rot: hp.head_dim,
        freq_base: hp.rope_base,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn: None,
    };
    for l in 0..hp.n_layer {
        let name = |s: &str| format!("blk.{l}.{s}");
        let wt = |b: &mut GraphBuilder, s: &str| -> Result<NodeId> {
            let id = b.weights().id(&name(s))?;
            Ok(b.weight(id))
        };
        let h = b.rms_norm(name("attn_norm_raw"), x, hp.eps)?;
        let nw = wt(b, "attn_norm.weight")?;
        let h = b.mul(name("attn_norm"), h, nw)?;
        let mut qkv = [0; 3];
        for (k, s) in ["q", "k", "v"].iter().enumerate() {
            let wm = wt(b, &format!("attn_{s}.weight"))?;
            let mut t = b.mat_mul(name(&format!("{s}_proj")), wm, h)?;
            if hp.bias {
                let bw = wt(b, &format!("attn_{s}.bias"))?;
                t = b.add(name(&format!("{s}_bias")), t, bw)?;
            }
            qkv[k] = t;
        }
        let q = b.rope(name("q_rope"), qkv[0], rope(hp.n_head))?;
        let k = b.rope(name("k_rope"), qkv[1], rope(hp.n_head_kv))?;
        let ks = b.kv_store(name("k_store"), k, l, KvKind::K)?;
        let vs = b.kv_store(name("v_store"), qkv[2], l, KvKind::V)?;
        let sink = match sinks {
            true => Some(b.weights().id(&name("attn_sinks.weight"))?),
            false => None,
        };
        let a = b.attention_with_sinks(
            name("attn"),
            q,
            ks,
            vs,
            sink,
            AttnParams::new(l, hp.n_head, hp.n_head_kv, hp.head_dim),
        )?;
        let wo = wt(b, "attn_output.weight")?;
        let o = b.mat_mul(name("attn_out"), wo, a)?;
        x = b.add(name("attn_residual"), x, o)?;
        let h = b.rms_norm(name("ffn_norm_raw"), x, hp.eps)?;
        let nw = wt(b, "ffn_norm.weight")?;
        let h = b.mul(name("ffn_norm"), h, nw)?;
        let wg = wt(b, "ffn_gate.weight")?;
        let g = b.mat_mul(name("ffn_gate"), wg, h)?;
        let wu = wt(b, "ffn_up.weight")?;
        let u = b.mat_mul(name("ffn_up"), wu, h)?;
        let s = b.silu(name("ffn_silu"), g)?;
        let m = b.mul(name("ffn_act"), s, u)?;
        let wd = wt(b, "ffn_down.weight")?;
        let dn = b.mat_mul(name("ffn_down"), wd, m)?;
        x = b.add(name("ffn_residual"), x, dn)?;
    }
    let h = b.rms_norm("output_norm_raw", x, hp.eps)?;
    let nw = b.weight(w.id("output_norm.weight")?);
    let h = b.mul("output_norm", h, nw)?;
    let h = b.select_outputs("out_rows", h)?;
    let wo = b.weight(w.id("output.weight")?);
    b.mat_mul("logits", wo, h)
}

/// Step inputs of one sequence whose tokens sit at `start..start + n`
/// in cells equal to their positions, each attending to every cell up to
/// its own.
#[derive(Default)]
pub struct SeqInputs {
    pub tokens: Vec<i32>,
    pub positions: Vec<i32>,
    pub cells: Vec<i32>,
    pub offsets: Vec<i32>,
    pub window: Vec<i32>,
    pub out_ids: Vec<i32>,
}

impl SeqInputs {
    pub fn with_capacity(n_tokens: usize, n_ctx: usize) -> Self {
        SeqInputs {
            tokens: Vec::with_capacity(n_tokens),
            positions: Vec::with_capacity(n_tokens),
            cells: Vec::with_capacity(n_tokens),
            offsets: Vec::with_capacity(n_tokens + 1),
            window: Vec::with_capacity(n_tokens * n_ctx),
            out_ids: Vec::with_capacity(n_tokens),
        }
    }

    /// Refills every vector (without allocating once capacity suffices).
    pub fn fill(&mut self, tokens: &[i32], start: usize, n_out: usize) {
        self.tokens.clear();
        self.tokens.extend_from_slice(tokens);
        self.positions.clear();
        self.cells.clear();
        self.offsets.clear();
        self.window.clear();
        self.out_ids.clear();
        self.offsets.push(0);
        for t in 0..tokens.len() {
            let p = (start + t) as i32;
            self.positions.push(p);
            self.cells.push(p);
            self.window.extend(0..=p);
            self.offsets.push(self.window.len() as i32);
        }
        let n = tokens.len();
        self.out_ids.extend((n - n_out..n).map(|r| r as i32));
    }

    pub fn step(&self) -> StepInputs<'_> {
        StepInputs {
            token_ids: &self.tokens,
            positions: &self.positions,
            kv_cells: &self.cells,
            window_offsets: &self.offsets,
            window_cells: &self.window,
            out_ids: &self.out_ids,
            ..StepInputs::default()
        }
    }
}

/// Runs `tokens` at positions `start..` through `cache` and returns the
/// logits of the last `n_out` tokens, with the graph's uid.
#[allow(clippy::too_many_arguments)]
pub fn run(
    cache: &mut GraphCache,
    w: &WeightStore,
    hp: &Hp,
    tokens: &[i32],
    start: usize,
    n_out: usize,
    n_ctx: u32,
    fusion: Fusion,
) -> Result<(Vec<f32>, GraphUid)> {
    let p = params(tokens.len() as u32, n_out as u32, n_ctx, fusion);
    let uid = cache.prepare(&p, w, |b| build(b, hp))?;
    let mut inp = SeqInputs::default();
    inp.fill(tokens, start, n_out);
    let out = cache.execute(uid, w, &inp.step())?.to_vec();
    Ok((out, uid))
}

/// Deterministic pseudo-random token ids below `vocab`.
pub fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<i32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(0..vocab as i32)).collect()
}
