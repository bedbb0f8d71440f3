//! llama-server's own endpoints, kept for the clients and tools written
//! against it: `/health`, `/metrics`, `/tokenize`, `/detokenize`, and the
//! chat page at `/`.

mod endpoints;
mod page;

pub use endpoints::{detokenize, health, metrics, tokenize};
pub use page::index;
