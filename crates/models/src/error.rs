//! Typed errors of model loading.

use minfer_gguf::GgufError;
use minfer_graph::GraphError;

/// What loading a model can fail with. Every variant names the key, tensor
/// or architecture at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Reading the GGUF metadata or tensors failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// Registering the weights or building a graph failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The file does not say which architecture it holds.
    #[error("the model file has no general.architecture key")]
    NoArchitecture,
    /// An architecture this crate has no builder for.
    #[error("unknown model architecture {name:?} (supported: {supported})")]
    UnknownArchitecture {
        /// The architecture the file names.
        name: String,
        /// The supported ones, comma-separated.
        supported: String,
    },
    /// A required metadata key is absent (the field holds the key).
    #[error("missing metadata key {0:?}")]
    MissingKey(String),
    /// A metadata value of the wrong type or out of range.
    #[error("metadata key {key:?}: {msg}")]
    BadValue {
        /// The key.
        key: String,
        /// What is wrong with its value.
        msg: String,
    },
    /// A tensor the architecture needs is absent (the field holds its
    /// name).
    #[error("missing tensor {0:?}")]
    MissingTensor(String),
    /// A tensor whose shape does not match the hyperparameters.
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor's name.
        name: String,
        /// The shape the hyperparameters imply, `[ne0, rows]`.
        expected: [usize; 2],
        /// The shape in the file, `[ne0, rows]`.
        found: [usize; 2],
    },
    /// A feature of the model this crate does not implement, such as a
    /// RoPE scaling type (the field describes it).
    #[error("unsupported model feature: {0}")]
    Unsupported(String),
}

/// Result alias of this crate.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
