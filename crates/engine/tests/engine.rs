//! The engine's contract on a tiny synthetic model: graph reuse, the
//! n_ctx guard, rollback, micro-batches, and typed errors.

mod common;

use std::sync::Arc;

use common::tiny;
use minfer_engine::{EngineConfig, EngineError};
use minfer_gguf::GgufFile;
use minfer_graph::KvFormat;
use minfer_models::testing::TinyModel;
use minfer_models::{Model, ModelError};

fn argmax(v: &[f32]) -> u32 {
    common::argmax(v)
}

#[test]
fn generation_builds_two_graphs() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe"] {
        let m = tiny::model(arch);
        let mut e = tiny::engine(&m, 64, 512, KvFormat::F16);
        e.set_verify_graphs(true);
        let mut next = argmax(e.eval(&[1, 2, 3, 4, 5], false).unwrap());
        for _ in 1..32 {
            next = argmax(e.eval(&[next], false).unwrap());
        }
        assert_eq!(e.n_past(), 5 + 31);
        assert_eq!(e.graph_builds(), 2, "{arch}: prefill + decode");
        assert_eq!(e.graph_reuses(), 30, "{arch}");
        // A second prompt of the same length reuses the prefill graph.
        e.reset();
        e.eval(&[9, 8, 7, 6, 5], false).unwrap();
        assert_eq!(e.graph_builds(), 2);
    }
}

#[test]
fn context_guard() {
    let m = tiny::model("llama");
    let mut e = tiny::engine(&m, 8, 512, KvFormat::F16);
    // Too long from the start: refused before anything runs.
    let err = e.eval(&[1; 9], false).unwrap_err();
    assert!(
        matches!(err, EngineError::ContextFull { n_ctx: 8 }),
        "{err:?}"
    );
    assert_eq!((e.n_past(), e.graph_builds()), (0, 0));

    e.eval(&[1, 2, 3, 4, 5, 6, 7], false).unwrap();
    e.eval(&[8], false).unwrap();
    assert_eq!(e.n_past(), 8);
    let err = e.eval(&[9], false).unwrap_err();
    assert!(
        matches!(err, EngineError::ContextFull { n_ctx: 8 }),
        "{err:?}"
    );
    assert_eq!(e.n_past(), 8);
    assert!(err.to_string().contains('8'));

    // Rolling back makes room again.
    e.rollback(7).unwrap();
    e.eval(&[9], false).unwrap();
}

#[test]
fn bad_input_is_an_error() {
    let m = tiny::model("llama");
    let mut e = tiny::engine(&m, 16, 512, KvFormat::F16);
    assert!(matches!(e.eval(&[], false), Err(EngineError::EmptyBatch)));
    let err = e.eval(&[1, 128], false).unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::TokenOutOfRange {
                token: 128,
                n_vocab: 128
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        e.eval_outputs(&[1, 2], 2),
        Err(EngineError::InvalidArgument(_))
    ));
    assert!(matches!(e.rollback(1), Err(EngineError::Rollback { .. })));
    assert_eq!(e.n_past(), 0);
    let cfg = EngineConfig {
        n_ctx: 0,
        ..EngineConfig::default()
    };
    assert!(matches!(
        minfer_engine::Engine::new(Arc::clone(&m), cfg),
        Err(EngineError::Config(_))
    ));
}

#[test]
fn unknown_architecture_is_named() {
    let file = GgufFile::from_bytes(TinyModel::new("mamba9").to_bytes().unwrap()).unwrap();
    let err = Model::load(Arc::new(file)).unwrap_err();
    assert!(matches!(err, ModelError::UnknownArchitecture { .. }));
    assert!(err.to_string().contains("\"mamba9\""), "{err}");
}

#[test]
fn unsupported_tokenizer_model_is_named() {
    let mut t = TinyModel::new("llama");
    t.extra = vec![("tokenizer.ggml.model".into(), "t5".into())];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t5.gguf");
    std::fs::write(&path, t.to_bytes().unwrap()).unwrap();
    let err = minfer_engine::LoadedModel::open(&path).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("tokenizer") && msg.contains("`t5`") && msg.contains("t5.gguf"),
        "{msg}"
    );
}

