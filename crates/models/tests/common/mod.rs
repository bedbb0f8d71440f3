//! Helpers shared by the forward-pass tests: loading a tiny model, reading
//! its f32 weights, the plain operations of a reference forward pass, and
//! the logits of the model's own graph.

#![allow(dead_code)]

use std::sync::Arc;

use minfer_gguf::GgufFile;
use minfer_graph::{
    BackendPlan, ComputeParams, Fusion, GraphParams, KvFormat, OutputKind, StepInputs,
};
use minfer_kernels::Kernels;
use minfer_models::testing::TinyModel;
use minfer_models::Model;

pub fn load(t: &TinyModel) -> Model {
    let file = GgufFile::from_bytes(t.to_bytes().unwrap()).unwrap();
    Model::load(Arc::new(file)).unwrap()
}

pub fn f32s(m: &Model, name: &str) -> Vec<f32> {
    let id = m.weights.id(name).unwrap();
    m.weights
        .data(id)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// `w` is `[cols, rows]` in ggml order: row `r` is `w[r*cols..]`.
pub fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks_exact(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * s * g).collect()
}

pub fn rope(x: &mut [f32], pos: usize, head_dim: usize, base: f32, neox: bool) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let theta = pos as f32 * base.powf(-2.0 * i as f32 / head_dim as f32);
            let (s, c) = theta.sin_cos();
            let (a, b) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * c - x1 * s;
            head[b] = x0 * s + x1 * c;
        }
    }
}

/// Logits of the last token through the model's graph.
pub fn graph_logits(m: &Model, tokens: &[u32], fusion: Fusion) -> Vec<f32> {
    graph_logits_ctx(m, tokens, fusion, 32)
}

/// [`graph_logits`] in a context of `n_ctx` cells (which a family may read:
/// Phi's LongRoPE picks its factors by it).
pub fn graph_logits_ctx(m: &Model, tokens: &[u32], fusion: Fusion, n_ctx: u32) -> Vec<f32> {
    let n = tokens.len();
    let compute = ComputeParams {
        n_ctx,
        kv_format: KvFormat::F32,
        backend: BackendPlan::Cpu,
        fusion,
    };
    let params = GraphParams::forward(n as u32, 1, OutputKind::Logits, compute);
    let mut cache =
        minfer_cpu::graph_cache(Kernels::detect(), 2, minfer_graph::CacheConfig::default());
    cache.set_verify(true);
    let uid = cache
        .prepare(&params, &m.weights, |b| m.build_graph(b))
        .unwrap();
    let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
    let pos: Vec<i32> = (0..n as i32).collect();
    let mut offsets = vec![0];
    let mut window = Vec::new();
    for p in 0..n as i32 {
        window.extend(0..=p);
        offsets.push(window.len() as i32);
    }
    let out_ids = [n as i32 - 1];
    let inputs = StepInputs {
        token_ids: &ids,
        positions: &pos,
        kv_cells: &pos,
        window_offsets: &offsets,
        window_cells: &window,
        window_positions: &window,
        out_ids: if n > 1 { &out_ids } else { &[] },
    };
    cache.execute(uid, &m.weights, &inputs).unwrap().to_vec()
}
