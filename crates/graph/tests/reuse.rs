//! The graph cache's contract: reuse by params alone, KV regions owned by
//! the cache and kept across rebuilds, the structural check, isolation of
//! caches and the n_ctx guard.

mod common;

use std::cell::Cell;

use common::{build, params, run, store, tokens, Hp, SeqInputs};
use minfer_cpu as cpu;
use minfer_graph::kv::KvRegion;
use minfer_graph::{
    CacheConfig, Fusion, GraphCache, GraphError, GraphKind, GraphParams, KvFormat, KvKind, NodeId,
    OutputKind, Result, RopeParams, RopeStyle, StepInputs, WeightStore,
};
use minfer_kernels::{GgmlType, Kernels};

const N_CTX: u32 = 32;

fn cache() -> GraphCache {
    minfer_cpu::graph_cache(Kernels::detect(), 2, CacheConfig::default())
}

/// A graph with no KV: embedding → norm → LM head. Params such as n_ctx
/// or the KV format change its identity without touching any region.
fn build_plain(b: &mut minfer_graph::GraphBuilder) -> Result<NodeId> {
    let w = b.weights();
    let ids = b.input(minfer_graph::InputKind::TokenIds);
    let embd = b.weight(w.id("token_embd.weight")?);
    let x = b.get_rows("inp_embd", embd, ids)?;
    let h = b.rms_norm("norm", x, 1e-6)?;
    let h = b.select_outputs("out_rows", h)?;
    let out = b.weight(w.id("output.weight")?);
    b.mat_mul("logits", out, h)
}

/// Every params value that differs from `base` in exactly one field.
fn single_field_changes(base: GraphParams) -> Vec<(&'static str, GraphParams)> {
    let mut v = Vec::new();
    let mut p = base;
    p.n_tokens += 1;
    v.push(("n_tokens", p));
    let mut p = base;
    p.n_out -= 1;
    v.push(("n_out", p));
    let mut p = base;
    p.kind = GraphKind::Decode;
    v.push(("kind", p));
    let mut p = base;
    p.output = OutputKind::Hidden;
    v.push(("output", p));
    let mut p = base;
    p.compute.n_ctx *= 2;
    v.push(("n_ctx", p));
    let mut p = base;
    p.compute.kv_format = KvFormat::F16;
    v.push(("kv_format", p));
    let mut p = base;
    p.compute.fusion.swiglu = !p.compute.fusion.swiglu;
    v.push(("fusion.swiglu", p));
    let mut p = base;
    p.compute.fusion.rope_kv_store = !p.compute.fusion.rope_kv_store;
    v.push(("fusion.rope_kv_store", p));
    let mut p = base;
    p.weights_version += 1;
    v.push(("weights_version", p));
    v
}

#[test]
fn reuse_only_with_equal_params() {
    let w = store(&Hp::SMALL, GgmlType::Q8_0, 1);
    let base = params(4, 2, N_CTX, Fusion::ALL);
    let mut c = cache();
    let uid = c.prepare(&base, &w, build_plain).unwrap();
    let again = c
        .prepare(&base.clone(), &w, |_| panic!("equal params must not build"))
        .unwrap();
    assert_eq!(uid, again);
    assert_eq!((c.builds(), c.reuses()), (1, 1));

    let mut seen = vec![uid];
    for (field, p) in single_field_changes(base) {
        assert_ne!(p, base, "{field}");
        let (b0, r0) = (c.builds(), c.reuses());
        let u = c.prepare(&p, &w, build_plain).unwrap();
        assert_eq!(c.builds(), b0 + 1, "changing {field} must rebuild");
        assert_eq!(c.reuses(), r0, "changing {field} must not reuse");
        assert!(!seen.contains(&u), "changing {field} must give a new uid");
        assert!(u > *seen.last().unwrap(), "uids only grow");
        seen.push(u);
        // The changed params are now cached themselves.
        assert_eq!(
            c.prepare(&p, &w, |_| panic!("cached")).unwrap(),
            u,
            "{field}"
        );
        assert_eq!(c.reuses(), r0 + 1);
    }
    // Nine graphs for a capacity of eight: the oldest (the base) is gone,
    // so it is built again, under a new uid; its old uid no longer runs.
    let u = c.prepare(&base, &w, build_plain).unwrap();
    assert_ne!(u, uid);
    let mut inp = SeqInputs::default();
    inp.fill(&[1, 2, 3, 4], 0, 2);
    assert!(matches!(
        c.execute(uid, &w, &inp.step()),
        Err(GraphError::UnknownGraph(_))
    ));
    assert_eq!(
        c.execute(u, &w, &inp.step()).unwrap().len(),
        2 * Hp::SMALL.vocab
    );
}

