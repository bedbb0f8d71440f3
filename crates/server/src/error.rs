//! Why a server could not start or run.

/// Why a server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The model could not be loaded.
    #[error(transparent)]
    Engine(#[from] minfer_engine::EngineError),
    /// The model given at start could not be loaded (the message names
    /// the file).
    #[error("{0}")]
    Load(String),
    /// The HTTP server or the runtime failed.
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
    /// A setting is out of range.
    #[error("invalid server setting: {0}")]
    Config(String),
}
