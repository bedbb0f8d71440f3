//! A tiny synthetic model, for engine tests that need no real weights.

use std::sync::Arc;

use minfer_engine::{Engine, EngineConfig};
use minfer_gguf::GgufFile;
use minfer_graph::KvFormat;
use minfer_models::testing::TinyModel;
use minfer_models::Model;

/// The tiny model of `arch`.
pub fn model(arch: &str) -> Arc<Model> {
    let file = GgufFile::from_bytes(TinyModel::new(arch).to_bytes().expect("writable"))
        .expect("valid GGUF");
    Arc::new(Model::load(Arc::new(file)).expect("loads"))
}

/// An engine over `model` with a small context.
pub fn engine(model: &Arc<Model>, n_ctx: u32, n_batch: usize, kv: KvFormat) -> Engine {
    let cfg = EngineConfig {
        n_ctx,
        n_threads: 2,
        n_batch,
        kv_format: kv,
        ..EngineConfig::default()
    };
    Engine::new(Arc::clone(model), cfg).expect("engine")
}
