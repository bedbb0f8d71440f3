//! `GET /v1/models` and `GET /v1/models/{id}`: every model the server can
//! load. With several, each says where it is in its life as llama-server's
//! router does (`status.value`: `loaded`, `loading`, `unloaded`, `failed`).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::http::ApiError;
use crate::models::Listed;
use crate::state::Shared;

fn model_object(l: &Listed, with_status: bool) -> serde_json::Value {
    let served = l.model.as_ref().and_then(|m| m.served().ok());
    let id = served.map_or(l.entry.id.as_str(), |s| s.id.as_str());
    let mut v = json!({
        "id": id,
        "object": "model",
        "created": 0,
        "owned_by": "minfer",
    });
    // llama-server's fields, for the names given with --alias and --tags.
    let aliases: Vec<String> = match served {
        Some(s) => s.named.0.clone(),
        None => l.entry.cfg.alias.iter().map(|a| a.to_string()).collect(),
    };
    let tags = &l.entry.cfg.tags;
    if !aliases.is_empty() {
        v["aliases"] = json!(aliases);
    }
    if !tags.is_empty() {
        v["tags"] = json!(tags);
    }
    if with_status {
        let mut status = json!({"value": l.status});
        if let Some(why) = &l.error {
            status["failed"] = json!(true);
            status["error"] = json!(why);
        }
        v["status"] = status;
        v["source"] = json!(l.entry.source.as_str());
        if let Some(m) = &l.model {
            v["memory_bytes"] = json!(m.bytes.load(std::sync::atomic::Ordering::Relaxed));
        }
    }
    v
}

/// `GET /v1/models`'s query: `reload=1` reads the catalog's sources again.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Read the preset file and the models directory again first.
    #[serde(default)]
    pub reload: Option<String>,
}

/// `GET /v1/models`.
pub async fn list(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    if q.reload.as_deref().is_some_and(|r| !r.is_empty()) {
        shared.models.reload(&shared.cfg)?;
    }
    let single = shared.models.single();
    if single {
        // The one model, once it is loaded (its id may be an alias).
        shared.current("")?;
    }
    let data: Vec<_> = shared
        .models
        .list()
        .iter()
        .map(|l| model_object(l, !single))
        .collect();
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}

/// `GET /v1/models/{id}`.
pub async fn one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let single = shared.models.single();
    let entry = shared.models.resolve(&id)?;
    let listed = shared.models.list();
    let l = listed
        .iter()
        .find(|l| l.entry.id == entry.id)
        .ok_or_else(|| ApiError::unknown_model(&id, &entry.id))?;
    if single && l.model.as_ref().is_none_or(|m| m.served().is_err()) {
        return Err(ApiError::unavailable("the model is still loading"));
    }
    Ok(Json(model_object(l, !single)).into_response())
}
