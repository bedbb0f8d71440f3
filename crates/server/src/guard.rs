//! What every request passes through before its handler: CORS
//! preflights, the API key, the CORS headers on the answer, and the count
//! of requests per endpoint and status in `/metrics`. An error here takes
//! the shape of the API the path belongs to.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::http::ApiError;
use crate::state::Shared;
use crate::{anthropic, ollama};

/// The endpoint a path is counted under in `/metrics`.
fn endpoint(path: &str) -> String {
    if path == "/completions" || path == "/completion" {
        return "/completion".to_string();
    }
    let p = path.strip_prefix("/v1").unwrap_or(path);
    match p {
        "/chat/completions"
        | "/completions"
        | "/models"
        | "/messages"
        | "/messages/count_tokens"
        | "/responses"
        | "/embeddings" => format!("/v1{p}"),
        "/health" | "/metrics" | "/tokenize" | "/detokenize" | "/props" | "/slots"
        | "/apply-template"
            if p == path =>
        {
            p.to_string()
        }
        _ if p == path && ollama::PATHS.contains(&p) => p.to_string(),
        "/api/embed" | "/api/embeddings" if p == path => p.to_string(),
        _ if p.starts_with("/models/") => "/v1/models/{id}".to_string(),
        _ => "other".to_string(),
    }
}

/// Answers CORS preflights (before authentication: browsers send them
/// without credentials), checks the API key (every endpoint but
/// `/health`), adds the CORS headers, and counts the request under its
/// endpoint and status.
pub async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let endpoint = endpoint(&path);
    let cors = &shared.cors;
    if let Some(resp) = cors.preflight(req.method(), req.headers()) {
        shared.metrics.request(&endpoint, resp.status().as_u16());
        return resp;
    }
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut resp = match &shared.cfg.api_key {
        Some(key) if path != "/health" && !authorized(&req, key) => {
            if anthropic::is_path(&path) {
                anthropic::error_response(ApiError::unauthorized())
            } else {
                ollama::error_response(&path, ApiError::unauthorized())
            }
        }
        _ => next.run(req).await,
    };
    cors.decorate(origin.as_ref(), &mut resp);
    shared.metrics.request(&endpoint, resp.status().as_u16());
    resp
}

/// Whether the request carries `key`: `Authorization: Bearer KEY`, or
/// `x-api-key: KEY` as Anthropic's clients send it.
fn authorized(req: &Request, key: &str) -> bool {
    let h = req.headers();
    let bearer = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let given = match bearer.or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok())) {
        Some(g) => g,
        None => return false,
    };
    // Compared in constant time: the key's bytes do not leak through timing.
    given.len() == key.len()
        && given
            .bytes()
            .zip(key.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A known path with a method it does not accept.
pub async fn wrong_method(req: Request) -> ApiError {
    ApiError::bad_request(format!(
        "{} does not accept {}",
        req.uri().path(),
        req.method()
    ))
    .with_status(StatusCode::METHOD_NOT_ALLOWED)
}

/// A path no endpoint serves.
pub async fn fallback(req: Request) -> ApiError {
    ApiError::not_found(req.uri().path())
}