#[test]
fn fusion_toggles_are_part_of_the_identity() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 2);
    let mut c = cache();
    let fused = c
        .prepare(&params(1, 1, N_CTX, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap();
    let plain = c
        .prepare(&params(1, 1, N_CTX, Fusion::NONE), &w, |b| build(b, &hp))
        .unwrap();
    assert_ne!(fused, plain);
    assert_eq!(c.builds(), 2);
    let (gf, gp) = (c.graph(fused).unwrap(), c.graph(plain).unwrap());
    assert_eq!(gp.nodes.len(), gf.nodes.len() + 2 * hp.n_layer);
    assert!(gf.structural_diff(gp).is_some());
    // Both stay cached: toggling back is a reuse, not a rebuild.
    let again = c
        .prepare(&params(1, 1, N_CTX, Fusion::ALL), &w, |_| panic!("cached"))
        .unwrap();
    assert_eq!(again, fused);
}

#[test]
fn mru_capacity_evicts_the_least_recent() {
    let w = store(&Hp::SMALL, GgmlType::Q8_0, 3);
    let config = CacheConfig {
        capacity: 2,
        ..CacheConfig::default()
    };
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, config);
    let a = c
        .prepare(&params(1, 1, N_CTX, Fusion::ALL), &w, build_plain)
        .unwrap();
    let _b = c
        .prepare(&params(2, 1, N_CTX, Fusion::ALL), &w, build_plain)
        .unwrap();
    // Touching `a` makes `b` the least recent.
    c.prepare(&params(1, 1, N_CTX, Fusion::ALL), &w, build_plain)
        .unwrap();
    let _c3 = c
        .prepare(&params(3, 1, N_CTX, Fusion::ALL), &w, build_plain)
        .unwrap();
    assert!(c.graph(a).is_some());
    assert_eq!(c.builds(), 3);
    c.prepare(&params(2, 1, N_CTX, Fusion::ALL), &w, build_plain)
        .unwrap();
    assert_eq!(c.builds(), 4, "the evicted graph is built again");
}

/// Logits of `seq` computed in one batch versus a prefill of its first
/// `split` tokens followed by one decode step per remaining token: the
/// decode graph (a rebuild) reads the K/V the prefill graph wrote.
#[test]
fn kv_regions_survive_a_rebuild() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 4);
    let seq = tokens(9, hp.vocab, 40);
    let split = 5;

    let mut full = cache();
    let (all, _) = run(&mut full, &w, &hp, &seq, 0, seq.len(), N_CTX, Fusion::ALL).unwrap();

    let mut c = cache();
    let (pre, u_pre) = run(&mut c, &w, &hp, &seq[..split], 0, 1, N_CTX, Fusion::ALL).unwrap();
    let stats = c.alloc_stats();
    assert_eq!(stats.kv_regions, 2 * hp.n_layer);
    assert_eq!(pre, all[(split - 1) * hp.vocab..split * hp.vocab]);
    let mut u_dec = None;
    for t in split..seq.len() {
        let (logits, u) = run(&mut c, &w, &hp, &seq[t..t + 1], t, 1, N_CTX, Fusion::ALL).unwrap();
        assert_ne!(u, u_pre);
        assert!(
            u_dec.is_none_or(|d| d == u),
            "every decode step reuses one graph"
        );
        u_dec = Some(u);
        let want = &all[t * hp.vocab..(t + 1) * hp.vocab];
        assert_eq!(logits, want, "decode step at position {t}");
    }
    assert_eq!(c.builds(), 2);
    assert_eq!(c.reuses(), (seq.len() - split - 1) as u64);
    let after = c.alloc_stats();
    assert_eq!(
        after.kv_regions, stats.kv_regions,
        "a rebuild creates no region"
    );
    assert_eq!(after.kv_bytes, stats.kv_bytes);
    let kv_row = hp.n_head_kv * hp.head_dim;
    assert_eq!(after.kv_bytes, 2 * hp.n_layer * kv_row * N_CTX as usize * 4);
    let r = c.kv_region(0, KvKind::K).unwrap();
    assert_eq!((r.row_elems(), r.n_ctx()), (kv_row, N_CTX as usize));
}

