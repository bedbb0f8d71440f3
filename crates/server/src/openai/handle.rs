//! What the chat and text completion endpoints share around their own
//! preparation: reading and preparing the request off the async workers,
//! then admitting it and answering whole or streamed.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use serde::de::DeserializeOwned;

use super::render::{collect, Api, Shape};
use super::request::{ChatRequest, CompletionRequest, Sampling};
use super::stream::stream;
use crate::http::{admit, parse_off_thread, Admission, ApiError};
use crate::models::Served;
use crate::models::{keep, Model};
use crate::state::Shared;

/// A generation request of the OpenAI API.
pub trait Generation: DeserializeOwned + Send + 'static {
    /// Its sampling fields.
    fn sampling(&self) -> &Sampling;
}

impl Generation for ChatRequest {
    fn sampling(&self) -> &Sampling {
        &self.sampling
    }
}

impl Generation for CompletionRequest {
    fn sampling(&self) -> &Sampling {
        &self.sampling
    }
}

/// Reads the body as `R`, then off the async workers checks its model and
/// makes it ready with `prepare` (which allows at most `-np` choices).
///
/// # Errors
/// The body's 413 or 400, 404 for another model, the errors of a wait
/// for the model to load, and `prepare`'s errors.
pub async fn prepared<R: Generation, P: Send + 'static>(
    shared: &Arc<Shared>,
    body: Body,
    prepare: fn(&Served, &R, usize) -> Result<P, ApiError>,
) -> Result<(R, Arc<Model>, P), ApiError> {
    parse_off_thread(shared, body, move |s, req: R| {
        let keep = keep::parse(req.sampling().keep_alive.as_ref())?;
        let model = s.model(&req.sampling().model)?;
        if let Some(k) = keep {
            model.keep_for(k);
        }
        let served = model.served()?;
        let prep = prepare(served, &req, served.cfg.n_parallel)?;
        Ok((req, model, prep))
    })
    .await
}

/// Admits `a` and answers it: streamed when the request asked for it,
/// else as one object once the generation is done. `fill` completes the
/// response's shape, made for `api` with the request's id.
///
/// # Errors
/// 503 while the model loads; the errors of [`admit`].
pub async fn answer(
    shared: &Arc<Shared>,
    api: Api,
    mut a: Admission,
    sampling: &Sampling,
    fill: impl FnOnce(Shape) -> Shape,
) -> Result<Response, ApiError> {
    let report = sampling.report();
    a.report = report;
    let model = a.model.clone();
    let (ticket, rx) = admit(shared, a)?;
    let shape = fill(Shape::new(
        api,
        ticket.id(),
        &model.served()?.id,
        sampling.include_usage(),
    ));
    Ok(if sampling.stream {
        stream(shape, (ticket, rx), report, shared.cfg.keep_alive)
    } else {
        collect(shape, ticket, rx).await
    })
}
