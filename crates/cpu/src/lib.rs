//! The CPU backend of minfer: an implementation of
//! [`minfer_graph::Backend`] and [`minfer_graph::HostBackend`] over the
//! kernels crate, on one persistent thread pool. The graph cache holds it
//! as a trait object, as it holds a GPU backend, and never names it.
//!
//! Its kernels are plain functions over f32 slices that never allocate.
//! Activations are rows of `ne0` contiguous values (ggml order).
//! Elementwise ops work in place; the executor copies the first source
//! into the output buffer first when the op cannot reuse it.
//!
//! Every kernel checks the lengths it is given and returns a typed error
//! rather than panicking; the checks are a few compares per call.
//!
//! Modules, bottom up: `check` (the length error), `pool` (node buffers
//! and KV regions), the kernels (`elementwise`, `get_rows`, `rope`,
//! `attention`), `exec` (one node onto the kernels) and `backend` (the
//! trait implementations). This file only declares and re-exports.

mod attention;
mod backend;
mod check;
mod elementwise;
mod exec;
mod get_rows;
pub mod moe;
mod pool;
mod rope;
pub mod tuning;

pub use backend::CpuBackend;

pub use attention::{
    attention, attention_sliding, attention_with_sinks, kv_store, AttnScratch, Windows,
};
pub use elementwise::{
    add_inplace, geglu_inplace, gelu_tanh, mul_inplace, rms_norm, scale_inplace, softmax_inplace,
    tanh_inplace,
};
pub use get_rows::{get_rows, RowTable};
pub use rope::{rope_ext_inplace, rope_inplace};

use minfer_graph::{CacheConfig, GraphCache};
use minfer_kernels::Kernels;

/// A graph cache over a new CPU backend: `kernels` on a pool of
/// `n_threads` threads (the caller included), with `config`.
pub fn graph_cache(kernels: Kernels, n_threads: usize, config: CacheConfig) -> GraphCache {
    GraphCache::with_config(Box::new(CpuBackend::new(kernels, n_threads)), config)
}
