//! llama-server's `GET /props` and `GET /slots`: what the server runs and
//! what each of its `-np` places is doing, in llama-server's field names,
//! for the tools and web pages written against it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::state::{Served, Shared};

type St = State<Arc<Shared>>;

/// The sampling settings a request gets when it sets none, as
/// llama-server's `params` object names them (the ones minfer has): the
/// server's `--temp` and `--seed`, else llama.cpp's defaults (seed -1: a
/// fresh one per request).
fn default_params(served: &Served) -> Value {
    let n_predict = match served.defaults.max_tokens {
        0 => -1,
        n => n as i64,
    };
    let s = minfer_engine::SamplingParams::default();
    json!({
        "n_predict": n_predict,
        "seed": served.defaults.seed.map_or(-1, |s| s as i64),
        "temperature": served.defaults.temp.unwrap_or(s.temp),
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
fn slot_n_ctx(shared: &Shared) -> u32 {
    shared.cfg.engine.n_ctx
}

fn token_text(served: &Served, id: Option<u32>) -> Value {
    id.map_or(Value::Null, |id| {
        json!(String::from_utf8_lossy(
            served.loaded.tokenizer().decode_token(id)
        ))
    })
}

/// `GET /props`.
pub async fn props(State(shared): St) -> Result<Response, ApiError> {
    let served = shared.served()?;
    let tok = served.loaded.tokenizer();
    Ok(Json(json!({
        "default_generation_settings": {
            "n_ctx": slot_n_ctx(&shared),
            "params": default_params(served),
        },
        "total_slots": shared.cfg.n_parallel,
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
pub async fn slots(State(shared): St) -> Result<Response, ApiError> {
    if !shared.cfg.slots {
        return Err(ApiError::bad_request(
            "the slots endpoint is off: start the server without --no-slots",
        )
        .with_status(StatusCode::NOT_IMPLEMENTED)
        .with_code("not_supported"));
    }
    shared.served()?;
    let busy = shared.running().min(shared.cfg.n_parallel);
    let slots: Vec<Value> = (0..shared.cfg.n_parallel)
        .map(|id| {
            json!({
                "id": id,
                "n_ctx": slot_n_ctx(&shared),
                "speculative": shared.cfg.speculation.is_some(),
                "is_processing": id < busy,
            })
        })
        .collect();
    Ok(Json(slots).into_response())
}