#[test]
fn rollback_then_replay_is_identical() {
    let m = tiny::model("qwen2");
    let mut e = tiny::engine(&m, 32, 512, KvFormat::F16);
    e.eval(&[10, 11, 12, 13, 14, 15], false).unwrap();
    let first = e.eval(&[20, 21, 22], false).unwrap().to_vec();
    let after = e.eval(&[30], false).unwrap().to_vec();
    assert_eq!(e.n_past(), 10);
    e.rollback(6).unwrap();
    assert_eq!(e.history(), &[10, 11, 12, 13, 14, 15]);
    assert_eq!(e.eval(&[20, 21, 22], false).unwrap(), &first[..]);
    // A different continuation after a rollback sees none of the old one.
    e.rollback(9).unwrap();
    let other = e.eval(&[31], false).unwrap().to_vec();
    assert_ne!(other, after);
    e.rollback(9).unwrap();
    assert_eq!(e.eval(&[30], false).unwrap(), &after[..]);
    // Batching differently gives the same numbers.
    e.reset();
    assert_eq!(e.n_past(), 0);
    e.eval(&[10, 11, 12, 13, 14, 15, 20, 21, 22], false)
        .unwrap();
    assert_eq!(e.eval(&[30], false).unwrap(), &after[..]);
}

#[test]
fn micro_batches_match_one_batch() {
    let m = tiny::model("llama");
    let tokens: Vec<u32> = (0..23).map(|i| (i * 37 + 5) % 128).collect();
    let mut whole = tiny::engine(&m, 64, 512, KvFormat::F16);
    let all = whole.eval(&tokens, true).unwrap().to_vec();
    assert_eq!(all.len(), tokens.len() * m.n_vocab());
    let mut split = tiny::engine(&m, 64, 5, KvFormat::F16);
    assert_eq!(split.eval(&tokens, true).unwrap(), &all[..]);
    assert_eq!(split.n_past(), 23);
    // Only the last row, and a suffix of rows.
    let mut last = tiny::engine(&m, 64, 5, KvFormat::F16);
    let row = last.eval(&tokens, false).unwrap().to_vec();
    assert_eq!(row, all[22 * 128..]);
    let mut tail = tiny::engine(&m, 64, 5, KvFormat::F16);
    assert_eq!(tail.eval_outputs(&tokens, 12).unwrap(), &all[12 * 128..]);
}

#[test]
fn kv_formats_agree() {
    let m = tiny::model("qwen2");
    let tokens = [4u32, 8, 15, 16, 23, 42];
    let mut reference = None;
    for kv in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
        let mut e = tiny::engine(&m, 32, 512, kv);
        e.eval(&tokens, false).unwrap();
        let l = e.eval(&[7], false).unwrap().to_vec();
        let r = reference.get_or_insert_with(|| l.clone());
        let max = r
            .iter()
            .zip(&l)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max < 0.05, "{kv:?}: max |Δ| {max}");
    }
}

#[test]
fn perplexity_on_tiny_model() {
    let m = tiny::model("llama");
    let tokens: Vec<u32> = (0..40).map(|i| (i * 13 + 1) % 128).collect();
    let mut e = tiny::engine(&m, 16, 512, KvFormat::F16);
    let mut seen = Vec::new();
    let r = minfer_engine::perplexity(&mut e, &tokens, 16, Some(1), |c, n, p| seen.push((c, n, p)))
        .unwrap();
    assert_eq!((r.chunks, r.scored), (2, 2 * 7));
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].2, r.ppl);

    // The same number by hand from all-token logits.
    let mut h = tiny::engine(&m, 16, 512, KvFormat::F16);
    let mut nll = 0.0f64;
    for c in 0..2 {
        let mut chunk = tokens[c * 16..(c + 1) * 16].to_vec();
        chunk[0] = 1;
        h.reset();
        let all = h.eval(&chunk, true).unwrap();
        for p in 8..15 {
            let row = &all[p * 128..(p + 1) * 128];
            let mx = row.iter().copied().fold(f32::MIN, f32::max);
            let z: f64 = row.iter().map(|&v| f64::from((v - mx).exp())).sum();
            nll -= f64::from(row[tokens[c * 16 + p + 1] as usize] - mx) - z.ln();
        }
    }
    let ppl = (nll / 14.0).exp();
    assert!((ppl - r.ppl).abs() < 1e-9 * ppl, "{ppl} vs {}", r.ppl);
    assert!(r.stderr > 0.0);

    // Too few tokens, or chunks longer than the context.
    assert!(minfer_engine::perplexity(&mut e, &tokens[..31], 16, None, |_, _, _| {}).is_err());
    assert!(minfer_engine::perplexity(&mut e, &tokens, 20, None, |_, _, _| {}).is_err());
}