#[test]
fn decode_steps_create_no_buffers() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 5);
    let seq = tokens(8, hp.vocab, 50);
    let mut c = cache();
    run(&mut c, &w, &hp, &seq[..6], 0, 1, N_CTX, Fusion::ALL).unwrap();
    run(&mut c, &w, &hp, &seq[6..7], 6, 1, N_CTX, Fusion::ALL).unwrap();
    let s = c.alloc_stats();
    run(&mut c, &w, &hp, &seq[7..8], 7, 1, N_CTX, Fusion::ALL).unwrap();
    assert_eq!(c.alloc_stats(), s);
    assert!(s.buffers_created > 0 && s.buffer_bytes > 0);
}

#[test]
fn kv_geometry_is_fixed_per_cache() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 6);
    let mut c = cache();
    c.prepare(&params(2, 1, N_CTX, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap();
    let err = c
        .prepare(&params(2, 1, N_CTX * 2, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap_err();
    assert!(err.to_string().contains("KV region"), "{err}");
}

#[test]
fn structural_check_catches_a_nondeterministic_builder() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 7);
    let p = params(2, 1, N_CTX, Fusion::ALL);
    let calls = Cell::new(0);
    // Adds a node on every build after the first: its topology is not a
    // function of the params.
    let sneaky = |b: &mut minfer_graph::GraphBuilder| -> Result<NodeId> {
        calls.set(calls.get() + 1);
        let out = build_plain(b)?;
        if calls.get() > 1 {
            return b.scale("extra", out, 1.0);
        }
        Ok(out)
    };
    let mut c = cache();
    c.set_verify(true);
    c.prepare(&p, &w, sneaky).unwrap();
    let err = c.prepare(&p, &w, sneaky).unwrap_err();
    assert!(
        err.to_string().contains("non-deterministic builder"),
        "{err}"
    );

    // A deterministic builder passes the same check.
    let mut c = cache();
    c.set_verify(true);
    let u = c.prepare(&p, &w, |b| build(b, &hp)).unwrap();
    assert_eq!(c.prepare(&p, &w, |b| build(b, &hp)).unwrap(), u);
}

#[test]
fn two_caches_do_not_share_kv() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 8);
    let x = tokens(5, hp.vocab, 80);
    let y = tokens(5, hp.vocab, 81);
    let next = [7];
    let mut a = cache();
    let mut b = cache();
    run(&mut a, &w, &hp, &x, 0, 1, N_CTX, Fusion::ALL).unwrap();
    // `b` writes other tokens into the same cells of its own regions.
    run(&mut b, &w, &hp, &y, 0, 1, N_CTX, Fusion::ALL).unwrap();
    let (la, _) = run(&mut a, &w, &hp, &next, 5, 1, N_CTX, Fusion::ALL).unwrap();
    let (lb, _) = run(&mut b, &w, &hp, &next, 5, 1, N_CTX, Fusion::ALL).unwrap();

    let mut reference = cache();
    run(&mut reference, &w, &hp, &x, 0, 1, N_CTX, Fusion::ALL).unwrap();
    let (want, _) = run(&mut reference, &w, &hp, &next, 5, 1, N_CTX, Fusion::ALL).unwrap();
    assert_eq!(la, want);
    assert_ne!(la, lb);
}

