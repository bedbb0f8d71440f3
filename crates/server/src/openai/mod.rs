//! OpenAI's API: chat completions, text completions, embeddings and the
//! models listing. Its request types and checks are also the base the
//! other APIs translate into (Ollama, Anthropic's Messages, Responses).

pub mod chat;
pub mod completion;
pub mod embeddings;
mod handle;
pub mod logprobs;
pub mod models;
mod render;
pub mod request;
pub(crate) mod sampling;
mod stream;
