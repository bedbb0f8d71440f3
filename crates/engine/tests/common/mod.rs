//! Helpers shared by the engine's real-model tests.

#![allow(dead_code)]

use std::sync::Arc;

use minfer_engine::{
    Engine, EngineConfig, Event, GenId, GenerateConfig, GenerationStats, LoadedModel,
    SamplingParams, Scheduler,
};
use minfer_models::Model;

/// Loads a real model with its tokenizer and template (the front door), or
/// `None` when it is absent and skipping is allowed.
pub fn loaded(file: &str) -> Option<LoadedModel> {
    let path = minfer_testutil::require_model(file)?;
    Some(LoadedModel::open(&path).expect("the model loads"))
}

/// Runtime settings for the real-model tests: two threads, `n_ctx` cells.
pub fn cfg(n_ctx: u32) -> EngineConfig {
    EngineConfig {
        n_ctx,
        n_threads: 2,
        ..EngineConfig::default()
    }
}

/// Greedy generation of at most `n` tokens.
pub fn greedy(n: usize) -> GenerateConfig {
    GenerateConfig {
        max_tokens: n,
        stop: Vec::new(),
        sampler: SamplingParams::greedy(),
        logprobs: None,
    }
}

/// Loads a real model from the store, or `None` (the test is skipped
/// locally, fails in CI) when it is absent.
pub fn load(file: &str) -> Option<Arc<Model>> {
    let path = minfer_testutil::require_model(file)?;
    Some(Arc::new(Model::open(&path).expect("the real model loads")))
}

/// An engine with llama.cpp's reference settings (f16 KV, the given
/// context) on two threads.
pub fn engine(model: &Arc<Model>, n_ctx: u32) -> Engine {
    let cfg = EngineConfig {
        n_ctx,
        n_threads: 2,
        ..EngineConfig::default()
    };
    Engine::new(Arc::clone(model), cfg).expect("engine")
}

/// Index of the largest value (the first one on ties, as llama.cpp's
/// greedy sampler picks).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// Parses a golden JSON file.
pub fn golden(name: &str) -> serde_json::Value {
    let path = minfer_testutil::golden_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("golden file {}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden JSON")
}

pub mod golden;
pub mod tiny;

/// Sequences of the given lengths of deterministic pseudo-random ids below
/// `n_vocab` (xorshift32 from `seed`).
pub fn random_ids(seed: u32, n_vocab: usize, lens: &[usize]) -> Vec<Vec<u32>> {
    let mut x = seed;
    lens.iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x % n_vocab as u32
                })
                .collect()
        })
        .collect()
}

/// Steps until every id has delivered `Done`; returns text and stats per id.
pub fn drain(s: &mut Scheduler, ids: &[GenId]) -> Vec<(Vec<u8>, GenerationStats)> {
    let mut text = vec![Vec::new(); ids.len()];
    let mut done: Vec<Option<GenerationStats>> = vec![None; ids.len()];
    let mut steps = 0;
    while done.iter().any(Option::is_none) {
        s.step().unwrap();
        steps += 1;
        assert!(steps < 10_000, "the scheduler does not finish");
        for (k, &id) in ids.iter().enumerate() {
            while let Some(ev) = s.next_event(id) {
                match ev {
                    Event::Text(b) => text[k].extend_from_slice(&b),
                    Event::Logprobs(_) | Event::PromptLogprobs(_) => {}
                    Event::Done(st) => done[k] = Some(st),
                }
            }
        }
    }
    text.into_iter()
        .zip(done.into_iter().map(Option::unwrap))
        .collect()
}