#[test]
fn a_position_past_n_ctx_is_an_error() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 9);
    let n_ctx = 8u32;
    let mut c = cache();
    run(&mut c, &w, &hp, &[1, 2, 3], 0, 1, n_ctx, Fusion::ALL).unwrap();
    let uid = c
        .prepare(&params(1, 1, n_ctx, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap();
    let window: Vec<i32> = (0..n_ctx as i32).collect();
    let mut exec_at = |pos: i32, cell: i32| -> Result<()> {
        let step = StepInputs {
            token_ids: &[4],
            positions: &[pos],
            kv_cells: &[cell],
            window_offsets: &[0, 1],
            window_cells: &window[..1],
            out_ids: &[0],
            ..StepInputs::default()
        };
        c.execute(uid, &w, &step).map(|_| ())
    };
    match exec_at(n_ctx as i32, 0) {
        Err(GraphError::PositionOutOfRange { pos, n_ctx: n }) => assert_eq!((pos, n), (8, 8)),
        other => panic!("expected PositionOutOfRange, got {other:?}"),
    }
    assert!(matches!(
        exec_at(-1, 0),
        Err(GraphError::PositionOutOfRange { .. })
    ));
    assert!(matches!(
        exec_at(3, n_ctx as i32),
        Err(GraphError::CellOutOfRange { .. })
    ));
    // The last valid position runs.
    exec_at(n_ctx as i32 - 1, 3).unwrap();
    // The refused steps wrote nothing (the valid one wrote cell 3 only):
    // K of cell 0 still holds token 1's.
    let mut reference = cache();
    run(
        &mut reference,
        &w,
        &hp,
        &[1, 2, 3],
        0,
        1,
        n_ctx,
        Fusion::ALL,
    )
    .unwrap();
    let k = |c: &GraphCache| {
        let mut row = vec![0.0; hp.n_head_kv * hp.head_dim];
        c.kv_region(0, KvKind::K)
            .unwrap()
            .read_row(0, &mut row)
            .unwrap();
        row
    };
    assert_eq!(k(&c), k(&reference));
}

#[test]
fn kernels_check_positions_and_cells_too() {
    let p = RopeParams {
        style: RopeStyle::Neox,
        n_head: 1,
        head_dim: 4,
        n_rot: 4,
        freq_base: 10000.0,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn: None,
    };
    let mut x = [1.0f32; 4];
    assert!(matches!(
        cpu::rope_inplace(&mut x, &[8], &p, 8),
        Err(GraphError::PositionOutOfRange { .. })
    ));
    assert!(cpu::rope_inplace(&mut x, &[7], &p, 8).is_ok());
    let mut region = KvRegion::new(KvFormat::F32, 4, 8).unwrap();
    assert!(matches!(
        cpu::kv_store(&mut region, &x, &[8]),
        Err(GraphError::CellOutOfRange { .. })
    ));
}

#[test]
fn bad_inputs_are_typed_errors() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 10);
    let mut c = cache();
    let uid = c
        .prepare(&params(2, 1, N_CTX, Fusion::ALL), &w, |b| build(b, &hp))
        .unwrap();
    let mut inp = SeqInputs::default();
    inp.fill(&[1, 2], 0, 1);
    let mut bad = inp.step();
    bad.token_ids = &[1];
    assert!(matches!(
        c.execute(uid, &w, &bad),
        Err(GraphError::BadInput {
            what: "token_ids",
            ..
        })
    ));
    let mut bad = inp.step();
    bad.window_offsets = &[0, 2, 1];
    assert!(matches!(
        c.execute(uid, &w, &bad),
        Err(GraphError::BadInput { .. })
    ));
    // A token id outside the vocabulary is refused by the embedding kernel.
    let oov = [1, hp.vocab as i32];
    let mut bad = inp.step();
    bad.token_ids = &oov;
    assert!(matches!(
        c.execute(uid, &w, &bad),
        Err(GraphError::BadInput { .. })
    ));
    // A store that lacks a weight the graph reads is refused up front.
    assert!(c.execute(uid, &w, &inp.step()).is_ok());
    assert!(c.execute(uid, &WeightStore::new(), &inp.step()).is_err());
    // A builder error surfaces as is and caches nothing.
    let err = c
        .prepare(&params(3, 1, N_CTX, Fusion::ALL), &w, |b| {
            let id = b.weights().id("no.such.tensor")?;
            Ok(b.weight(id))
        })
        .unwrap_err();
    assert!(matches!(err, GraphError::MissingWeight(_)));
}

#[test]
fn a_cache_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<GraphCache>();
}
