//! Phi-3 on the repository's random-weight fixture
//! (`scripts/make-phi3-fixture.py`): the fused tensors split at load read
//! as the separate ones do, and LongRoPE's factors are used and chosen by
//! the context size. Its numerics against llama.cpp are the engine's
//! greedy golden test.

mod common;

use std::sync::Arc;

use common::graph_logits_ctx;
use minfer_gguf::{GgufFile, GgufWriter};
use minfer_graph::Fusion;
use minfer_models::layers::FfnTensors;
use minfer_models::{Model, ModelError};

const TOKENS: [u32; 7] = [1604, 3987, 46477, 24, 94, 727, 5765];

fn fixture() -> GgufFile {
    GgufFile::open(minfer_testutil::repo_model("phi3-tiny-q8_0.gguf"))
        .expect("the repository's phi3 model opens")
}

/// A copy of `src` with each tensor passed through `edit`, which returns
/// the `(name, shape, bytes)` to write in its place (none to drop it),
/// loaded.
fn try_rewrite(
    src: &GgufFile,
    edit: impl Fn(&str, &[u64], &[u8]) -> Vec<(String, Vec<u64>, Vec<u8>)>,
) -> Result<Model, ModelError> {
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata().iter() {
        w.set(k, v.clone());
    }
    for t in src.tensors() {
        for (name, shape, bytes) in edit(&t.info.name, &t.info.shape, src.tensor_data(t)) {
            w.add_tensor(name, t.info.ggml_type, &shape, bytes)
                .expect("a valid tensor");
        }
    }
    let file = GgufFile::from_bytes(w.to_bytes()).expect("valid GGUF");
    Model::load(Arc::new(file))
}

/// [`try_rewrite`], which must load.
fn rewrite(
    src: &GgufFile,
    edit: impl Fn(&str, &[u64], &[u8]) -> Vec<(String, Vec<u64>, Vec<u8>)>,
) -> Model {
    try_rewrite(src, edit).expect("the rewritten model loads")
}

/// Splits the fused tensor `name` (rows of `shape[0]` values) into parts
/// of the given heights, each named with `fused` replaced by its own name.
fn split(
    name: &str,
    shape: &[u64],
    bytes: &[u8],
    fused: &str,
    parts: &[(&str, u64)],
) -> Vec<(String, Vec<u64>, Vec<u8>)> {
    let row = bytes.len() / shape[1] as usize;
    let mut at = 0;
    parts
        .iter()
        .map(|&(part, rows)| {
            let n = rows as usize * row;
            at += n;
            let bytes = bytes[at - n..at].to_vec();
            (name.replace(fused, part), vec![shape[0], rows], bytes)
        })
        .collect()
}

fn logits(m: &Model, n_ctx: u32) -> Vec<f32> {
    graph_logits_ctx(m, &TOKENS, Fusion::ALL, n_ctx)
}

#[test]
fn fused_tensors_read_as_separate_ones() {
    let fused = Model::load(Arc::new(fixture())).expect("the fixture loads");
    let hp = &fused.hparams;
    assert_eq!(
        (hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_rot),
        (4, 2, 32, 24)
    );
    let (q, kv, ff) = (hp.q_width() as u64, hp.kv_width() as u64, hp.n_ff as u64);
    let separate = rewrite(&fixture(), |name, shape, bytes| {
        if name.ends_with("attn_qkv.weight") {
            let parts = [("attn_q", q), ("attn_k", kv), ("attn_v", kv)];
            split(name, shape, bytes, "attn_qkv", &parts)
        } else if name.ends_with("ffn_up.weight") {
            split(
                name,
                shape,
                bytes,
                "ffn_up",
                &[("ffn_gate", ff), ("ffn_up", ff)],
            )
        } else {
            vec![(name.to_string(), shape.to_vec(), bytes.to_vec())]
        }
    });
    assert!(separate.weights.get("blk.0.attn_qkv.weight").is_none());
    for n_ctx in [32, 4096] {
        assert_eq!(
            logits(&fused, n_ctx),
            logits(&separate, n_ctx),
            "n_ctx {n_ctx}"
        );
    }
    // The parts are what graphs read; the fused tensors are not counted
    // twice in the weights a token reads.
    let FfnTensors::Dense { gate, up, .. } = &fused.tensors().layers[0].ffn else {
        panic!("phi3 has a dense FFN");
    };
    assert_eq!(fused.weights.info(*gate).name, "blk.0.ffn_up.weight[gate]");
    assert_eq!(fused.weights.info(*up).name, "blk.0.ffn_up.weight[up]");
    assert_eq!(fused.weight_bytes().total, separate.weight_bytes().total);
}

#[test]
fn longrope_factors_follow_the_context() {
    let m = Model::load(Arc::new(fixture())).expect("the fixture loads");
    // The original window is 2048: short factors up to it, long beyond.
    let (short, long) = (logits(&m, 2048), logits(&m, 4096));
    assert_ne!(short, long, "the factors change the logits");
    assert_eq!(short, logits(&m, 32));
    // Long factors replaced by the short ones: no difference left.
    let src = fixture();
    let short_data = src
        .tensors()
        .iter()
        .find(|t| t.info.name == "rope_factors_short.weight")
        .map(|t| src.tensor_data(t).to_vec())
        .expect("short factors");
    let same = rewrite(&src, |name, shape, bytes| {
        let bytes = if name == "rope_factors_long.weight" {
            short_data.clone()
        } else {
            bytes.to_vec()
        };
        vec![(name.to_string(), shape.to_vec(), bytes)]
    });
    assert_eq!(logits(&same, 4096), short);
    // Without any factors the rotation is plain RoPE (and still scaled).
    let none = rewrite(&src, |name, shape, bytes| {
        if name.starts_with("rope_factors") {
            Vec::new()
        } else {
            vec![(name.to_string(), shape.to_vec(), bytes.to_vec())]
        }
    });
    assert_ne!(logits(&none, 32), short);
}

#[test]
fn a_fused_tensor_of_the_wrong_height_is_named() {
    let err = try_rewrite(&fixture(), |name, shape, bytes| {
        let (mut shape, mut bytes) = (shape.to_vec(), bytes.to_vec());
        if name == "blk.1.attn_qkv.weight" {
            let row = bytes.len() / shape[1] as usize;
            shape[1] -= 1;
            bytes.truncate(bytes.len() - row);
        }
        vec![(name.to_string(), shape, bytes)]
    })
    .expect_err("a short attn_qkv is refused");
    match err {
        ModelError::TensorShape { name, .. } => assert_eq!(name, "blk.1.attn_qkv.weight"),
        other => panic!("expected a shape error naming the tensor, got {other}"),
    }
}
