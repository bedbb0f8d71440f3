//! OpenAI's Responses API (`POST /v1/responses`), stateless, over the chat
//! path: `input` (a string or message, `function_call`,
//! `function_call_output` and `reasoning` items) and `instructions` become
//! chat messages, the function tools and `text.format` the chat request's
//! tools and `response_format`; the answer comes back as output items
//! (reasoning, message, function calls), whole or as the API's named,
//! numbered SSE events. Nothing is stored: `store: true` and
//! `previous_response_id` are refused.

mod handler;
mod request;
mod shape;
mod stream;

pub use handler::responses;
