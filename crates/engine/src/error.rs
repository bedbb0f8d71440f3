//! Typed errors of the engine.

use minfer_graph::GraphError;
use minfer_kernels::KernelError;
use minfer_models::ModelError;

/// What creating or driving an [`Engine`](crate::Engine) can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A token would land at a position at or past the context window.
    #[error("the context is full: {n_ctx} tokens")]
    ContextFull {
        /// The context window, in tokens.
        n_ctx: u32,
    },
    /// A batch with no tokens to evaluate.
    #[error("nothing to evaluate: the batch is empty")]
    EmptyBatch,
    /// A token id not below the vocabulary size.
    #[error("token id {token} is outside the vocabulary of {n_vocab} tokens")]
    TokenOutOfRange {
        /// The token id given.
        token: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// A rollback to a position past the cursor.
    #[error("cannot roll back to position {pos}: only {n_past} tokens are cached")]
    Rollback {
        /// The position asked for.
        pos: u32,
        /// Tokens cached, the furthest position a rollback can reach.
        n_past: u32,
    },
    /// A configuration value out of range (the field says which).
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// An argument out of range or inconsistent with the others (the field
    /// says which).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A kernel refused its input.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// Building or running the compute graph failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The model's metadata or tensors are unusable.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Result alias of this crate.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
