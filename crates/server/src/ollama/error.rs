//! Errors in Ollama's shape, and Ollama's rule for a request's model name.

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use std::sync::Arc;

use crate::http::ApiError;
use crate::models::Model;
use crate::state::Preparing;

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

/// A model this server does not know, in Ollama's words (`model 'NAME'
/// not found`, 404).
pub fn ollama_unknown(name: &str) -> ApiError {
    ApiError::bad_param("model", format!("model '{name}' not found"))
        .with_status(axum::http::StatusCode::NOT_FOUND)
}

/// An unknown model in Ollama's words ([`ollama_unknown`]); any other
/// error as it is.
pub fn ollama_not_found(name: &str) -> impl FnOnce(ApiError) -> ApiError + '_ {
    move |e| match e.code {
        Some("model_not_found") => ollama_unknown(name),
        _ => e,
    }
}

/// The model an Ollama request names (required, as in Ollama), loaded
/// (see [`Preparing::model`]), with Ollama's not-found error.
///
/// # Errors
/// 400 without a name, [`ollama_unknown`], and the errors of a wait for
/// the model.
pub fn ollama_model(s: &Preparing, name: &str) -> Result<Arc<Model>, ApiError> {
    require_model(name)?;
    s.model(name).map_err(ollama_not_found(name))
}
