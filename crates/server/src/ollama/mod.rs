//! Ollama's API beside the OpenAI one, on the same port, so that tools
//! written for Ollama work unchanged: `/api/chat` and `/api/generate`
//! (NDJSON streams by default), `/api/tags`, `/api/show`, `/api/ps`,
//! `/api/version`, and the model management of `/api/pull`,
//! `/api/delete` and `/api/copy`, with errors as `{"error": "message"}`.
//!
//! Requests are translated into the OpenAI side's (see [`request`]), so
//! templates, tools, constraints and checks behave the same on both.

mod embed;
mod error;
mod handlers;
mod info;
mod manage;
mod options;
mod reply;
mod request;
mod time;

pub use embed::{embed, embeddings};
pub use error::error_response;
pub use handlers::{chat, generate, ps, show, tags, unknown, version, wrong_method, PATHS};
pub use manage::{copy, delete, pull};
