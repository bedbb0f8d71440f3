//! Loading models: hyperparameters, tensor resolution and the errors that
//! name what is wrong, on synthetic GGUF files and on the real models.

use std::sync::Arc;

use minfer_gguf::{GgufFile, Value};
use minfer_models::testing::TinyModel;
use minfer_models::{Model, ModelError};

fn load(m: &TinyModel) -> Result<Model, ModelError> {
    let file = GgufFile::from_bytes(m.to_bytes().expect("writable")).expect("valid GGUF");
    Model::load(Arc::new(file))
}

#[test]
fn tiny_llama_hparams_and_tied_head() {
    let m = load(&TinyModel::new("llama")).expect("loads");
    let hp = &m.hparams;
    assert_eq!(hp.arch.name(), "llama");
    assert_eq!(
        (hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff),
        (2, 64, 4, 2, 96)
    );
    assert_eq!((hp.head_dim, hp.n_rot, hp.n_vocab), (16, 16, 128));
    assert_eq!((hp.rope_freq_base, hp.rope_freq_scale), (10_000.0, 1.0));
    assert_eq!(hp.rms_eps, 1e-6);
    assert_eq!(hp.n_ctx_train, 256);
    assert!(m.tied_embeddings());
}

#[test]
fn tiny_qwen2_has_biases_and_its_own_head() {
    let m = load(&TinyModel::new("qwen2")).expect("loads");
    assert_eq!(m.arch().name(), "qwen2");
    assert!(!m.tied_embeddings());
    assert!(m.tensors().layers.iter().all(|l| l.bq.is_some()));
}

#[test]
fn qwen2_without_output_weight_ties_the_head() {
    let mut t = TinyModel::new("qwen2");
    t.tied = true;
    assert!(load(&t).expect("loads").tied_embeddings());
}

