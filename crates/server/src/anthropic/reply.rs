//! The Messages API's answer objects and errors: ids, content blocks,
//! the stop reason, usage, the message envelope, and errors in
//! Anthropic's shape `{"type": "error", "error": {…}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minfer_engine::StopReason;
use serde_json::{json, Value};

use crate::events::Finish;
use crate::http::ApiError;
use crate::translate::Block;

/// Anthropic's error type for a status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// `e` in Anthropic's error shape; the message names the field at fault.
pub fn error_body(e: &ApiError) -> Value {
    let message = match &e.param {
        Some(p) if !e.message.contains(p.as_str()) => format!("{p}: {}", e.message),
        _ => e.message.clone(),
    };
    json!({"type": "error", "error": {"type": error_type(e.status), "message": message}})
}

/// `e` answered in Anthropic's shape with its status.
pub fn error_response(e: ApiError) -> Response {
    e.decorate((e.status, axum::Json(error_body(&e))).into_response())
}

/// Whether `path` is one of this API's (its errors take its shape).
pub fn is_path(path: &str) -> bool {
    let p = path.strip_prefix("/v1").unwrap_or(path);
    p == "/messages" || p == "/messages/count_tokens"
}

/// The ids of one answer.
pub(super) struct Ids {
    /// `msg_…`.
    pub(super) message: String,
    /// The request's number, for the tool-use ids.
    n: u64,
}

impl Ids {
    pub(super) fn new(n: u64) -> Ids {
        Ids {
            message: format!("msg_{n:016x}"),
            n,
        }
    }

    pub(super) fn tool_use(&self, block: usize) -> String {
        format!("toolu_{:016x}{block:02}", self.n)
    }
}

/// Anthropic's `stop_reason` and `stop_sequence`.
pub(super) fn stop(f: &Finish, calls: bool, stops: &[String]) -> (&'static str, Value) {
    if calls {
        return ("tool_use", Value::Null);
    }
    match f.reason {
        // The engine does not say which stop string it met; with one
        // there is no doubt.
        StopReason::StopString => (
            "stop_sequence",
            json!(stops.first().filter(|_| stops.len() == 1)),
        ),
        _ if f.cut_off() => ("max_tokens", Value::Null),
        _ => ("end_turn", Value::Null),
    }
}

/// A tool call's `input`: its arguments as JSON.
fn input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments))
}

pub(super) fn content_block(ids: &Ids, i: usize, b: &Block) -> Value {
    match b {
        Block::Text(t) => json!({"type": "text", "text": t}),
        // No signature: nothing here verifies thinking sent back.
        Block::Reasoning(t) => json!({"type": "thinking", "thinking": t, "signature": ""}),
        Block::Call(c) => json!({"type": "tool_use", "id": ids.tool_use(i),
            "name": c.name, "input": input(&c.arguments)}),
    }
}

/// Anthropic's `usage`: `input_tokens` counts only the prompt tokens that
/// were computed; those the prefix cache held are `cache_read_input_tokens`.
pub(super) fn usage(prompt: usize, cached: usize, output: usize) -> Value {
    json!({
        "input_tokens": prompt.saturating_sub(cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output,
    })
}

pub(super) fn message(ids: &Ids, model: &str, content: Vec<Value>, usage: Value) -> Value {
    json!({
        "id": ids.message,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": null,
        "stop_sequence": null,
        "usage": usage,
    })
}

#[cfg(test)]
mod tests {
    use minfer_engine::StopReason;

    use super::*;

    #[test]
    fn errors_take_anthropics_shape() {
        let b = error_body(&ApiError::bad_param(
            "max_tokens",
            "max_tokens: Field required",
        ));
        assert_eq!(b["type"], "error");
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["message"], "max_tokens: Field required");
        let b = error_body(&ApiError::unavailable("busy"));
        assert_eq!(b["error"]["type"], "overloaded_error");
        let b = error_body(&ApiError::unknown_model("x", "y"));
        assert_eq!(b["error"]["type"], "not_found_error");
        assert!(is_path("/v1/messages") && is_path("/messages/count_tokens"));
        assert!(!is_path("/v1/chat/completions"));
    }

    #[test]
    fn stop_reasons() {
        let f = |reason| Finish {
            prompt_tokens: 1,
            completion_tokens: 1,
            cached_tokens: 0,
            reason,
        };
        let one = vec!["END".to_string()];
        assert_eq!(stop(&f(StopReason::Eog), false, &one).0, "end_turn");
        assert_eq!(stop(&f(StopReason::Grammar), true, &one).0, "tool_use");
        assert_eq!(stop(&f(StopReason::MaxTokens), false, &one).0, "max_tokens");
        assert_eq!(
            stop(&f(StopReason::StopString), false, &one),
            ("stop_sequence", json!("END"))
        );
    }
}
