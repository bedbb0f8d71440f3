//! The qwen3, qwen3moe and gemma3 forward passes against a plain reference written
//! from the model definitions, on tiny synthetic models with f32 weights
//! and an f32 KV cache: per-head Q/K norms, gemma's scaled embeddings,
//! post-norms, GeGLU, Q pre-scaling, local layers with their own RoPE base
//! and a sliding window shorter than the prompt, and logit soft-capping.

mod common;

use common::{f32s, graph_logits, load, matvec, rms_norm, rope};
use minfer_cpu::geglu_inplace;
use minfer_gguf::Value;
use minfer_graph::Fusion;
use minfer_models::testing::TinyModel;
use minfer_models::Model;

/// What the reference needs to know beyond the shared hyperparameters.
struct Spec {
    gemma: bool,
    /// Gemma: one global layer in every this many.
    pattern: usize,
    /// Gemma: the local layers' window.
    window: usize,
    /// Qwen3-MoE: `(n_expert, n_used, n_ff)` of the routed FFN.
    experts: Option<(usize, usize, usize)>,
}

/// The routed FFN of Qwen3-MoE on one normed row `h`: softmax over the
/// router's logits, the `n_used` largest, weights renormalised, and the
/// chosen experts' SwiGLU outputs summed with those weights.
fn moe_ffn(
    w: &dyn Fn(&str) -> Vec<f32>,
    h: &[f32],
    (_, n_used, ff): (usize, usize, usize),
) -> Vec<f32> {
    let d = h.len();
    let logits = matvec(&w("ffn_gate_inp.weight"), h);
    let mx = logits.iter().copied().fold(f32::MIN, f32::max);
    let e: Vec<f32> = logits.iter().map(|v| (v - mx).exp()).collect();
    let total: f32 = e.iter().sum();
    let mut order: Vec<usize> = (0..e.len()).collect();
    order.sort_by(|&a, &b| e[b].total_cmp(&e[a]));
    let chosen = &order[..n_used];
    let sum: f32 = chosen.iter().map(|&i| e[i] / total).sum();
    let (up, gate, down) = (
        w("ffn_up_exps.weight"),
        w("ffn_gate_exps.weight"),
        w("ffn_down_exps.weight"),
    );
    let mut out = vec![0.0f32; d];
    for &x in chosen {
        let weight = e[x] / total / sum;
        let g = matvec(&gate[x * ff * d..(x + 1) * ff * d], h);
        let u = matvec(&up[x * ff * d..(x + 1) * ff * d], h);
        let a: Vec<f32> = g
            .iter()
            .zip(&u)
            .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
            .collect();
        let y = matvec(&down[x * d * ff..(x + 1) * d * ff], &a);
        out.iter_mut().zip(&y).for_each(|(o, y)| *o += weight * y);
    }
    out
}

/// RMS norm of each `head_dim` slice of `x`.
fn head_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    x.chunks_exact(w.len())
        .flat_map(|h| rms_norm(h, w, eps))
        .collect()
}

/// Attention of query `q` (position `p`) over `ks`/`vs` at positions `from..=p`.
#[allow(clippy::too_many_arguments)]
fn attend(
    q: &[f32],
    ks: &[Vec<f32>],
    vs: &[Vec<f32>],
    from: usize,
    p: usize,
    m: &Model,
    scale: f32,
) -> Vec<f32> {
    let hp = &m.hparams;
    let (hd, group) = (hp.head_dim, hp.n_head / hp.n_head_kv);
    let mut att = vec![0.0f32; hp.n_head * hd];
    for h in 0..hp.n_head {
        let kvh = h / group;
        let qh = &q[h * hd..(h + 1) * hd];
        let s: Vec<f32> = (from..=p)
            .map(|j| {
                let k = &ks[j][kvh * hd..(kvh + 1) * hd];
                qh.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
            })
            .collect();
        let mx = s.iter().copied().fold(f32::MIN, f32::max);
        let e: Vec<f32> = s.iter().map(|v| (v - mx).exp()).collect();
        let sum: f32 = e.iter().sum();
        for (j, ej) in (from..=p).zip(&e) {
            for i in 0..hd {
                att[h * hd + i] += ej / sum * vs[j][kvh * hd + i];
            }
        }
    }
    att
}

