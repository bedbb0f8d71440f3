//! `GET /v1/models` and `GET /v1/models/{id}`: the one model served.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::http::ApiError;
use crate::state::{Served, Shared};

fn model_object(served: &Served) -> serde_json::Value {
    let mut v = json!({
        "id": served.id,
        "object": "model",
        "created": 0,
        "owned_by": "minfer",
    });
    // llama-server's fields, for the names given with --alias and --tags.
    let (aliases, tags) = &served.named;
    if !aliases.is_empty() {
        v["aliases"] = json!(aliases);
    }
    if !tags.is_empty() {
        v["tags"] = json!(tags);
    }
    v
}

/// `GET /v1/models`.
pub async fn list(State(shared): State<Arc<Shared>>) -> Result<Response, ApiError> {
    let served = shared.served()?;
    Ok(Json(json!({"object": "list", "data": [model_object(served)]})).into_response())
}

/// `GET /v1/models/{id}`.
pub async fn one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let served = shared.served()?;
    served.check_model(&id)?;
    Ok(Json(model_object(served)).into_response())
}
