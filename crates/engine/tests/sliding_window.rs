//! Gemma 3's local layers attend to a sliding window: on a tiny synthetic
//! gemma3 model whose layers are all local, a prompt longer than the
//! window gives last-token logits that do not depend on the tokens beyond
//! the layers' combined reach, whether the prompt runs as one batch or
//! token by token. The same model with global layers does depend on them.

use std::sync::Arc;

use minfer_engine::{Engine, EngineConfig};
use minfer_gguf::{GgufFile, Value};
use minfer_graph::KvFormat;
use minfer_models::testing::TinyModel;
use minfer_models::Model;

const WINDOW: u32 = 4;
const N_LAYER: usize = 2;

/// A tiny gemma3 model with a window of [`WINDOW`]; one global layer in
/// every `pattern` (a pattern above the layer count makes all local).
fn gemma(pattern: u32) -> Arc<Model> {
    let mut t = TinyModel::new("gemma3");
    t.n_layer = N_LAYER;
    t.extra = vec![
        (
            "gemma3.attention.sliding_window".into(),
            Value::from(WINDOW),
        ),
        (
            "gemma3.attention.sliding_window_pattern".into(),
            Value::from(pattern),
        ),
    ];
    let file = GgufFile::from_bytes(t.to_bytes().unwrap()).unwrap();
    Arc::new(Model::load(Arc::new(file)).unwrap())
}

fn engine(model: &Arc<Model>) -> Engine {
    let cfg = EngineConfig {
        n_ctx: 64,
        n_threads: 2,
        kv_format: KvFormat::F32,
        ..EngineConfig::default()
    };
    Engine::new(Arc::clone(model), cfg).unwrap()
}

/// Last-token logits of `prompt`, as one batch or one token per step.
fn last_logits(model: &Arc<Model>, prompt: &[u32], one_by_one: bool) -> Vec<f32> {
    let mut eng = engine(model);
    if !one_by_one {
        return eng.eval(prompt, false).unwrap().to_vec();
    }
    let mut last = Vec::new();
    for &t in prompt {
        last = eng.eval(&[t], false).unwrap().to_vec();
    }
    last
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn local_layers_ignore_tokens_outside_their_window() {
    let n = 20;
    let prompt: Vec<u32> = (0..n).map(|i| (i * 37 + 11) % 128).collect();
    // Each local layer looks back WINDOW - 1 positions, so the last token
    // sees the last N_LAYER * (WINDOW - 1) + 1 tokens through the stack.
    let reach = N_LAYER * (WINDOW as usize - 1) + 1;
    let mut far = prompt.clone();
    for t in &mut far[..n as usize - reach] {
        *t = (*t + 5) % 128;
    }
    let mut near = prompt.clone();
    near[n as usize - reach] = (near[n as usize - reach] + 5) % 128;

    let local = gemma(100);
    for one_by_one in [false, true] {
        let base = last_logits(&local, &prompt, one_by_one);
        assert!(
            same_bits(&base, &last_logits(&local, &far, one_by_one)),
            "tokens outside the windows changed the logits (one by one: {one_by_one})"
        );
        assert!(
            !same_bits(&base, &last_logits(&local, &near, one_by_one)),
            "a token inside the reach did not change the logits"
        );
    }
    // A batch and token-by-token runs give the same bits.
    assert!(same_bits(
        &last_logits(&local, &prompt, false),
        &last_logits(&local, &prompt, true)
    ));

    // With a global layer the far tokens matter.
    let mixed = gemma(2);
    assert!(!same_bits(
        &last_logits(&mixed, &prompt, false),
        &last_logits(&mixed, &far, false)
    ));
}
