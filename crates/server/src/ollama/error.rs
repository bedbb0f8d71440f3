//! Errors in Ollama's shape, and Ollama's rule for a request's model name.

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::http::ApiError;

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
        let resp = (self.0.status, Json(json!({"error": self.0.message}))).into_response();
        self.0.decorate(resp)
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

/// Checks that a request names its model, as Ollama requires (which
/// model the name means is the pool's to say; `name:latest` is `name`).
///
/// # Errors
/// 400 when the name is empty.
pub fn require_model(name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::bad_param("model", "model is required"));
    }
    Ok(())
}

/// An unknown model in Ollama's words (`model 'NAME' not found`, 404);
/// any other error as it is.
pub fn ollama_not_found(name: &str) -> impl FnOnce(ApiError) -> ApiError + '_ {
    move |e| match e.code {
        Some("model_not_found") => {
            ApiError::bad_param("model", format!("model '{name}' not found"))
                .with_status(axum::http::StatusCode::NOT_FOUND)
        }
        _ => e,
    }
}
