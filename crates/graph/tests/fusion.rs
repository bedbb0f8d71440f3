//! The fusion pass: what it rewrites, that names survive, that dead nodes
//! go, and that fused and unfused graphs compute the same bits.

mod common;

use common::{build, params, run, store, tokens, Hp};
use minfer_graph::fusion::{fuse, FusionReport};
use minfer_graph::{
    BackendPlan, CacheConfig, Fusion, GraphBuilder, GraphCache, InputKind, KvKind, Op, Slot,
    WeightStore,
};
use minfer_kernels::{GgmlType, Kernels};

const N_CTX: u32 = 32;

fn cache() -> GraphCache {
    minfer_cpu::graph_cache(Kernels::detect(), 2, CacheConfig::default())
}

/// Prefill of 6 tokens (all rows out) then 3 decode steps; every logit.
fn logits(w: &WeightStore, hp: &Hp, fusion: Fusion) -> Vec<f32> {
    let seq = tokens(9, hp.vocab, 11);
    let mut c = cache();
    let (mut out, _) = run(&mut c, w, hp, &seq[..6], 0, 6, N_CTX, fusion).unwrap();
    for t in 6..seq.len() {
        out.extend(
            run(&mut c, w, hp, &seq[t..t + 1], t, 1, N_CTX, fusion)
                .unwrap()
                .0,
        );
    }
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn fused_and_unfused_graphs_give_identical_outputs() {
    let hp = Hp::SMALL;
    for ty in [GgmlType::Q8_0, GgmlType::F32] {
        let w = store(&hp, ty, 21);
        let reference = bits(&logits(&w, &hp, Fusion::NONE));
        assert!(reference.iter().all(|&b| f32::from_bits(b).is_finite()));
        for fusion in [
            Fusion::ALL,
            Fusion {
                swiglu: true,
                rope_kv_store: false,
            },
            Fusion {
                swiglu: false,
                rope_kv_store: true,
            },
        ] {
            assert_eq!(
                bits(&logits(&w, &hp, fusion)),
                reference,
                "{ty:?} {fusion:?}"
            );
        }
    }
}

#[test]
fn fused_nodes_take_the_consumer_name() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 22);
    let mut c = cache();
    let uid = c
        .prepare(&params(3, 1, N_CTX, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap();
    assert_eq!(
        c.fusion_report(uid).unwrap(),
        FusionReport {
            swiglu: hp.n_layer,
            rope_kv_store: hp.n_layer,
            removed: 2 * hp.n_layer,
        }
    );
    let g = c.graph(uid).unwrap();
    let node = |name: &str| g.nodes.iter().find(|n| n.name == name);
    for l in 0..hp.n_layer {
        assert_eq!(node(&format!("blk.{l}.ffn_act")).unwrap().op, Op::SwiGlu);
        assert!(matches!(
            node(&format!("blk.{l}.k_store")).unwrap().op,
            Op::RopeKvStore { layer, .. } if layer == l
        ));
        assert!(node(&format!("blk.{l}.ffn_silu")).is_none());
        assert!(node(&format!("blk.{l}.k_rope")).is_none());
        // Q's rope has another consumer kind (attention) and stays.
        assert!(matches!(
            node(&format!("blk.{l}.q_rope")).unwrap().op,
            Op::Rope(_)
        ));
        // The V store has no rope to absorb.
        assert!(matches!(
            node(&format!("blk.{l}.v_store")).unwrap().op,
            Op::KvStore {
                kind: KvKind::V,
                ..
            }
        ));
    }
    // Every source precedes its reader after renumbering.
    for (i, n) in g.nodes.iter().enumerate() {
        assert!(n.srcs.iter().all(|&s| s < i), "{}", n.name);
    }
}

#[test]
fn dead_nodes_are_removed_and_ids_remapped() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 23);
    let p = params(2, 2, N_CTX, Fusion::NONE);
    let mut b = GraphBuilder::new(&w, p);
    let ids = b.input(InputKind::TokenIds);
    let embd = b.weight(w.id("token_embd.weight").unwrap());
    let x = b.get_rows("x", embd, ids).unwrap();
    let unused_w = b.weight(w.id("blk.0.ffn_norm.weight").unwrap());
    let _dead = b.mul("dead", x, unused_w).unwrap();
    let _unused_input = b.input(InputKind::Positions);
    let out = b.scale("out", x, 2.0).unwrap();
    let g = b.finish(out);
    let (f, report) = fuse(g, Fusion::ALL, BackendPlan::Cpu);
    assert_eq!(report.removed, 3);
    let names: Vec<&str> = f.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["inp.tokenids", "token_embd.weight", "x", "out"]);
    assert_eq!(f.output, 3);
    assert_eq!(f.nodes[3].srcs, [2]);
    assert_eq!(f.nodes[2].srcs, [1, 0]);
    assert_eq!(f.inputs, [(InputKind::TokenIds, 0)]);
}

#[test]
fn silu_with_a_second_reader_is_not_fused() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 24);
    let mut b = GraphBuilder::new(&w, params(1, 1, N_CTX, Fusion::ALL));
    let ids = b.input(InputKind::TokenIds);
    let embd = b.weight(w.id("token_embd.weight").unwrap());
    let x = b.get_rows("x", embd, ids).unwrap();
    let s = b.silu("s", x).unwrap();
    let m = b.mul("m", s, x).unwrap();
    let out = b.add("out", m, s).unwrap();
    let (f, report) = fuse(b.finish(out), Fusion::ALL, BackendPlan::Cpu);
    assert_eq!(report, FusionReport::default());
    assert!(f.nodes.iter().any(|n| n.op == Op::Silu));
}

#[test]
fn inplace_follows_the_sole_consumer_rule() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 25);
    let mut c = cache();
    let uid = c
        .prepare(&params(3, 1, N_CTX, Fusion::NONE), &w, |b| build(b, &hp))
        .unwrap();
    let g = c.graph(uid).unwrap().clone();
    let id = |name: &str| g.nodes.iter().position(|n| n.name == name).unwrap();
    let inplace = |name: &str| c.is_inplace(uid, id(name)).unwrap();
    // The bias add is the projection's only reader; the rope of K is the
    // bias add's only reader.
    assert!(inplace("blk.0.q_bias"));
    assert!(inplace("blk.0.k_rope"));
    assert!(inplace("blk.0.attn_norm"));
    // The residual stream is read again by the next norm.
    assert!(!inplace("blk.0.attn_residual"));
    // Never over an input, a weight or a KV token; weights get no buffer.
    assert!(!inplace("inp_embd"));
    let wid = id("blk.0.attn_q.weight");
    assert!(matches!(c.slot(uid, wid), Some(Slot::Weight(_))));
    assert!(matches!(c.slot(uid, id("blk.0.k_store")), Some(Slot::None)));
    assert!(matches!(
        c.slot(uid, id("inp.tokenids")),
        Some(Slot::I32 { .. })
    ));
    // Input buffers are never shared with anything else.
    let i32_buf = |slot: Option<Slot>| match slot {
        Some(Slot::I32 { buf, .. }) => Some(buf),
        _ => None,
    };
    let input_bufs: Vec<usize> = g
        .inputs
        .iter()
        .filter_map(|&(_, n)| i32_buf(c.slot(uid, n)))
        .collect();
    assert_eq!(input_bufs.len(), g.inputs.len());
    for i in 0..g.nodes.len() {
        if g.inputs.iter().all(|&(_, n)| n != i) {
            assert!(i32_buf(c.slot(uid, i)).is_none_or(|b| !input_bufs.contains(&b)));
        }
    }
}