#[test]
fn unknown_architecture_is_named() {
    let err = load(&TinyModel::new("mamba9")).unwrap_err();
    assert!(
        matches!(err, ModelError::UnknownArchitecture { ref name, .. } if name == "mamba9"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("mamba9") && msg.contains("qwen2"), "{msg}");
}

#[test]
fn missing_tensor_is_named() {
    let mut t = TinyModel::new("llama");
    t.skip = vec!["blk.1.ffn_up.weight".into()];
    let err = load(&t).unwrap_err();
    assert!(err.to_string().contains("blk.1.ffn_up.weight"), "{err}");

    // qwen2 requires its biases; llama merely uses them when present.
    let mut t = TinyModel::new("qwen2");
    t.skip = vec!["blk.0.attn_k.bias".into()];
    let err = load(&t).unwrap_err();
    assert!(
        matches!(err, ModelError::MissingTensor(ref n) if n == "blk.0.attn_k.bias"),
        "{err:?}"
    );
}

#[test]
fn mistyped_key_is_named() {
    let mut t = TinyModel::new("llama");
    t.extra = vec![("llama.block_count".into(), Value::String("two".into()))];
    let err = load(&t).unwrap_err();
    assert!(err.to_string().contains("llama.block_count"), "{err}");
}

#[test]
fn bad_head_counts_are_refused() {
    let mut t = TinyModel::new("llama");
    t.extra = vec![("llama.attention.head_count_kv".into(), Value::U32(3))];
    let err = load(&t).unwrap_err();
    assert!(err.to_string().contains("head_count_kv"), "{err}");
}

#[test]
fn rope_scaling() {
    let mut t = TinyModel::new("llama");
    t.extra = vec![("llama.rope.scaling.factor".into(), Value::F32(4.0))];
    assert_eq!(load(&t).expect("linear").hparams.rope_freq_scale, 0.25);

    t.extra.push((
        "llama.rope.scaling.type".into(),
        Value::String("none".into()),
    ));
    assert_eq!(load(&t).expect("none").hparams.rope_freq_scale, 1.0);

    t.extra = vec![
        ("llama.rope.scaling.factor".into(), Value::F32(4.0)),
        (
            "llama.rope.scaling.type".into(),
            Value::String("yarn".into()),
        ),
    ];
    // YaRN: a quarter of the position, the blend's correction range in
    // pairs, and llama.cpp's magnitude factor (close to 1 before ggml's
    // own `1 + 0.1 ln 4`).
    let hp = load(&t).expect("yarn").hparams;
    assert_eq!(hp.rope_freq_scale, 0.25);
    let yarn = hp.rope_yarn.expect("a YaRN blend");
    assert_eq!(yarn.ext_factor, 1.0);
    assert!(yarn.corr_dims[0] <= yarn.corr_dims[1], "{yarn:?}");
    assert!(
        (hp.rope_attn_factor - 1.0).abs() < 1e-6,
        "{}",
        hp.rope_attn_factor
    );
    assert_eq!(yarn.mix(0), 1.0);
    assert_eq!(yarn.mix(hp.n_rot), 0.0);

    t.extra[1].1 = Value::String("longrope".into());
    let err = load(&t).unwrap_err();
    assert!(matches!(err, ModelError::Unsupported(_)), "{err:?}");
    assert!(err.to_string().contains("longrope"), "{err}");
}

#[test]
fn wrong_tensor_shape_is_named() {
    // Metadata claiming four KV heads over tensors made for two.
    let mut t = TinyModel::new("llama");
    t.extra = vec![("llama.attention.head_count_kv".into(), Value::U32(4))];
    let err = load(&t).unwrap_err();
    assert!(
        matches!(err, ModelError::TensorShape { ref name, .. } if name == "blk.0.attn_k.weight"),
        "{err:?}"
    );
}

#[test]
fn real_models_hparams() {
    if let Some(p) = minfer_testutil::require_model(minfer_testutil::QWEN) {
        let m = Model::open(p).expect("qwen loads");
        let hp = &m.hparams;
        assert_eq!(hp.arch.name(), "qwen2");
        assert_eq!(
            (hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim),
            (24, 896, 14, 2, 64)
        );
        assert_eq!((hp.n_ff, hp.n_vocab, hp.n_rot), (4864, 151_936, 64));
        assert_eq!(hp.rope_freq_base, 1_000_000.0);
        assert_eq!(hp.rms_eps, 1e-6);
        assert!(!m.tied_embeddings());
    }
    if let Some(p) = minfer_testutil::require_model(minfer_testutil::SMOLLM) {
        let m = Model::open(p).expect("smollm loads");
        let hp = &m.hparams;
        assert_eq!(hp.arch.name(), "llama");
        assert_eq!(
            (hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim),
            (30, 576, 9, 3, 64)
        );
        assert_eq!((hp.n_ff, hp.n_vocab), (1536, 49_152));
        assert_eq!((hp.rope_freq_base, hp.rms_eps), (100_000.0, 1e-5));
        assert!(m.tied_embeddings());
    }
}

#[test]
fn qwen3moe_loads_its_experts_and_names_what_is_wrong() {
    let m = load(&TinyModel::new("qwen3moe")).expect("loads");
    assert_eq!(m.arch().name(), "qwen3moe");
    // Every block routes; the stacked experts are marked as such, so a
    // repacked copy keeps each expert's rows apart.
    for l in &m.tensors().layers {
        let minfer_models::layers::FfnTensors::Experts(e) = &l.ffn else {
            panic!("a qwen3moe block without experts");
        };
        assert_eq!((e.shape.n_expert, e.shape.n_used, e.shape.n_ff), (4, 2, 32));
        assert_eq!(m.weights.stacked(e.up), 4);
        assert_eq!(m.weights.stacked(e.router), 1);
    }
    // A token reads its two experts of four, and every other matrix.
    let w = m.weight_bytes();
    assert!(w.active < w.total, "{w:?}");

    // A missing expert tensor is named.
    let mut t = TinyModel::new("qwen3moe");
    t.skip = vec!["blk.1.ffn_down_exps.weight".into()];
    let err = load(&t).unwrap_err();
    assert!(
        matches!(err, ModelError::MissingTensor(ref n) if n == "blk.1.ffn_down_exps.weight"),
        "{err:?}"
    );
    // More experts used than there are, a missing count: the key is named.
    for (key, value) in [
        ("qwen3moe.expert_used_count", Some(Value::from(5u32))),
        ("qwen3moe.expert_used_count", Some(Value::from(0u32))),
        ("qwen3moe.expert_count", None),
    ] {
        let mut t = TinyModel::new("qwen3moe");
        match value {
            Some(v) => t.extra = vec![(key.into(), v)],
            // Without experts the file has no expert keys at all.
            None => t.experts = None,
        }
        let err = load(&t).unwrap_err().to_string();
        assert!(err.contains(key), "{key}: {err}");
    }
}
