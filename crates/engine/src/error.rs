//! Typed errors of the engine.

use minfer_graph::GraphError;
use minfer_kernels::KernelError;
use minfer_models::ModelError;

/// What creating or driving an [`Engine`](crate::Engine) can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A token would land at a position at or past the context window.
    #[error("the context is full: {n_ctx} tokens")]
    ContextFull { n_ctx: u32 },
    #[error("nothing to evaluate: the batch is empty")]
    EmptyBatch,
    #[error("token id {token} is outside the vocabulary of {n_vocab} tokens")]
    TokenOutOfRange { token: u32, n_vocab: usize },
    #[error("cannot roll back to position {pos}: only {n_past} tokens are cached")]
    Rollback { pos: u32, n_past: u32 },
    #[error("invalid engine configuration: {0}")]
    Config(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Result alias of this crate.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
