//! The CPU backend's kernels: plain functions over f32 slices that never
//! allocate. Activations are rows of `ne0` contiguous values (ggml order).
//! Elementwise ops work in place; the executor copies the first source
//! into the output buffer first when the op cannot reuse it.
//!
//! Every kernel checks the lengths it is given and returns a typed error
//! rather than panicking; the checks are a few compares per call.

mod attention;
mod backend;
mod elementwise;
mod exec;
mod get_rows;
mod rope;

pub use backend::CpuBackend;
pub(crate) use backend::{LayerKv, TypedPool};

pub use attention::{attention, attention_sliding, kv_store, AttnScratch, Windows};
pub use elementwise::{
    add_inplace, geglu_inplace, gelu_tanh, mul_inplace, rms_norm, scale_inplace, softmax_inplace,
    tanh_inplace,
};
pub use get_rows::{get_rows, get_rows_packed};
pub use rope::rope_inplace;

use crate::error::GraphError;

/// The error of a kernel given buffers of the wrong length.
fn bad_len(what: &'static str, expected: impl std::fmt::Display, got: usize) -> GraphError {
    GraphError::BadInput {
        what,
        msg: format!("expected {expected} values, got {got}"),
    }
}
