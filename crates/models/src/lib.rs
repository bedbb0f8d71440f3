//! Model architectures for minfer. Each architecture lives in its own
//! folder (`qwen2/`, `llama/`, `qwen3/`, `gemma3/`) and is a short graph
//! builder over the shared blocks of [`layers`], registered by one line in
//! the registry; [`Model`] reads hyperparameters and weights from a GGUF
//! file and picks the builder by `general.architecture`.

mod arch;
mod error;
mod gemma3;
mod gpt_oss;
mod hparams;
pub mod layers;
mod llama;
mod model;
pub mod moe;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen3moe;
mod registry;
mod resolve;
pub mod testing;

pub use arch::Arch;
pub use error::{ModelError, Result};
pub use hparams::HParams;
pub use model::{Model, WeightBytes};
