//! A text completion request made ready to run: its prompts (text or
//! token ids, one or a list), fill-in-the-middle with `suffix`, `echo`,
//! and `n` choices per prompt.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;

use super::handle::{answer, prepared};
use super::render::Api;
use super::request::{CompletionRequest, Prompt, Sampling};
use super::sampling::check_vocab;
use crate::config::RequestDefaults;
use crate::http::{Admission, ApiError};
use crate::models::Served;
use crate::state::Shared;
use crate::worker::Part;

/// OpenAI's default for `max_tokens` on the legacy completions endpoint.
const DEFAULT_MAX: usize = 16;

/// A completion request ready for the model thread.
#[derive(Debug)]
pub struct Prepared {
    /// One part per prompt, `n` choices each.
    pub parts: Vec<Part>,
    /// Per choice, the text it starts with (`echo`), else empty.
    pub echo: Vec<String>,
    /// Whether choices carry legacy `logprobs`.
    pub logprobs: bool,
    /// With `echo` and `logprobs`: the alternatives per prompt token to
    /// report for the echoed prompt.
    pub score: Option<u8>,
}

/// The fill-in-the-middle markers, when the vocabulary has each as one
/// special token (Qwen2.5-Coder: `<|fim_prefix|>`…).
pub fn fim_markers(served: &Served) -> Option<[&'static str; 3]> {
    let tok = served.loaded.tokenizer();
    let markers = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"];
    markers
        .iter()
        .all(|m| {
            let ids = tok.encode(m, false, true);
            ids.len() == 1 && tok.is_special(ids[0])
        })
        .then_some(markers)
}

/// `logprobs` of the legacy API: a number of alternatives (0 to 5) or
/// absent; `true` as the chat API sends it is taken as 0.
fn legacy_logprobs(s: &Sampling) -> Result<Option<u8>, ApiError> {
    match &s.logprobs {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => Ok(None),
        Some(serde_json::Value::Bool(true)) => Ok(Some(0)),
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(k) if k <= 5 => Ok(Some(k as u8)),
            _ => Err(ApiError::bad_param(
                "logprobs",
                format!("logprobs must be between 0 and 5, got {n}"),
            )),
        },
        Some(_) => Err(ApiError::bad_param(
            "logprobs",
            "logprobs must be a number of alternatives, 0 to 5",
        )),
    }
}

/// Tokenizes and configures `req` for `served`; `limit` is the most
/// choices a request may have in all.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn prepare(
    served: &Served,
    req: &CompletionRequest,
    limit: usize,
) -> Result<Prepared, ApiError> {
    let logprobs = legacy_logprobs(&req.sampling)?;
    let mut sampling = req.sampling.clone();
    sampling.logprobs = None;
    sampling.top_logprobs = None;
    let mut cfg = sampling.to_config(RequestDefaults {
        max_tokens: DEFAULT_MAX,
        ..served.defaults()
    })?;
    cfg.logprobs = logprobs;
    check_vocab(&cfg, served)?;
    let n = sampling.choices(limit)?;
    let tok = served.loaded.tokenizer();
    // (text shown by echo, token ids)
    let prompts: Vec<(String, Vec<u32>)> = match &req.prompt {
        Prompt::Text(t) => vec![(t.clone(), Vec::new())],
        Prompt::Batch(v) => v.iter().map(|t| (t.clone(), Vec::new())).collect(),
        Prompt::Tokens(ids) => vec![(String::new(), ids.clone())],
        Prompt::TokenBatch(v) => v.iter().map(|ids| (String::new(), ids.clone())).collect(),
    };
    if prompts.is_empty() {
        return Err(ApiError::bad_param("prompt", "the prompt list is empty"));
    }
    if prompts.len() * n > limit {
        return Err(ApiError::bad_param(
            "prompt",
            format!(
                "{} prompts with n = {n} make {} choices; this server runs at most {limit} at once (-np)",
                prompts.len(),
                prompts.len() * n
            ),
        ));
    }
    let suffix = req.suffix.as_deref().filter(|s| !s.is_empty());
    let fim = match suffix {
        None => None,
        Some(_) => Some(fim_markers(served).ok_or_else(|| {
            ApiError::unsupported(
                "suffix",
                &format!("`{}` has no fill-in-the-middle tokens", served.id),
            )
        })?),
    };
    let n_vocab = tok.n_vocab();
    let mut parts = Vec::with_capacity(prompts.len());
    let mut echo = Vec::with_capacity(prompts.len() * n);
    for (text, ids) in prompts {
        let (shown, ids) = if ids.is_empty() {
            let full = match (fim, suffix) {
                (Some([pre, suf, mid]), Some(s)) => format!("{pre}{text}{suf}{s}{mid}"),
                _ => text.clone(),
            };
            (text, served.loaded.tokenize(&full))
        } else {
            if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(ApiError::bad_param(
                    "prompt",
                    format!("token id {bad} is outside the vocabulary of {n_vocab} tokens"),
                ));
            }
            if suffix.is_some() {
                return Err(ApiError::bad_param("suffix", "suffix needs a text prompt"));
            }
            let shown = String::from_utf8_lossy(&tok.decode(&ids, false)).into_owned();
            (shown, ids)
        };
        for _ in 0..n {
            echo.push(if req.echo {
                shown.clone()
            } else {
                String::new()
            });
        }
        parts.push(Part {
            prompt: ids,
            cfgs: Sampling::per_choice(&cfg, n),
        });
    }
    Ok(Prepared {
        parts,
        echo,
        logprobs: logprobs.is_some(),
        score: logprobs.filter(|_| req.echo),
    })
}

/// `POST /v1/completions`.
pub async fn handle(State(shared): State<Arc<Shared>>, body: Body) -> Result<Response, ApiError> {
    let (req, model, prep) = prepared(&shared, body, prepare).await?;
    let n: usize = prep.parts.iter().map(|p| p.cfgs.len()).sum();
    let prompt_tokens = prep.parts.iter().map(|p| p.prompt.len()).sum();
    let (logprobs, echo) = (prep.logprobs, prep.echo);
    let admission = Admission {
        model,
        parts: prep.parts,
        score: prep.score,
        param: "prompt",
        slot: None,
        report: Default::default(),
    };
    answer(&shared, Api::Text, admission, &req.sampling, |shape| {
        shape
            .with_logprobs(logprobs)
            .with_choices(n, prompt_tokens)
            .with_echo(echo)
    })
    .await
}
