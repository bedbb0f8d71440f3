//! Model architectures for minfer. Each architecture lives in its own
//! folder (`qwen2/`, `llama/`) and is a short graph builder over the
//! shared blocks of [`layers`]; [`Model`] reads hyperparameters and
//! weights from a GGUF file and picks the builder.

mod arch;
mod error;
mod hparams;
pub mod layers;
mod llama;
mod model;
mod qwen2;
pub mod testing;

pub use arch::Arch;
pub use error::{ModelError, Result};
pub use hparams::HParams;
pub use model::Model;
