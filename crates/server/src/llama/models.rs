//! llama-server router's model endpoints: `POST /models/load` and
//! `POST /models/unload` (`{"model": NAME}`, answered `{"success": true}`
//! once the load has started or the model is gone). `GET /models` is the
//! OpenAI listing, which says each model's state.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::http::{parse, read_body, ApiError};
use crate::state::Shared;

/// The body of both endpoints.
#[derive(Debug, Deserialize)]
struct Named {
    model: String,
}

async fn name(shared: &Shared, body: Body) -> Result<String, ApiError> {
    let body = read_body(shared, body).await?;
    let req: Named = parse(&body)?;
    if req.model.is_empty() {
        return Err(ApiError::bad_param("model", "model must be a model's name"));
    }
    Ok(req.model)
}

/// `POST /models/load`: starts loading a model (making room as a request
/// would) and answers at once; `GET /models` says when it is loaded.
pub async fn load(State(shared): State<Arc<Shared>>, body: Body) -> Result<Response, ApiError> {
    let name = name(&shared, body).await?;
    let s = shared.clone();
    tokio::task::spawn_blocking(move || s.models.load(&name))
        .await
        .map_err(|_| ApiError::internal("loading failed"))??;
    Ok(Json(json!({"success": true})).into_response())
}

/// `POST /models/unload`: unloads a model now, cancelling what it runs.
pub async fn unload(State(shared): State<Arc<Shared>>, body: Body) -> Result<Response, ApiError> {
    let name = name(&shared, body).await?;
    shared.models.unload(&name)?;
    Ok(Json(json!({"success": true})).into_response())
}
