//! Typed errors of the graph layer.

use minfer_kernels::KernelError;

/// What building or executing a graph can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("model has no tensor named {0:?}")]
    MissingWeight(String),
    #[error("tensor {name:?} has shape {shape:?}, which is not usable as a 2-D matrix")]
    BadWeightShape { name: String, shape: Vec<u64> },
    #[error("node {node:?} ({op}): {msg}")]
    Shape {
        node: String,
        op: &'static str,
        msg: String,
    },
    #[error("position {pos} is outside the context window of {n_ctx} tokens")]
    PositionOutOfRange { pos: i64, n_ctx: usize },
    #[error("KV cell {cell} is outside the cache of {n_ctx} cells")]
    CellOutOfRange { cell: i64, n_ctx: usize },
    #[error("input {what}: {msg}")]
    BadInput { what: &'static str, msg: String },
    #[error("the KV cache is full ({n_ctx} cells)")]
    CacheFull { n_ctx: usize },
    #[error("sequence id {0} is out of range (at most 64 sequences)")]
    BadSequence(u32),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("graph: {0}")]
    Other(String),
}

/// Result alias of this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;
