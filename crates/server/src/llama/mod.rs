//! llama-server's own endpoints, kept for the clients and tools written
//! against it: `/health`, `/metrics`, `/tokenize`, `/detokenize`,
//! `/props`, `/slots`, `/apply-template`, the native `/completion`, and
//! the chat page at `/`.

mod completion;
mod endpoints;
mod infill;
mod models;
mod page;
mod props;

pub use completion::completion;
pub use endpoints::{apply_template, chat_input_tokens, detokenize, health, metrics, tokenize};
pub use infill::infill;
pub use models::{load as load_model, unload as unload_model};
pub use page::index;
pub use props::{props, slot_action, slots};