/// Logits of the last token, computed directly from the weights.
fn reference(m: &Model, tokens: &[u32], spec: &Spec) -> Vec<f32> {
    let hp = &m.hparams;
    let (d, hd, eps) = (hp.n_embd, hp.head_dim, hp.rms_eps);
    let embd = f32s(m, "token_embd.weight");
    let mut xs: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| {
            let row = &embd[t as usize * d..(t as usize + 1) * d];
            let s = if spec.gemma { (d as f32).sqrt() } else { 1.0 };
            row.iter().map(|v| v * s).collect()
        })
        .collect();
    for l in 0..hp.n_layer {
        let w = |s: &str| f32s(m, &format!("blk.{l}.{s}"));
        let global = !spec.gemma || l % spec.pattern == spec.pattern - 1;
        let base = if global { hp.rope_freq_base } else { 10_000.0 };
        let window = if global { usize::MAX } else { spec.window };
        let (mut qs, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new());
        for (p, x) in xs.iter().enumerate() {
            let h = rms_norm(x, &w("attn_norm.weight"), eps);
            let mut q = head_norm(
                &matvec(&w("attn_q.weight"), &h),
                &w("attn_q_norm.weight"),
                eps,
            );
            let mut k = head_norm(
                &matvec(&w("attn_k.weight"), &h),
                &w("attn_k_norm.weight"),
                eps,
            );
            rope(&mut q, p, hd, base, true);
            rope(&mut k, p, hd, base, true);
            qs.push(q);
            ks.push(k);
            vs.push(matvec(&w("attn_v.weight"), &h));
        }
        for (p, x) in xs.iter_mut().enumerate() {
            let from = (p + 1).saturating_sub(window);
            let scale = 1.0 / (hd as f32).sqrt();
            let att = if spec.gemma {
                let q: Vec<f32> = qs[p].iter().map(|v| v * scale).collect();
                attend(&q, &ks, &vs, from, p, m, 1.0)
            } else {
                attend(&qs[p], &ks, &vs, from, p, m, scale)
            };
            let mut o = matvec(&w("attn_output.weight"), &att);
            if spec.gemma {
                o = rms_norm(&o, &w("post_attention_norm.weight"), eps);
            }
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            let h = rms_norm(x, &w("ffn_norm.weight"), eps);
            if let Some(experts) = spec.experts {
                let y = moe_ffn(&w, &h, experts);
                x.iter_mut().zip(&y).for_each(|(x, o)| *x += o);
                continue;
            }
            let mut g = matvec(&w("ffn_gate.weight"), &h);
            let u = matvec(&w("ffn_up.weight"), &h);
            if spec.gemma {
                geglu_inplace(&mut g, &u).unwrap();
            } else {
                g.iter_mut()
                    .zip(&u)
                    .for_each(|(g, u)| *g = *g / (1.0 + (-*g).exp()) * u);
            }
            let mut dn = matvec(&w("ffn_down.weight"), &g);
            if spec.gemma {
                dn = rms_norm(&dn, &w("post_ffw_norm.weight"), eps);
            }
            x.iter_mut().zip(&dn).for_each(|(x, o)| *x += o);
        }
    }
    let h = rms_norm(xs.last().unwrap(), &f32s(m, "output_norm.weight"), eps);
    matvec(&f32s(m, "token_embd.weight"), &h)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A tiny gemma3 model of three layers, the last of them global, with a
/// window shorter than the test prompt.
fn tiny_gemma3(extra: Vec<(String, Value)>) -> TinyModel {
    let mut t = TinyModel::new("gemma3");
    t.n_layer = 3;
    t.extra = vec![(
        "gemma3.attention.sliding_window_pattern".into(),
        Value::from(3u32),
    )];
    t.extra.extend(extra);
    t
}

const TOKENS: [u32; 9] = [3, 77, 12, 100, 5, 41, 9, 64, 2];

#[test]
fn qwen3_forward_matches_reference() {
    let m = load(&TinyModel::new("qwen3"));
    let spec = Spec {
        gemma: false,
        pattern: 1,
        window: usize::MAX,
        experts: None,
    };
    let want = reference(&m, &TOKENS, &spec);
    for fusion in [Fusion::ALL, Fusion::NONE] {
        let max = max_diff(&want, &graph_logits(&m, &TOKENS, fusion));
        assert!(max < 1e-4, "qwen3 ({fusion:?}): max |Δ| {max}");
    }
}

#[test]
fn qwen3moe_forward_matches_reference() {
    let tiny = TinyModel::new("qwen3moe");
    let m = load(&tiny);
    let spec = Spec {
        gemma: false,
        pattern: 1,
        window: usize::MAX,
        experts: tiny.experts,
    };
    let want = reference(&m, &TOKENS, &spec);
    for fusion in [Fusion::ALL, Fusion::NONE] {
        let max = max_diff(&want, &graph_logits(&m, &TOKENS, fusion));
        assert!(max < 1e-4, "qwen3moe ({fusion:?}): max |Δ| {max}");
    }
}

#[test]
fn gemma3_forward_matches_reference() {
    let m = load(&tiny_gemma3(Vec::new()));
    let window = TinyModel::GEMMA3_WINDOW as usize;
    assert!(TOKENS.len() > window);
    let spec = Spec {
        gemma: true,
        pattern: 3,
        window,
        experts: None,
    };
    let want = reference(&m, &TOKENS, &spec);
    for fusion in [Fusion::ALL, Fusion::NONE] {
        let max = max_diff(&want, &graph_logits(&m, &TOKENS, fusion));
        assert!(max < 1e-4, "gemma3 ({fusion:?}): max |Δ| {max}");
    }
    // Without the window the logits differ: the test does exercise it.
    let full = Spec {
        window: usize::MAX,
        ..spec
    };
    assert!(max_diff(&want, &reference(&m, &TOKENS, &full)) > 1e-3);
}

#[test]
fn gemma3_soft_caps_logits_when_the_file_says_so() {
    let plain = load(&tiny_gemma3(Vec::new()));
    let cap = 0.5f32;
    let capped = load(&tiny_gemma3(vec![(
        "gemma3.final_logit_softcapping".into(),
        Value::from(cap),
    )]));
    let raw = graph_logits(&plain, &TOKENS, Fusion::ALL);
    let got = graph_logits(&capped, &TOKENS, Fusion::ALL);
    assert!(got.iter().all(|v| v.abs() < cap));
    for (r, g) in raw.iter().zip(&got) {
        assert_eq!(g.to_bits(), (((r * (1.0 / cap)).tanh()) * cap).to_bits());
    }
    let mut t = tiny_gemma3(vec![(
        "gemma3.final_logit_softcapping".into(),
        Value::from(-1.0f32),
    )]);
    t.seed = 2;
    let file = minfer_gguf::GgufFile::from_bytes(t.to_bytes().unwrap()).unwrap();
    let err = Model::load(std::sync::Arc::new(file)).unwrap_err();
    assert!(err.to_string().contains("final_logit_softcapping"), "{err}");
}
