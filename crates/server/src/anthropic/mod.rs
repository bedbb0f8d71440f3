//! Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`)
//! over the chat path: the request is translated into an OpenAI chat
//! request (system, turns with text, `tool_use`, `tool_result` and
//! `thinking` blocks, tools, tool choice, sampling), and the answer comes
//! back as Anthropic's content blocks, whole or as its named SSE events.
//! Errors take Anthropic's shape `{"type": "error", "error": {…}}`.

mod handlers;
mod reply;
mod request;
mod stream;

pub use handlers::{count_tokens, messages};
pub use reply::{error_response, is_path};
