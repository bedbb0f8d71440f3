//! Embeddings on the runtime: pooling, normalization, batch invariance,
//! errors, and a cache left as it was. On the tiny synthetic models of
//! every architecture (numerics against llama.cpp are `embed_golden.rs`).

mod common;

use std::sync::Arc;

use common::tiny;
use minfer_engine::{BatchEntry, EngineConfig, EngineError, Pooling, Runtime};
use minfer_gguf::{GgufFile, Value};
use minfer_models::testing::TinyModel;
use minfer_models::Model;

const ARCHS: [&str; 5] = ["qwen2", "llama", "qwen3", "gemma3", "qwen3moe"];

fn runtime(model: &Arc<Model>, n_ctx: u32, n_batch: usize) -> Runtime {
    let cfg = EngineConfig {
        n_ctx,
        n_threads: 2,
        n_batch,
        ..EngineConfig::default()
    };
    Runtime::new(Arc::clone(model), cfg).expect("runtime")
}

/// Inputs of the given lengths, ids below `n_vocab`.
fn inputs(n_vocab: usize, lens: &[usize]) -> Vec<Vec<u32>> {
    common::random_ids(0x2545_f491, n_vocab, lens)
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn vectors_are_unit_length_and_the_same_alone_or_batched() {
    for arch in ARCHS {
        let m = tiny::model(arch);
        let d = m.hparams.n_embd;
        let ins = inputs(m.n_vocab(), &[5, 1, 9, 3]);
        for pooling in [Pooling::Mean, Pooling::Last, Pooling::Cls] {
            let mut rt = runtime(&m, 64, 512);
            let together = rt.embed(&ins, pooling).unwrap();
            assert_eq!(together.len(), ins.len());
            for (i, input) in ins.iter().enumerate() {
                let v = &together[i];
                assert_eq!(v.len(), d, "{arch} {pooling}");
                assert!(
                    (norm(v) - 1.0).abs() < 1e-5,
                    "{arch} {pooling}: norm {}",
                    norm(v)
                );
                let alone = rt.embed(std::slice::from_ref(input), pooling).unwrap();
                // A row is computed the same way whatever else is in the
                // batch: the same bits.
                assert_eq!(alone[0], *v, "{arch} {pooling}: input {i}");
            }
        }
    }
}

#[test]
fn pooling_combines_the_per_token_rows() {
    for arch in ARCHS {
        let m = tiny::model(arch);
        let d = m.hparams.n_embd;
        let ins = inputs(m.n_vocab(), &[6, 2]);
        let mut rt = runtime(&m, 64, 512);
        let rows = rt.embed_raw(&ins, Pooling::None).unwrap();
        let mean = rt.embed_raw(&ins, Pooling::Mean).unwrap();
        let last = rt.embed_raw(&ins, Pooling::Last).unwrap();
        let cls = rt.embed_raw(&ins, Pooling::Cls).unwrap();
        for (i, input) in ins.iter().enumerate() {
            let r = &rows[i];
            assert_eq!(r.len(), input.len() * d);
            assert_eq!(cls[i], r[..d], "{arch}");
            // Last runs the final FFN on one row only: the same values.
            assert_eq!(last[i], r[r.len() - d..], "{arch}");
            for (j, &m) in mean[i].iter().enumerate() {
                let want: f32 = r.chunks(d).map(|row| row[j]).sum::<f32>() / input.len() as f32;
                assert!((m - want).abs() <= 1e-5 * want.abs().max(1.0), "{arch}");
            }
        }
        // Normalized per token with no pooling.
        let unit = rt.embed(&ins[..1], Pooling::None).unwrap();
        for row in unit[0].chunks(d) {
            assert!((norm(row) - 1.0).abs() < 1e-5);
        }
    }
}

#[test]
fn micro_batches_do_not_change_the_vectors() {
    let m = tiny::model("qwen3");
    let ins = inputs(m.n_vocab(), &[7, 11, 4]);
    let want = runtime(&m, 64, 512).embed(&ins, Pooling::Mean).unwrap();
    // Five rows per forward: inputs split across micro-batches.
    let got = runtime(&m, 64, 5).embed(&ins, Pooling::Mean).unwrap();
    assert_eq!(got, want);
}

#[test]
fn the_cache_and_live_sequences_are_left_as_they_were() {
    let m = tiny::model("llama");
    let mut rt = runtime(&m, 64, 512);
    let prompt = inputs(m.n_vocab(), &[8]).remove(0);
    let s = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::last(s, &prompt)]).unwrap();
    let before = rt.usage();
    // A reference: the same sequence's next logits with nothing between.
    let mut other = runtime(&m, 64, 512);
    let t = other.new_sequence().unwrap();
    other.step(&[BatchEntry::last(t, &prompt)]).unwrap();
    let want = other
        .step(&[BatchEntry::last(t, &[3])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();

    let ins = inputs(m.n_vocab(), &[20, 20]);
    rt.embed(&ins, Pooling::Mean).unwrap();
    assert_eq!(rt.usage(), before);
    assert_eq!(rt.history(s).unwrap(), &prompt[..]);
    let got = rt
        .step(&[BatchEntry::last(s, &[3])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    assert_eq!(got, want);
}

#[test]
fn inputs_beyond_the_free_cells_go_in_several_passes() {
    let m = tiny::model("qwen2");
    let ins = inputs(m.n_vocab(), &[12, 12, 12]);
    let want = runtime(&m, 64, 512).embed(&ins, Pooling::Last).unwrap();
    // 16 cells: one input per pass.
    let mut rt = runtime(&m, 16, 512);
    assert_eq!(rt.embed(&ins, Pooling::Last).unwrap(), want);
    // With 8 cells held by a live sequence, 12 tokens no longer fit.
    let s = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::none(s, &ins[0][..8])]).unwrap();
    match rt.embed(&ins, Pooling::Last) {
        Err(EngineError::CacheFull {
            needed: 12,
            free: 8,
        }) => {}
        other => panic!("expected CacheFull, got {other:?}"),
    }
    assert_eq!(rt.usage().used, 8);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let m = tiny::model("gemma3");
    let mut rt = runtime(&m, 16, 512);
    let ok = vec![1u32, 2, 3];
    match rt.embed(&[ok.clone(), vec![]], Pooling::Mean) {
        Err(EngineError::EmptyInput { index: 1 }) => {}
        other => panic!("expected EmptyInput, got {other:?}"),
    }
    match rt.embed(&[vec![1; 17]], Pooling::Mean) {
        Err(EngineError::InputTooLong {
            index: 0,
            tokens: 17,
            n_ctx: 16,
        }) => {}
        other => panic!("expected InputTooLong, got {other:?}"),
    }
    // A whole context is fine: nothing is generated after it.
    assert_eq!(rt.embed(&[vec![1; 16]], Pooling::Mean).unwrap().len(), 1);
    let n_vocab = m.n_vocab() as u32;
    assert!(matches!(
        rt.embed(&[vec![n_vocab]], Pooling::Last),
        Err(EngineError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        rt.embed(&[ok], Pooling::Rank),
        Err(EngineError::InvalidArgument(_))
    ));
    assert!(rt.embed(&[], Pooling::Mean).unwrap().is_empty());
    assert_eq!(rt.usage().used, 0);
}

#[test]
fn the_gguf_pooling_type_is_read_and_absent_means_none() {
    let file = |extra: Vec<(String, Value)>| {
        let mut t = TinyModel::new("qwen2");
        t.extra = extra;
        GgufFile::from_bytes(t.to_bytes().unwrap()).unwrap()
    };
    assert_eq!(Pooling::from_gguf(&file(vec![])).unwrap(), Pooling::None);
    for p in Pooling::ALL {
        let f = file(vec![("qwen2.pooling_type".into(), Value::U32(p.id()))]);
        assert_eq!(Pooling::from_gguf(&f).unwrap(), p);
    }
    let f = file(vec![("qwen2.pooling_type".into(), Value::U32(9))]);
    let e = Pooling::from_gguf(&f).unwrap_err().to_string();
    assert!(e.contains("qwen2.pooling_type") && e.contains('9'), "{e}");
}
