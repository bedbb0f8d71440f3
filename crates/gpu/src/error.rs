//! Typed errors of the GPU backend.

/// What opening a device or running a shader can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No adapter matched the request (the message says which were seen).
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    /// The adapter refused to open a device with the limits asked for.
    #[error("cannot open the GPU device {adapter:?}: {msg}")]
    Device {
        /// The adapter's name.
        adapter: String,
        /// wgpu's message.
        msg: String,
    },
    /// A shader failed to compile or validate (a bug: shaders are fixed).
    #[error("GPU shader {name}: {msg}")]
    Shader {
        /// The kernel's name.
        name: &'static str,
        /// wgpu's validation message.
        msg: String,
    },
    /// A buffer larger than the device allows, or a bad size.
    #[error("GPU buffer {what}: {msg}")]
    Buffer {
        /// What the buffer is for.
        what: String,
        /// What is wrong.
        msg: String,
    },
    /// The device was lost or a submission failed.
    #[error("GPU device error: {0}")]
    Runtime(String),
    /// An op or type this backend does not run.
    #[error("the GPU backend does not support {0}")]
    Unsupported(String),
}

impl From<GpuError> for minfer_graph::GraphError {
    fn from(e: GpuError) -> Self {
        minfer_graph::GraphError::Backend {
            backend: "GPU",
            msg: e.to_string(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;
