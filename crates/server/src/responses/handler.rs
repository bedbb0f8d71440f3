//! `POST /v1/responses`: parse and translate, admit, then answer with the
//! response object, whole or as numbered SSE events.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::request::{scoped, ResponsesRequest};
use super::shape::{echo, Shape};
use super::stream::Stream;
use crate::events::Report;
use crate::http::{admit, parse_off_thread, Admission, ApiError};
use crate::output::Split;
use crate::state::Shared;
use crate::translate::{self, Blocks};

/// `POST /v1/responses`.
pub async fn responses(
    State(shared): State<Arc<Shared>>,
    body: Body,
) -> Result<Response, ApiError> {
    let (req, (model, prep)) = parse_off_thread(&shared, body, move |s, req: ResponsesRequest| {
        let chat = req.to_chat()?;
        Ok((req, translate::prepare(s, &chat)?))
    })
    .await?;
    let split: Split = prep.split;
    let shape_base = (model.served()?.id.clone(), prep.ids.len());
    let mut admission = Admission::one(model, prep.ids, prep.cfgs, "input");
    let report = Report::streamed(req.stream, req.return_progress, req.timings_per_token);
    admission.report = report;
    let (ticket, rx) = admit(&shared, admission)?;
    let shape = Shape {
        n: ticket.id(),
        created: translate::now(),
        model: shape_base.0,
        prompt_tokens: shape_base.1,
        echo: echo(&req),
        scoped: scoped(req.tools.as_deref().unwrap_or_default()),
    };
    if req.stream {
        let mut st = Stream {
            shape,
            blocks: Blocks::new(&split),
            seq: 0,
            report,
            tick: None,
            generated: None,
        };
        let mut first = Vec::new();
        let obj = st.shape.object(&[], None);
        st.ev("response.created", json!({"response": obj}), &mut first);
        st.ev("response.in_progress", json!({"response": obj}), &mut first);
        return Ok(translate::stream(
            first,
            st,
            (ticket, rx),
            shared.cfg.keep_alive,
        ));
    }
    let (blocks, finish) = translate::whole(&split, (ticket, rx)).await?;
    Ok(axum::Json(shape.object(&blocks, Some(&finish))).into_response())
}
