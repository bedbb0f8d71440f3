//! The engine of minfer: a model, its graph cache (which owns the KV
//! regions) and the KV cell bookkeeping of one sequence.

mod engine;
mod error;
pub mod generate;
pub mod perplexity;

pub use engine::{Engine, EngineConfig};
pub use error::{EngineError, Result};
pub use perplexity::{perplexity, PplResult};
