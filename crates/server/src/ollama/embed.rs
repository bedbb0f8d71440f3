//! Ollama's embedding endpoints: `/api/embed` and its legacy
//! `/api/embeddings`, computed as OpenAI's `/v1/embeddings` is.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ollama_model, OllamaError};
use crate::http::{parse_off_thread, ApiError};
use crate::openai::embeddings::{check_dimensions, embed as compute, pooling, tokenize, Input};
use crate::state::Shared;

type St = State<Arc<Shared>>;

/// The body of Ollama's `POST /api/embed`. `options` (`num_ctx`,
/// `temperature`, ...) change nothing in an embedding of the loaded model
/// and `keep_alive` nothing for a server that keeps it loaded, so they are
/// accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct OllamaEmbedRequest {
    /// The model (required, as in Ollama).
    #[serde(default)]
    pub model: String,
    /// A string or a list of strings.
    pub input: Value,
    /// Cut inputs longer than the context to its length (the default);
    /// `false` refuses them.
    #[serde(default)]
    pub truncate: Option<bool>,
    /// The output width: only the model's own is possible.
    #[serde(default)]
    pub dimensions: Option<u64>,
}

/// The body of Ollama's legacy `POST /api/embeddings` (`options` and
/// `keep_alive` ignored, as for `/api/embed`).
#[derive(Debug, Deserialize)]
pub struct OllamaLegacyRequest {
    /// The model (required, as in Ollama).
    #[serde(default)]
    pub model: String,
    /// The one text.
    pub prompt: String,
}

/// Ollama's `input`: a string or a list of strings.
///
/// # Errors
/// 400 naming `input` for any other shape or an empty list.
pub fn parse_ollama_input(v: &Value) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::bad_param("input", "`input` must be a string or a list of strings");
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) if items.is_empty() => {
            Err(ApiError::bad_param("input", "`input` is an empty list"))
        }
        Value::Array(items) => items
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        _ => Err(bad()),
    }
}

/// Ollama's `/api/embed` response body.
#[derive(Debug, Serialize)]
pub struct OllamaEmbedResponse<'a> {
    model: &'a str,
    embeddings: &'a [Vec<f32>],
    /// Nanoseconds from the request's arrival to its answer.
    total_duration: u64,
    /// Nanoseconds spent loading the model: none, it is loaded.
    load_duration: u64,
    prompt_eval_count: usize,
}

/// Ollama's legacy `/api/embeddings` response body.
#[derive(Debug, Serialize)]
pub struct OllamaLegacyResponse<'a> {
    embedding: &'a [f32],
}

/// `POST /api/embed` (Ollama).
pub async fn embed(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let (model, held, ids, pooling) =
        parse_off_thread(&shared, body, move |s, req: OllamaEmbedRequest| {
            let held = ollama_model(s, &req.model)?.hold();
            let served = held.model().served()?;
            check_dimensions(req.dimensions, served.loaded.model().hparams.n_embd)?;
            let texts = parse_ollama_input(&req.input)?;
            let inputs: Vec<Input> = texts.into_iter().map(Input::Text).collect();
            let mut ids = tokenize(served, &inputs);
            let n_ctx = served.cfg.engine.n_ctx as usize;
            if req.truncate.unwrap_or(true) {
                for v in &mut ids {
                    v.truncate(n_ctx);
                }
            } else if ids.iter().any(|v| v.len() > n_ctx) {
                return Err(ApiError::bad_param(
                    "input",
                    "the input length exceeds the context length",
                ));
            }
            let pooling = pooling(served)?;
            Ok((req.model, held, ids, pooling))
        })
        .await?;
    let prompt_tokens: usize = ids.iter().map(Vec::len).sum();
    let vectors = compute(&shared, held, ids, pooling, true).await?;
    Ok(Json(OllamaEmbedResponse {
        model: &model,
        embeddings: &vectors,
        total_duration: started.elapsed().as_nanos() as u64,
        load_duration: 0,
        prompt_eval_count: prompt_tokens,
    })
    .into_response())
}

/// `POST /api/embeddings` (Ollama's legacy endpoint): one vector, as
/// computed, not normalized (as Ollama answers it; `/api/embed` normalizes).
pub async fn embeddings(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let (held, ids, pooling) =
        parse_off_thread(&shared, body, move |s, req: OllamaLegacyRequest| {
            let held = ollama_model(s, &req.model)?.hold();
            let served = held.model().served()?;
            let ids = tokenize(served, &[Input::Text(req.prompt)]);
            let pooling = pooling(served)?;
            Ok((held, ids, pooling))
        })
        .await?;
    let mut vectors = compute(&shared, held, ids, pooling, false).await?;
    let v = vectors.pop().unwrap_or_default();
    Ok(Json(OllamaLegacyResponse { embedding: &v }).into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ollama_inputs_are_strings() {
        assert_eq!(parse_ollama_input(&json!("x")).unwrap(), ["x"]);
        assert!(parse_ollama_input(&json!([1])).is_err());
    }
}
