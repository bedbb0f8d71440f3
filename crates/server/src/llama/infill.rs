//! llama-server's `POST /infill`: code completion between a prefix and a
//! suffix (what editor plugins such as llama.vim and llama.vscode send),
//! with files of the project as extra context, answered as `/completion`
//! answers.
//!
//! The prompt is llama-server's repository-level fill-in-the-middle form:
//! `[FIM_REP]myproject\n`, then `[FIM_SEP]FILE\nTEXT` per extra file and
//! a last `[FIM_SEP]filename\n`, then `[FIM_PRE]prefix prompt
//! [FIM_SUF]suffix[FIM_MID]`; a vocabulary without the repository tokens
//! separates the files with a `--- snippet ---` line. The prefix keeps its
//! last three quarters of a batch, the suffix what is left of the fourth
//! quarter, and the extra files fill the context up to a batch and twice
//! the answer's length, from their end.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};

use super::completion::{answer, ready, NativeRequest};
use crate::http::{parse_off_thread, ApiError};
use crate::models::Served;
use crate::state::Shared;

/// `POST /infill`.
pub async fn infill(State(shared): State<Arc<Shared>>, body: Body) -> Result<Response, ApiError> {
    let r = parse_off_thread(&shared, body, move |s, mut v: Value| {
        let name = v.get("model").and_then(Value::as_str).unwrap_or("");
        let model = s.model(name)?;
        let ids = fim_prompt(model.served()?, &v)?;
        v["prompt"] = json!(ids);
        let req: NativeRequest = serde_json::from_value(v).map_err(|e| {
            ApiError::bad_request(format!("the body does not match the expected schema: {e}"))
        })?;
        ready(model, &req)
    })
    .await?;
    answer(&shared, r).await
}

fn string_field(v: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::bad_param(
            field,
            format!("\"{field}\" must be a string"),
        )),
    }
}

/// The files of `input_extra`: (file name, text).
fn extra_files(v: &Value) -> Result<Vec<(String, String)>, ApiError> {
    let chunks = match v.get("input_extra") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(ApiError::bad_param(
                "input_extra",
                "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}",
            ))
        }
    };
    chunks
        .iter()
        .map(|c| {
            let text = c.get("text").and_then(Value::as_str).ok_or_else(|| {
                ApiError::bad_param(
                    "input_extra",
                    "extra_context chunk must contain a \"text\" field with a string value",
                )
            })?;
            let filename = match c.get("filename") {
                None => "tmp",
                Some(Value::String(f)) => f.as_str(),
                Some(_) => {
                    return Err(ApiError::bad_param(
                        "input_extra",
                        "extra_context chunk's \"filename\" field must be a string",
                    ))
                }
            };
            Ok((filename.to_string(), text.to_string()))
        })
        .collect()
}

/// The token ids of the fill-in-the-middle prompt of request `v`.
///
/// # Errors
/// A 400 for a model without fill-in-the-middle tokens, a missing
/// `input_prefix` or `input_suffix`, or a field of the wrong type.
fn fim_prompt(served: &Served, v: &Value) -> Result<Vec<u32>, ApiError> {
    let tok = served.loaded.tokenizer();
    let ids = tok.special_ids();
    let (Some(pre), Some(suf), Some(mid)) = (ids.fim_pre, ids.fim_suf, ids.fim_mid) else {
        return Err(ApiError::bad_request(format!(
            "infill is not supported by {}: its vocabulary has no fill-in-the-middle tokens",
            served.id
        ))
        .with_status(axum::http::StatusCode::NOT_IMPLEMENTED)
        .with_code("not_supported"));
    };
    let prefix = string_field(v, "input_prefix")?
        .ok_or_else(|| ApiError::bad_param("input_prefix", "\"input_prefix\" is required"))?;
    let suffix = string_field(v, "input_suffix")?
        .ok_or_else(|| ApiError::bad_param("input_suffix", "\"input_suffix\" is required"))?;
    let prompt = string_field(v, "prompt")?.unwrap_or_default();
    let files = extra_files(v)?;
    let enc = |t: &str| tok.encode(t, false, false);

    let mut extra = Vec::new();
    if let Some(rep) = ids.fim_rep {
        extra.push(rep);
        extra.extend(enc("myproject\n"));
    }
    for (name, text) in &files {
        match ids.fim_sep {
            Some(sep) => {
                extra.push(sep);
                extra.extend(enc(&format!("{name}\n")));
            }
            None => extra.extend(enc("\n\n--- snippet ---\n\n")),
        }
        extra.extend(enc(text));
    }
    if let Some(sep) = ids.fim_sep {
        extra.push(sep);
        extra.extend(enc("filename\n"));
    }

    let cfg = &served.cfg;
    let n_batch = cfg.engine.n_batch.min(cfg.engine.n_ctx as usize);
    let n_predict = match cfg.n_predict {
        0 => -1,
        n => n as i64,
    };
    let prompt_ids = tok.encode(&prompt, false, true);
    let mut prefix_ids = enc(&prefix);
    let mut suffix_ids = enc(&suffix);
    let take_prefix = prefix_ids.len().min(3 * (n_batch / 4));
    let take_suffix = suffix_ids
        .len()
        .min((n_batch / 4).saturating_sub(2 + prompt_ids.len()));
    let room = cfg.engine.n_ctx as i64 - n_batch as i64 - 2 * n_predict;
    let take_extra = (room.max(0) as usize).min(extra.len());
    prefix_ids.drain(..prefix_ids.len() - take_prefix);
    suffix_ids.truncate(take_suffix);

    let mut out: Vec<u32> = extra[extra.len() - take_extra..].to_vec();
    if tok.add_bos() {
        out.extend(tok.bos());
    }
    out.push(pre);
    out.extend(prefix_ids);
    out.extend(prompt_ids);
    out.push(suf);
    out.extend(suffix_ids);
    out.push(mid);
    Ok(out)
}
