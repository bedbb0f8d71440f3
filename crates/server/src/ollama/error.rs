//! Errors in Ollama's shape, and Ollama's rule for a request's model name.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::http::ApiError;
use crate::state::Served;

/// An error in Ollama's shape: the status and `{"error": "message"}`,
/// which Ollama's clients raise as their `ResponseError`.
#[derive(Debug)]
pub struct OllamaError(pub ApiError);

impl From<ApiError> for OllamaError {
    fn from(e: ApiError) -> OllamaError {
        OllamaError(e)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        (self.0.status, Json(json!({"error": self.0.message}))).into_response()
    }
}

/// `e` as the API of `path` shapes errors: Ollama's under `/api/`, else
/// OpenAI's.
pub fn error_response(path: &str, e: ApiError) -> Response {
    if path.starts_with("/api/") {
        OllamaError(e).into_response()
    } else {
        e.into_response()
    }
}

/// Checks a request's model name: required, as in Ollama; any name is the
/// served model unless `--strict-model`, and `name:latest` is `name`
/// (Ollama's default tag, which `/api/tags` lists).
pub fn check_model(served: &Served, name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::bad_param("model", "model is required"));
    }
    let bare = name.strip_suffix(":latest").unwrap_or(name);
    if served.check_model(name).is_ok() || served.check_model(bare).is_ok() {
        Ok(())
    } else {
        Err(
            ApiError::bad_param("model", format!("model '{name}' not found"))
                .with_status(StatusCode::NOT_FOUND),
        )
    }
}
