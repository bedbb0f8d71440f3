//! llama-server's `GET /props` and `GET /slots`: what the server runs and
//! what each of its `-np` places is doing, in llama-server's field names,
//! for the tools and web pages written against it.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::models::Served;
use crate::state::Shared;

type St = State<Arc<Shared>>;

/// The sampling settings a request gets when it sets none, as
/// llama-server's `params` object names them (the ones minfer has): the
/// server's `--temp` and `--seed`, else llama.cpp's defaults (seed -1: a
/// fresh one per request).
fn default_params(served: &Served) -> Value {
    let defaults = served.defaults();
    let n_predict = match defaults.max_tokens {
        0 => -1,
        n => n as i64,
    };
    let s = minfer_engine::SamplingParams::default();
    json!({
        "n_predict": n_predict,
        "seed": defaults.seed.map_or(-1, |s| s as i64),
        "temperature": defaults.temp.unwrap_or(s.temp),
        "top_k": s.top_k,
        "top_p": s.top_p,
        "min_p": s.min_p,
        "stream": false,
        "stop": [],
    })
}

/// The context a sequence may fill: minfer's KV cells are one pool that
/// the sequences share (llama-server's `--kv-unified`), so any one may use
/// all of `n_ctx`.
fn slot_n_ctx(served: &Served) -> u32 {
    served.cfg.engine.n_ctx
}

/// `?model=…` of a request that describes one model.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Which {
    /// The model (none: the default one).
    #[serde(default)]
    pub model: String,
}

/// What a server with no default model says of itself, in llama-server
/// router's fields.
fn router_props(shared: &Shared) -> Value {
    json!({
        "role": "router",
        "max_instances": shared.cfg.models.max,
        "models_autoload": shared.cfg.models.autoload,
        "model_alias": "minfer",
        "model_path": "none",
        "default_generation_settings": {"params": {}, "n_ctx": 0},
        "build_info": format!("minfer {}", env!("CARGO_PKG_VERSION")),
    })
}

fn token_text(served: &Served, id: Option<u32>) -> Value {
    id.map_or(Value::Null, |id| {
        json!(String::from_utf8_lossy(
            served.loaded.tokenizer().decode_token(id)
        ))
    })
}

/// `GET /props`.
pub async fn props(State(shared): St, Query(which): Query<Which>) -> Result<Response, ApiError> {
    if which.model.is_empty() && !shared.models.has_default() {
        return Ok(Json(router_props(&shared)).into_response());
    }
    let model = shared.current(&which.model)?;
    let served = model.served()?;
    let tok = served.loaded.tokenizer();
    Ok(Json(json!({
        "default_generation_settings": {
            "n_ctx": slot_n_ctx(served),
            "params": default_params(served),
        },
        "total_slots": served.cfg.n_parallel,
        "model_alias": served.id,
        "model_path": served.loaded.path().display().to_string(),
        "modalities": {"vision": false, "video": false, "audio": false},
        "endpoint_slots": shared.cfg.slots,
        "endpoint_props": false,
        "endpoint_metrics": true,
        "chat_template": served.template.as_ref().map_or("", |t| t.source()),
        "bos_token": token_text(served, tok.bos()),
        "eos_token": token_text(served, tok.eos()),
        "build_info": format!("minfer {}", env!("CARGO_PKG_VERSION")),
        "is_sleeping": false,
    }))
    .into_response())
}

/// `GET /slots`: one entry per `-np` place; the first ones are busy when
/// that many requests run (minfer does not pin a request to a place).
/// 501 when the server was started with `--no-slots`, as llama-server.
pub async fn slots(State(shared): St, Query(which): Query<Which>) -> Result<Response, ApiError> {
    if !shared.cfg.slots {
        return Err(ApiError::bad_request(
            "the slots endpoint is off: start the server without --no-slots",
        )
        .with_status(StatusCode::NOT_IMPLEMENTED)
        .with_code("not_supported"));
    }
    let model = shared.current(&which.model)?;
    let served = model.served()?;
    let busy = model.running().min(served.cfg.n_parallel);
    let slots: Vec<Value> = (0..served.cfg.n_parallel)
        .map(|id| {
            json!({
                "id": id,
                "n_ctx": slot_n_ctx(served),
                "speculative": served.cfg.speculation.is_some(),
                "is_processing": id < busy,
            })
        })
        .collect();
    Ok(Json(slots).into_response())
}

/// `POST /slots/{id}?action=…`'s query.
#[derive(Debug, serde::Deserialize)]
pub struct SlotQuery {
    /// `save`, `restore` or `erase`.
    #[serde(default)]
    pub action: String,
    /// The model (none: the default one).
    #[serde(default)]
    pub model: String,
}

/// `POST /slots/{id}?action=save|restore|erase`: llama-server's slot
/// files, in `--slot-save-path` (see `crate::slots`). The body names the
/// file (`{"filename": "…"}`, a plain name inside that directory).
pub async fn slot_action(
    State(shared): St,
    axum::extract::Path(id): axum::extract::Path<String>,
    Query(q): Query<SlotQuery>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let not_supported = |m: &str| {
        ApiError::bad_request(m)
            .with_status(StatusCode::NOT_IMPLEMENTED)
            .with_code("not_supported")
    };
    let Some(dir) = shared.cfg.models.slot_save_path.clone() else {
        return Err(not_supported(
            "slot actions are off: start the server with --slot-save-path DIR",
        ));
    };
    let n: usize = id
        .parse()
        .map_err(|_| ApiError::bad_param("id_slot", format!("`{id}` is not a slot number")))?;
    let file = || -> Result<std::path::PathBuf, ApiError> {
        let v: Value = crate::http::parse(&body)?;
        let name = v["filename"].as_str().unwrap_or("");
        let plain = !name.is_empty()
            && !name.starts_with('.')
            && !name.contains(['/', '\\'])
            && !name.chars().any(char::is_control);
        if !plain {
            return Err(ApiError::bad_param(
                "filename",
                "filename must be a plain file name inside --slot-save-path",
            ));
        }
        Ok(dir.join(name))
    };
    let action = match q.action.as_str() {
        "save" => crate::slots::SlotAction::Save(file()?),
        "restore" => crate::slots::SlotAction::Restore(file()?),
        "erase" => crate::slots::SlotAction::Erase,
        other => {
            return Err(ApiError::bad_param(
                "action",
                format!("action must be save, restore or erase, got `{other}`"),
            ))
        }
    };
    let model = shared.current(&q.model)?;
    let (reply, rx) = tokio::sync::oneshot::channel();
    model.send(crate::worker::Cmd::Slot { n, action, reply });
    match rx.await {
        Ok(Ok(v)) => Ok(Json(v).into_response()),
        Ok(Err(why)) => Err(ApiError::bad_request(why)),
        Err(_) => Err(ApiError::unavailable("the model thread has stopped")),
    }
}
