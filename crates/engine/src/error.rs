//! Typed errors of the engine.

use minfer_graph::{GraphError, KernelError};
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
    /// A sequence handle that was removed or released (or never existed).
    #[error("sequence {0} does not exist (it was removed or released)")]
    UnknownSequence(u32),
    /// Every sequence slot holds a live sequence.
    #[error("too many sequences: at most {max} can be live at once")]
    TooManySequences {
        /// The limit.
        max: u32,
    },
    /// The KV cells shared by all sequences cannot hold a step's tokens.
    #[error("the KV cache is full: {needed} new cells needed, {free} free (raise --n-ctx or end other sequences)")]
    CacheFull {
        /// Cells the step needed.
        needed: usize,
        /// Cells that were free (after evicting idle sequences).
        free: usize,
    },
    /// The model could not be found or fetched.
    #[error(transparent)]
    Store(#[from] minfer_store::StoreError),
    /// The file is not a usable model.
    #[error("cannot load {}: {what}", path.display())]
    Load {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A chat feature was asked of a model without a chat template.
    #[error(
        "this model has no chat template (a system message needs one; send the prompt raw instead)"
    )]
    NoTemplate,
    /// The chat template failed on these messages.
    #[error("the model's chat template cannot render this conversation: {0}")]
    Template(String),
    /// A trace or graph dump could not be written.
    #[error("cannot write {}: {msg}", path.display())]
    Output {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        msg: String,
    },
    /// The prompt cache's folder cannot be opened.
    #[error("prompt cache folder {}: {msg}", path.display())]
    PromptCache {
        /// The folder.
        path: std::path::PathBuf,
        /// Why.
        msg: String,
    },
    /// The prompt has no tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt fills the context window.
    #[error("the prompt has {tokens} tokens, which does not fit in the context of {n_ctx} (raise --n-ctx)")]
    PromptTooLong {
        /// Tokens of the prompt.
        tokens: usize,
        /// The context window.
        n_ctx: u32,
    },
    /// An embedding input without tokens.
    #[error("embedding input {index} is empty")]
    EmptyInput {
        /// Its position among the inputs.
        index: usize,
    },
    /// An embedding input longer than the context window.
    #[error("embedding input {index} has {tokens} tokens, more than the context of {n_ctx} (raise --n-ctx)")]
    InputTooLong {
        /// Its position among the inputs.
        index: usize,
        /// Its tokens.
        tokens: usize,
        /// The context window.
        n_ctx: u32,
    },
    /// A configuration value out of range (the field says which).
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// An argument out of range or inconsistent with the others (the field
    /// says which).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A grammar or JSON schema that cannot constrain this model's output:
    /// it does not compile, uses an unsupported feature, or the vocabulary
    /// cannot be used (the text says which).
    #[error("{0}")]
    Grammar(String),
    /// A kernel refused its input.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// Building or running the compute graph failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A session file could not be written, or was refused.
    #[error(transparent)]
    Session(#[from] crate::chat::SessionFileError),
    /// The model's metadata or tensors are unusable.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Result alias of this crate.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Maps a sampler error: grammar failures keep their own kind, everything
/// else is a bad argument.
pub(crate) fn sampler_error(e: minfer_sampler::SamplerError) -> EngineError {
    match e {
        minfer_sampler::SamplerError::Grammar(_)
        | minfer_sampler::SamplerError::GrammarVocab(_)
        | minfer_sampler::SamplerError::GrammarDeadEnd => EngineError::Grammar(e.to_string()),
        e => EngineError::InvalidArgument(format!("sampler: {e}")),
    }
}
