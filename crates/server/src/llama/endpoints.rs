//! llama-server's endpoints beside the APIs: health, metrics, and the
//! tokenizer both ways.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::http::{parse_off_thread, ApiError};
use crate::openai::request::ChatRequest;
use crate::state::Shared;

type St = State<Arc<Shared>>;

/// `POST /tokenize`.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenizeRequest {
    /// The model whose tokenizer (none: the default model).
    #[serde(default)]
    pub model: String,
    /// The text.
    pub content: String,
    /// Apply the model's BOS/EOS rule (default true).
    #[serde(default = "yes")]
    pub add_special: bool,
    /// Answer `{"id", "piece"}` per token instead of bare ids; the piece
    /// is text where the token's bytes are whole UTF-8, else the bytes.
    #[serde(default)]
    pub with_pieces: bool,
}

/// `POST /detokenize`.
#[derive(Debug, Clone, Deserialize)]
pub struct DetokenizeRequest {
    /// The model whose tokenizer (none: the default model).
    #[serde(default)]
    pub model: String,
    /// Token ids.
    pub tokens: Vec<u32>,
}

fn yes() -> bool {
    true
}

/// 200 once the model given at start is loaded (at once when none was,
/// and again when it has been unloaded: it loads when asked); 503 while
/// it loads and from the start of a shutdown on, so that a router's health check takes the replica out
/// while it drains.
pub async fn health(State(shared): St) -> Response {
    let status = if shared.models.default_loading() {
        "loading"
    } else if shared.draining.load(std::sync::atomic::Ordering::Relaxed) {
        "draining"
    } else {
        return Json(json!({"status": "ok"})).into_response();
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": status })),
    )
        .into_response()
}

/// `GET /metrics`: Prometheus' text format, with the server's start
/// time in a header as llama-server sends it.
pub async fn metrics(State(shared): St) -> Response {
    let started = shared
        .metrics
        .started_unix
        .load(std::sync::atomic::Ordering::Relaxed)
        .to_string();
    (
        [
            (
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4".to_string(),
            ),
            (
                header::HeaderName::from_static("process-start-time-unix"),
                started,
            ),
        ],
        shared.metrics.render(),
    )
        .into_response()
}

/// `POST /tokenize`: the text's token ids.
pub async fn tokenize(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let (req, model) = parse_off_thread(&shared, body, |s, req: TokenizeRequest| {
        let model = s.model(&req.model)?;
        Ok((req, model.hold()))
    })
    .await?;
    let served = model.model().served()?;
    let tok = served.loaded.tokenizer();
    let ids = tok.encode(&req.content, req.add_special, true);
    if !req.with_pieces {
        return Ok(Json(json!({"tokens": ids})).into_response());
    }
    let pieces: Vec<serde_json::Value> = ids
        .iter()
        .map(|&id| {
            let bytes = tok.decode_token(id);
            let piece = match std::str::from_utf8(bytes) {
                Ok(text) => json!(text),
                Err(_) => json!(bytes),
            };
            json!({"id": id, "piece": piece})
        })
        .collect();
    Ok(Json(json!({"tokens": pieces})).into_response())
}

/// `POST /detokenize`: the ids' text.
pub async fn detokenize(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let (req, model) = parse_off_thread(&shared, body, |s, req: DetokenizeRequest| {
        let model = s.model(&req.model)?;
        Ok((req, model.hold()))
    })
    .await?;
    let served = model.model().served()?;
    let tok = served.loaded.tokenizer();
    let n_vocab = tok.n_vocab();
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token id {bad} is outside the vocabulary of {n_vocab} tokens"),
        ));
    }
    let bytes = tok.decode(&req.tokens, true);
    Ok(Json(json!({"content": String::from_utf8_lossy(&bytes)})).into_response())
}

/// `POST /apply-template`: the prompt a chat request's messages make with
/// the server's template (a last assistant message continued), unrun.
pub async fn apply_template(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let prompt = parse_off_thread(&shared, body, |s, req: ChatRequest| {
        let model = s.model(&req.sampling.model)?;
        let (text, _, _) = crate::openai::chat::rendered(model.served()?, &req)?;
        Ok(text)
    })
    .await?;
    Ok(Json(json!({ "prompt": prompt })).into_response())
}

/// `POST /chat/completions/input_tokens`: how many tokens a chat
/// request's prompt takes, unrun (llama-server's counterpart of
/// Anthropic's `count_tokens`).
pub async fn chat_input_tokens(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let n = parse_off_thread(&shared, body, |s, req: ChatRequest| {
        let model = s.model(&req.sampling.model)?;
        let served = model.served()?;
        let (text, _, _) = crate::openai::chat::rendered(served, &req)?;
        Ok(served.loaded.tokenize(&text).len())
    })
    .await?;
    Ok(Json(json!({ "input_tokens": n })).into_response())
}
