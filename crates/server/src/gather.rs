//! Reading a request's whole answer from the model thread: every
//! choice's text, log probabilities and end, for the APIs that answer with
//! one object. A chat answer can be watched on the way, so that the
//! generation stops once every choice's answer is complete.

use tokio::sync::mpsc::UnboundedReceiver;

use crate::events::{Finish, Generated, Out, TokenLogprob};
use crate::http::ApiError;
use crate::models::Ticket;
use crate::output::{Split, Splitter};

/// One choice's whole output.
#[derive(Debug, Clone)]
pub struct Collected {
    /// The text.
    pub text: String,
    /// Its tokens' log probabilities (when asked for).
    pub logprobs: Vec<TokenLogprob>,
    /// Its prompt's log probabilities (`echo` with `logprobs`).
    pub prompt_logprobs: Vec<TokenLogprob>,
    /// Its token ids and the engine's timings of it.
    pub generated: Option<Generated>,
    /// How it ended.
    pub finish: Finish,
}

/// Reads every choice's output to its end. With `watch`, each choice's
/// text also goes through a splitter of that split, and the generation is
/// stopped once every choice's answer is complete although the model goes
/// on (see [`Splitter::ended`]).
///
/// # Errors
/// The request's error, or a 500 when the model thread stopped.
pub async fn gather(
    n: usize,
    rx: &mut UnboundedReceiver<Out>,
    watch: Option<(&Split, &Ticket)>,
) -> Result<Vec<Collected>, ApiError> {
    let mut splitters: Vec<Splitter> = match watch {
        Some((split, _)) if split.tools.is_some() => (0..n).map(|_| Splitter::new(split)).collect(),
        _ => Vec::new(),
    };
    let mut text = vec![String::new(); n];
    let mut logprobs = vec![Vec::new(); n];
    let mut prompt_logprobs = vec![Vec::new(); n];
    let mut generated: Vec<Option<Generated>> = vec![None; n];
    let mut finish: Vec<Option<Finish>> = vec![None; n];
    while finish.iter().any(Option::is_none) {
        match rx.recv().await {
            Some(Out::Text(k, s)) if k < n => {
                text[k].push_str(&s);
                if let (Some(sp), Some((_, ticket))) = (splitters.get_mut(k), watch) {
                    if !sp.ended() {
                        sp.push(&s);
                        if sp.ended() && splitters.iter().all(Splitter::ended) {
                            ticket.stop();
                        }
                    }
                }
            }
            Some(Out::Logprobs(k, v)) if k < n => logprobs[k].push(v),
            Some(Out::PromptLogprobs(k, v)) if k < n => prompt_logprobs[k] = v,
            Some(Out::Generated(k, g)) if k < n => generated[k] = Some(g),
            Some(Out::Done(k, f)) if k < n => finish[k] = Some(f),
            Some(Out::Error(e)) => return Err(ApiError::internal(e)),
            Some(_) => {}
            None => return Err(ApiError::internal("the model thread stopped")),
        }
    }
    Ok(text
        .into_iter()
        .zip(logprobs)
        .zip(prompt_logprobs)
        .zip(generated)
        .zip(finish)
        .filter_map(|((((text, logprobs), prompt_logprobs), generated), f)| {
            f.map(|finish| Collected {
                text,
                logprobs,
                prompt_logprobs,
                generated,
                finish,
            })
        })
        .collect())
}
