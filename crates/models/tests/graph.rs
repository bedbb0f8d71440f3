//! The forward pass of each architecture, checked against a plain
//! reference implementation on a tiny synthetic model with f32 weights
//! (so the matmuls are exact up to summation order) and an f32 KV cache.

mod common;

use common::{f32s, graph_logits, load, matvec, rms_norm, rope};
use minfer_graph::{
    BackendPlan, ComputeParams, Fusion, GraphKind, GraphParams, KvFormat, OutputKind,
};
use minfer_models::testing::TinyModel;
use minfer_models::Model;

/// Logits of the last token, computed directly from the weights.
fn reference(m: &Model, tokens: &[u32]) -> Vec<f32> {
    let hp = &m.hparams;
    let (d, hd) = (hp.n_embd, hp.head_dim);
    let neox = hp.arch.name() != "llama";
    let embd = f32s(m, "token_embd.weight");
    let mut xs: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| embd[t as usize * d..(t as usize + 1) * d].to_vec())
        .collect();
    for l in 0..hp.n_layer {
        let w = |s: &str| f32s(m, &format!("blk.{l}.{s}"));
        let bias = |s: &str| {
            m.weights
                .get(&format!("blk.{l}.{s}"))
                .map(|_| f32s(m, &format!("blk.{l}.{s}")))
        };
        let (mut ks, mut vs, mut qs) = (Vec::new(), Vec::new(), Vec::new());
        for (p, x) in xs.iter().enumerate() {
            let h = rms_norm(x, &w("attn_norm.weight"), hp.rms_eps);
            let proj = |name: &str, b: &str| {
                let mut y = matvec(&w(name), &h);
                if let Some(b) = bias(b) {
                    y.iter_mut().zip(b).for_each(|(y, b)| *y += b);
                }
                y
            };
            let mut q = proj("attn_q.weight", "attn_q.bias");
            let mut k = proj("attn_k.weight", "attn_k.bias");
            let v = proj("attn_v.weight", "attn_v.bias");
            rope(&mut q, p, hd, hp.rope_freq_base, neox);
            rope(&mut k, p, hd, hp.rope_freq_base, neox);
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        let group = hp.n_head / hp.n_head_kv;
        for (p, x) in xs.iter_mut().enumerate() {
            let mut att = vec![0.0f32; hp.n_head * hd];
            for h in 0..hp.n_head {
                let kvh = h / group;
                let q = &qs[p][h * hd..(h + 1) * hd];
                let s: Vec<f32> = (0..=p)
                    .map(|j| {
                        let k = &ks[j][kvh * hd..(kvh + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() / (hd as f32).sqrt()
                    })
                    .collect();
                let mx = s.iter().copied().fold(f32::MIN, f32::max);
                let e: Vec<f32> = s.iter().map(|v| (v - mx).exp()).collect();
                let sum: f32 = e.iter().sum();
                for (j, ej) in e.iter().enumerate() {
                    for i in 0..hd {
                        att[h * hd + i] += ej / sum * vs[j][kvh * hd + i];
                    }
                }
            }
            let o = matvec(&w("attn_output.weight"), &att);
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            let h = rms_norm(x, &w("ffn_norm.weight"), hp.rms_eps);
            let g = matvec(&w("ffn_gate.weight"), &h);
            let u = matvec(&w("ffn_up.weight"), &h);
            let a: Vec<f32> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let dn = matvec(&w("ffn_down.weight"), &a);
            x.iter_mut().zip(&dn).for_each(|(x, o)| *x += o);
        }
    }
    let h = rms_norm(
        xs.last().unwrap(),
        &f32s(m, "output_norm.weight"),
        hp.rms_eps,
    );
    let head = if m.tied_embeddings() {
        "token_embd.weight"
    } else {
        "output.weight"
    };
    matvec(&f32s(m, head), &h)
}

fn check(arch: &str) {
    let m = load(&TinyModel::new(arch));
    let tokens = [3u32, 77, 12, 100, 5, 41, 9];
    let want = reference(&m, &tokens);
    for fusion in [Fusion::ALL, Fusion::NONE] {
        let got = graph_logits(&m, &tokens, fusion);
        assert_eq!(got.len(), m.n_vocab());
        let max = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max < 1e-4, "{arch} ({fusion:?}): max |Δ| {max}");
    }
}

#[test]
fn llama_forward_matches_reference() {
    check("llama");
}

#[test]
fn qwen2_forward_matches_reference() {
    check("qwen2");
}

#[test]
fn nodes_are_named_and_outputs_cut() {
    let m = load(&TinyModel::new("qwen2"));
    let params = |n_tokens, n_out| GraphParams {
        n_tokens,
        n_out,
        kind: GraphKind::Prefill,
        output: OutputKind::Logits,
        compute: ComputeParams {
            n_ctx: 32,
            kv_format: KvFormat::F32,
            backend: BackendPlan::Cpu,
            fusion: Fusion::NONE,
        },
        weights_version: 0,
    };
    let mut b = minfer_graph::GraphBuilder::new(&m.weights, params(5, 2));
    let out = m.build_graph(&mut b).unwrap();
    let g = b.finish(out);
    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    for want in [
        "inp_embd",
        "blk.0.attn_norm",
        "blk.0.attn_q",
        "blk.0.attn_q_bias",
        "blk.1.attn",
        "blk.1.attn_output",
        "out_rows",
        "blk.1.ffn_down",
        "logits",
    ] {
        assert!(names.contains(&want), "no node {want}");
    }
    // The cut sits after the last attention residual: the last FFN runs
    // on the selected rows only.
    let cut = names.iter().position(|&n| n == "out_rows").unwrap();
    let residual = names
        .iter()
        .position(|&n| n == "blk.1.attn_residual")
        .unwrap();
    let ffn = names.iter().position(|&n| n == "blk.1.ffn_norm").unwrap();
    assert!(residual < cut && cut < ffn);
    assert_eq!(g.nodes[out].shape, [m.n_vocab(), 2]);
    assert_eq!(g.nodes[ffn].shape[1], 2);

    let mut b = minfer_graph::GraphBuilder::new(&m.weights, params(5, 0));
    assert!(m.build_graph(&mut b).is_err());
}

#[test]
fn hidden_output_is_the_logits_graph_cut_at_the_output_norm() {
    for arch in ["qwen2", "llama", "qwen3", "gemma3", "qwen3moe"] {
        let m = load(&TinyModel::new(arch));
        let params = |output| GraphParams {
            n_tokens: 5,
            n_out: 2,
            kind: GraphKind::Prefill,
            output,
            compute: ComputeParams {
                n_ctx: 32,
                kv_format: KvFormat::F32,
                backend: BackendPlan::Cpu,
                fusion: Fusion::ALL,
            },
            weights_version: 0,
        };
        let build = |output| {
            let mut b = minfer_graph::GraphBuilder::new(&m.weights, params(output));
            let out = m.build_graph(&mut b).unwrap();
            b.finish(out)
        };
        let hidden = build(OutputKind::Hidden);
        let logits = build(OutputKind::Logits);
        let out = &hidden.nodes[hidden.output];
        assert_eq!(out.name, "output_norm", "{arch}");
        assert_eq!(out.shape, [m.hparams.n_embd, 2], "{arch}");
        assert!(
            hidden.nodes.iter().all(|n| !n.name.starts_with("logits")),
            "{arch}: a hidden-state graph has no LM head"
        );
        // The same nodes up to the norm: both come from one builder, and
        // only the end differs.
        assert_eq!(
            hidden.nodes[..],
            logits.nodes[..hidden.nodes.len()],
            "{arch}"
        );
        assert_eq!(logits.nodes[logits.output].shape, [m.n_vocab(), 2]);
    }
}
