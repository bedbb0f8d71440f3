//! Typed errors of model loading.

use minfer_gguf::GgufError;
use minfer_graph::GraphError;

/// What loading a model can fail with. Every variant names the key, tensor
/// or architecture at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("the model file has no general.architecture key")]
    NoArchitecture,
    #[error("unknown model architecture {name:?} (supported: {supported})")]
    UnknownArchitecture { name: String, supported: String },
    #[error("missing metadata key {0:?}")]
    MissingKey(String),
    #[error("metadata key {key:?}: {msg}")]
    BadValue { key: String, msg: String },
    #[error("missing tensor {0:?}")]
    MissingTensor(String),
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: [usize; 2],
        found: [usize; 2],
    },
    #[error("unsupported model feature: {0}")]
    Unsupported(String),
}

/// Result alias of this crate.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
