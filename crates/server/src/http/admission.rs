//! Admission: where every generation request of every API enters the
//! model thread's queue. Its prompts are checked against the context
//! here, once, and then it gets a place (or a 503).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use super::error::ApiError;
use crate::events::{Out, Report};
use crate::models::{Model, Ticket};
use crate::state::Shared;
use crate::worker::Part;

/// A generation request ready to be admitted.
#[derive(Debug)]
pub struct Admission {
    /// The model that answers it.
    pub model: Arc<Model>,
    /// Its prompts, each with its choices.
    pub parts: Vec<Part>,
    /// Report each prompt's own log-probabilities with this many
    /// alternatives per token (`echo` with `logprobs`).
    pub score: Option<u8>,
    /// The request's field that holds the prompt, named in a 400 about
    /// its length (`messages`, `prompt`, `input`).
    pub param: &'static str,
    /// The slot (llama-server's `id_slot`) it stands for once it ends.
    pub slot: Option<usize>,
    /// What it wants reported while it runs.
    pub report: Report,
}

impl Admission {
    /// One prompt with its choices, unscored.
    pub fn one(
        model: Arc<Model>,
        prompt: Vec<u32>,
        cfgs: Vec<minfer_engine::GenerateConfig>,
        param: &'static str,
    ) -> Admission {
        Admission {
            model,
            parts: vec![Part { prompt, cfgs }],
            score: None,
            param,
            slot: None,
            report: Report::default(),
        }
    }
}

/// An admitted request: its ticket (dropping it cancels) and the
/// receiver of its events.
pub type Admitted = (Ticket, UnboundedReceiver<Out>);

/// Checks that a prompt leaves room to generate in the context window.
///
/// # Errors
/// A 400 naming `param` for an empty prompt or one that fills the
/// context (`context_length_exceeded`).
pub fn check_prompt(ids: &[u32], n_ctx: u32, param: &str) -> Result<(), ApiError> {
    if ids.is_empty() {
        return Err(ApiError::bad_param(param, "the prompt is empty"));
    }
    if ids.len() >= n_ctx as usize {
        return Err(ApiError::bad_param(
            param,
            format!(
                "the prompt has {} tokens, which does not fit in this server's context of {n_ctx} tokens",
                ids.len()
            ),
        )
        .with_code("context_length_exceeded"));
    }
    Ok(())
}

/// Checks every prompt of `a` against the context, then hands it to the
/// model thread.
///
/// # Errors
/// The 400 of [`check_prompt`]; 503 when `-np` are running and `--queue`
/// are waiting, or when the server is shutting down.
pub fn admit(shared: &Shared, a: Admission) -> Result<Admitted, ApiError> {
    if shared.draining.load(Relaxed) {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    let n_ctx = a.model.entry.cfg.engine.n_ctx;
    for p in &a.parts {
        check_prompt(&p.prompt, n_ctx, a.param)?;
    }
    a.model.submit(a.parts, a.score, a.slot, a.report)
}
