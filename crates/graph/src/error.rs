//! Typed errors of the graph layer.

use minfer_kernels::KernelError;

use crate::ir::KvKind;

/// What building or executing a graph can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// A weight looked up by a name the model does not have (the field
    /// holds the name).
    #[error("model has no tensor named {0:?}")]
    MissingWeight(String),
    /// A weight whose shape does not fold into rows × columns, or whose
    /// bytes do not match its type and shape.
    #[error("tensor {name:?} has shape {shape:?}, which is not usable as a 2-D matrix")]
    BadWeightShape {
        /// The weight's name.
        name: String,
        /// Its dimensions, innermost first.
        shape: Vec<u64>,
    },
    /// A node whose operands do not fit its operation, found while
    /// building or planning a graph.
    #[error("node {node:?} ({op}): {msg}")]
    Shape {
        /// The node's name.
        node: String,
        /// The node's operation.
        op: &'static str,
        /// What does not fit.
        msg: String,
    },
    /// A token position that is negative or not below the context size.
    #[error("position {pos} is outside the context window of {n_ctx} tokens")]
    PositionOutOfRange {
        /// The position given.
        pos: i64,
        /// The context size.
        n_ctx: usize,
    },
    /// A KV cell index that is negative or not below the number of cells.
    #[error("KV cell {cell} is outside the cache of {n_ctx} cells")]
    CellOutOfRange {
        /// The cell index given.
        cell: i64,
        /// The number of cells.
        n_ctx: usize,
    },
    /// A step input, table or buffer that is inconsistent with the graph
    /// or the cache (a wrong length, a value out of range).
    #[error("input {what}: {msg}")]
    BadInput {
        /// Which input.
        what: &'static str,
        /// What is wrong with it.
        msg: String,
    },
    /// No free KV cell is left.
    #[error("the KV cache is full ({n_ctx} cells)")]
    CacheFull {
        /// The number of cells.
        n_ctx: usize,
    },
    /// A sequence id of 64 or more (the field holds the id).
    #[error("sequence id {0} is out of range (at most 64 sequences)")]
    BadSequence(u32),
    /// A kernel refused its input.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// Memory for a KV region or a node buffer could not be had.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// A layer's KV region that a graph reads or writes does not exist.
    #[error("layer {layer} has no {kind:?} region{where_}")]
    NoKvRegion {
        /// The layer.
        layer: usize,
        /// Keys or values.
        kind: KvKind,
        /// Where it was looked for ("" for the CPU, " on the GPU").
        where_: &'static str,
    },
    /// A KV region exists with another size or format than a graph needs
    /// (regions are sized once per cache).
    #[error("KV region {kind:?} of layer {layer}: {msg}")]
    KvMismatch {
        /// The layer.
        layer: usize,
        /// Keys or values.
        kind: KvKind,
        /// What differs.
        msg: String,
    },
    /// A graph id that the cache (or a backend) does not hold.
    #[error("graph {0} is not in the cache")]
    UnknownGraph(u64),
    /// A model's graph builder gave two different graphs for the same
    /// parameters (the field holds the first difference).
    #[error("non-deterministic builder: {0}")]
    NonDeterministic(String),
    /// A built graph that breaks the rules of the IR (found when it is
    /// planned).
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// A node that its backend cannot execute as planned: an operand in
    /// the wrong kind of buffer, an op the backend does not run, scratch
    /// smaller than planned.
    #[error("node {node:?}: {msg}")]
    Exec {
        /// The node's name (or what was being read).
        node: String,
        /// What went wrong.
        msg: String,
    },
    /// A device backend failed (the GPU's driver, a missing backend).
    #[error("{backend} backend: {msg}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// Its message.
        msg: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;
