//! The Messages endpoints: parse and translate, admit, then answer whole
//! or as the Messages API's named SSE events.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::reply::{content_block, error_response, message, stop, usage, Ids};
use super::request::MessagesRequest;
use super::stream::{ev, Stream};
use crate::http::{admit, check_prompt, parse_off_thread, Admission, ApiError};
use crate::models::Model;
use crate::openai::chat::Prepared;
use crate::output::Split;
use crate::state::Shared;
use crate::translate::{self, Block, Blocks};

async fn parse_and_prepare(
    shared: &Arc<Shared>,
    body: Body,
    need_max: bool,
) -> Result<(MessagesRequest, Arc<Model>, Prepared), ApiError> {
    parse_off_thread(shared, body, move |s, req: MessagesRequest| {
        let chat = req.to_chat(need_max)?;
        let (model, prep) = translate::prepare(s, &chat)?;
        Ok((req, model, prep))
    })
    .await
}

/// `POST /v1/messages`.
pub async fn messages(State(shared): State<Arc<Shared>>, body: Body) -> Response {
    match run(shared, body).await {
        Ok(r) => r,
        Err(e) => error_response(e),
    }
}

async fn run(shared: Arc<Shared>, body: Body) -> Result<Response, ApiError> {
    let (req, loaded, prep) = parse_and_prepare(&shared, body, true).await?;
    let model = loaded.served()?.id.clone();
    let prompt_tokens = prep.ids.len();
    let split: Split = prep.split;
    let (ticket, rx) = admit(
        &shared,
        Admission::one(loaded, prep.ids, prep.cfgs, "messages"),
    )?;
    let ids = Ids::new(ticket.id());
    let stops = req.stop_sequences.clone().unwrap_or_default();
    if req.stream {
        let first = vec![
            ev(
                "message_start",
                json!({"message": message(&ids, &model, Vec::new(), usage(prompt_tokens, 0, 0))}),
            ),
            ev("ping", json!({})),
        ];
        let sink = Stream {
            ids,
            blocks: Blocks::new(&split),
            stops,
            heard: std::time::Instant::now(),
        };
        return Ok(translate::stream(
            first,
            sink,
            (ticket, rx),
            shared.cfg.keep_alive,
        ));
    }
    let (blocks, finish) = translate::whole(&split, (ticket, rx)).await?;
    let calls = blocks.iter().any(|b| matches!(b, Block::Call(_)));
    let content = blocks
        .iter()
        .enumerate()
        .map(|(i, b)| content_block(&ids, i, b))
        .collect();
    let mut m = message(
        &ids,
        &model,
        content,
        usage(
            prompt_tokens,
            finish.cached_tokens,
            finish.completion_tokens,
        ),
    );
    let (reason, seq) = stop(&finish, calls, &stops);
    m["stop_reason"] = json!(reason);
    m["stop_sequence"] = seq;
    Ok(axum::Json(m).into_response())
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens, as
/// `/v1/messages` would render it.
pub async fn count_tokens(State(shared): State<Arc<Shared>>, body: Body) -> Response {
    let counted = parse_and_prepare(&shared, body, false)
        .await
        .and_then(|(_, model, prep)| {
            // Nothing is admitted, so the prompt is checked here: a
            // prompt that could not run is not counted either.
            check_prompt(&prep.ids, model.entry.cfg.engine.n_ctx, "messages")?;
            Ok(prep.ids.len())
        });
    match counted {
        Ok(n) => axum::Json(json!({"input_tokens": n})).into_response(),
        Err(e) => error_response(e),
    }
}
