//! The allocator's buffer rules: typed pools, liveness reuse, reshape
//! aliasing, in-place writes, and the trace hook.

mod common;

use common::{params, store, Hp};
use minfer_graph::{
    CacheConfig, Fusion, GraphBuilder, InputKind, NodeId, Result, Slot, StepInputs, TraceConfig,
};
use minfer_kernels::{GgmlType, Kernels};

fn embed(b: &mut GraphBuilder) -> Result<NodeId> {
    let w = b.weights();
    let ids = b.input(InputKind::TokenIds);
    let embd = b.weight(w.id("token_embd.weight")?);
    b.get_rows("x", embd, ids)
}

fn f32_buf(s: Option<Slot>) -> Option<usize> {
    match s {
        Some(Slot::F32 { buf, .. }) => Some(buf),
        _ => None,
    }
}

#[test]
fn a_long_chain_reuses_freed_buffers() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::F32, 41);
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, CacheConfig::default());
    // Each rms_norm reads one value and writes a new buffer, so only two
    // f32 buffers are ever live at once.
    let uid = c
        .prepare(&params(2, 2, 16, Fusion::ALL), &w, |b| {
            let mut x = embed(b)?;
            for i in 0..12 {
                x = b.rms_norm(format!("n{i}"), x, 1e-6)?;
            }
            Ok(x)
        })
        .unwrap();
    let s = c.alloc_stats();
    assert_eq!(
        s.buffers_created, 3,
        "one i32 input buffer and two f32 buffers"
    );
    let inputs = StepInputs {
        token_ids: &[3, 5],
        ..StepInputs::default()
    };
    let out = c.execute(uid, &w, &inputs).unwrap().to_vec();
    assert_eq!(out.len(), 2 * hp.d);
    // Normalized rows have a mean square of one.
    for row in out.chunks(hp.d) {
        let ms: f32 = row.iter().map(|v| v * v).sum::<f32>() / hp.d as f32;
        assert!((ms - 1.0).abs() < 1e-3, "{ms}");
    }
}

#[test]
fn reshape_aliases_and_inplace_reuses_the_buffer() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::F32, 42);
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, CacheConfig::default());
    let mut ids = [0; 4];
    let uid = c
        .prepare(&params(2, 2, 16, Fusion::ALL), &w, |b| {
            let x = embed(b)?;
            let r = b.reshape("r", x, [hp.d * 2, 1])?;
            let s = b.scale("s", r, 2.0)?;
            let t = b.scale("t", x, 0.5)?;
            ids = [x, r, s, t];
            let back = b.reshape("back", s, [hp.d, 2])?;
            b.add("out", back, t)
        })
        .unwrap();
    let [x, r, s, t] = ids;
    let g = c.graph(uid).unwrap();
    assert_eq!(g.nodes[r].name, "r");
    // The reshape shares its source's buffer; `s` may not write over it,
    // because `x` is read again by `t`.
    assert_eq!(f32_buf(c.slot(uid, r)), f32_buf(c.slot(uid, x)));
    assert_eq!(c.is_inplace(uid, s), Some(false));
    assert_ne!(f32_buf(c.slot(uid, s)), f32_buf(c.slot(uid, x)));
    // `t` is the last reader of `x` but not its only one: no in-place.
    assert_eq!(c.is_inplace(uid, t), Some(false));
    // `out` adds into the buffer of `back` (a reshape of `s`), which
    // nothing reads afterwards.
    let out = g.output;
    assert_eq!(c.is_inplace(uid, out), Some(true));
    assert_eq!(f32_buf(c.slot(uid, out)), f32_buf(c.slot(uid, s)));
    let inputs = StepInputs {
        token_ids: &[1, 2],
        ..StepInputs::default()
    };
    let out = c.execute(uid, &w, &inputs).unwrap().to_vec();
    let mut embd = vec![0.0f32; 2 * hp.d];
    let table = w.data(w.id("token_embd.weight").unwrap());
    for (row, id) in [1usize, 2].iter().enumerate() {
        for k in 0..hp.d {
            let off = (id * hp.d + k) * 4;
            embd[row * hp.d + k] = f32::from_le_bytes(table[off..off + 4].try_into().unwrap());
        }
    }
    let want: Vec<f32> = embd.iter().map(|v| v * 2.0 + v * 0.5).collect();
    assert_eq!(out, want);
}

#[test]
fn integers_live_in_i32_buffers() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 43);
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, CacheConfig::default());
    let uid = c
        .prepare(&params(3, 1, 16, Fusion::ALL), &w, |b| {
            common::build(b, &hp)
        })
        .unwrap();
    let g = c.graph(uid).unwrap();
    for (kind, node) in &g.inputs {
        let slot = c.slot(uid, *node).unwrap();
        assert!(matches!(slot, Slot::I32 { .. }), "{kind:?}: {slot:?}");
    }
    for (i, n) in g.nodes.iter().enumerate() {
        if n.dtype == minfer_graph::DType::F32 {
            assert!(
                !matches!(c.slot(uid, i), Some(Slot::I32 { .. })),
                "{}",
                n.name
            );
        }
    }
}

#[test]
fn the_trace_hook_runs_when_configured() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 44);
    let config = CacheConfig {
        trace: TraceConfig { census: true },
        ..CacheConfig::default()
    };
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, config);
    let (out, uid) = common::run(&mut c, &w, &hp, &[1, 2], 0, 1, 16, Fusion::ALL).unwrap();
    assert_eq!(out.len(), hp.vocab);
    let splits = c.splits(uid).unwrap();
    assert_eq!(splits.len(), 1);
    assert_eq!(splits[0].nodes, 0..c.graph(uid).unwrap().nodes.len());
}
