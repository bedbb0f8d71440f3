//! Attention sinks through a whole graph on the CPU: the builder checks
//! the sinks weight, the node carries it as its last source, and the
//! executor applies it (a sink far below every score changes no bit, one
//! far above silences attention).

mod common;

use common::{build_with_sinks, params, store, Hp, SeqInputs};
use minfer_graph::{
    AttnParams, CacheConfig, Fusion, GraphBuilder, GraphError, KvKind, Result, WeightStore,
};
use minfer_kernels::{GgmlType, Kernels};

/// The test model's store with every layer's sinks set to `sink`.
fn with_sinks(hp: &Hp, sink: f32) -> WeightStore {
    let mut w = store(hp, GgmlType::F32, 3);
    for l in 0..hp.n_layer {
        let bytes = (0..hp.n_head)
            .flat_map(|h| (sink + h as f32 * 0.5).to_le_bytes())
            .collect();
        w.add_owned(
            format!("blk.{l}.attn_sinks.weight"),
            GgmlType::F32,
            [hp.n_head, 1],
            bytes,
        )
        .unwrap();
    }
    w
}

/// Logits of 7 tokens in one prefill, with or without the sinks.
fn logits(w: &WeightStore, sinks: bool) -> Vec<f32> {
    let hp = Hp::SMALL;
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 2, CacheConfig::default());
    let uid = c
        .prepare(&params(7, 7, 32, Fusion::ALL), w, |b| {
            build_with_sinks(b, &hp, sinks)
        })
        .unwrap();
    let mut inp = SeqInputs::default();
    inp.fill(&common::tokens(7, hp.vocab, 5), 0, 7);
    c.execute(uid, w, &inp.step()).unwrap().to_vec()
}

#[test]
fn sinks_reach_the_softmax_through_the_graph() {
    let hp = Hp::SMALL;
    let plain = logits(&with_sinks(&hp, 0.0), false);
    let low = logits(&with_sinks(&hp, -1e4), true);
    assert_eq!(
        plain.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        low.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        "a sink far below the scores changes nothing"
    );
    let mid = logits(&with_sinks(&hp, 0.0), true);
    assert_ne!(plain, mid, "sinks near the scores change the logits");
    assert!(mid.iter().all(|x| x.is_finite()));
}

/// Builds one attention node with `sinks` over the test model.
fn attend_with(b: &mut GraphBuilder, sinks: &str) -> Result<usize> {
    let hp = Hp::SMALL;
    let ids = b.input(minfer_graph::InputKind::TokenIds);
    let embd = b.weight(b.weights().id("token_embd.weight")?);
    let x = b.get_rows("x", embd, ids)?;
    let wq = b.weight(b.weights().id("blk.0.attn_q.weight")?);
    let q = b.mat_mul("q", wq, x)?;
    let wk = b.weight(b.weights().id("blk.0.attn_k.weight")?);
    let k = b.mat_mul("k", wk, x)?;
    let ks = b.kv_store("ks", k, 0, KvKind::K)?;
    let vs = b.kv_store("vs", k, 0, KvKind::V)?;
    let s = b.weights().id(sinks)?;
    let p = AttnParams::new(0, hp.n_head, hp.n_head_kv, hp.head_dim);
    b.attention_with_sinks("attn", q, ks, vs, Some(s), p)
}

#[test]
fn sinks_of_the_wrong_shape_or_type_are_refused() {
    let hp = Hp::SMALL;
    let mut w = with_sinks(&hp, 0.0);
    let f16 = vec![0u8; 2 * hp.n_head];
    w.add_owned("sinks_f16", GgmlType::F16, [hp.n_head, 1], f16)
        .unwrap();
    let long = vec![0u8; 4 * (hp.n_head + 1)];
    w.add_owned("sinks_long", GgmlType::F32, [hp.n_head + 1, 1], long)
        .unwrap();
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, CacheConfig::default());
    for bad in ["sinks_f16", "sinks_long", "blk.0.attn_norm.weight"] {
        let r = c.prepare(&params(2, 2, 16, Fusion::ALL), &w, |b| attend_with(b, bad));
        let Err(GraphError::Shape { op, msg, .. }) = r else {
            panic!("{bad}: {r:?}");
        };
        assert_eq!(op, "attention");
        assert!(
            msg.contains("attention sinks") && msg.contains(bad),
            "{msg}"
        );
    }
    let ok = c.prepare(&params(2, 2, 16, Fusion::ALL), &w, |b| {
        attend_with(b, "blk.0.attn_sinks.weight")
    });
    assert!(ok.is_ok(), "{ok:?}");
}
