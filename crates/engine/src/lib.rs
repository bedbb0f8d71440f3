//! The engine of minfer: a model, its graph cache (which owns the KV
//! regions) and the KV cell bookkeeping of one sequence.

mod engine;
mod error;
pub mod generate;
pub mod perplexity;

pub use engine::{Engine, EngineConfig};
pub use error::{EngineError, Result};
pub use perplexity::{perplexity, PplResult};

/// Settings that callers of the engine choose, re-exported so that front
/// ends need not depend on the graph or kernel crates.
pub use minfer_graph::{Fusion, KvFormat};
pub use minfer_kernels::SimdLevel;
