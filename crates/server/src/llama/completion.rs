//! llama-server's native `POST /completion`: a raw prompt (text or token
//! ids, one or a list), `n_predict`, `n_probs`, and llama-server's answer
//! fields (`content`, `stop`, `stop_type`, `tokens_predicted`,
//! `tokens_evaluated`, `timings`, ...), streamed as server-sent events of
//! `{"content", "stop": false}` with a last `"stop": true` object that
//! carries the rest, as llama-server sends them (no `[DONE]`).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use minfer_engine::{GenerateConfig, StopReason};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::events::{Finish, Generated, Out, TokenLogprob};
use crate::http::{admit, parse_off_thread, Admission, ApiError};
use crate::openai::request::Sampling;
use crate::openai::sampling::check_vocab;
use crate::state::{Served, Shared, Ticket};
use crate::worker::Part;

/// The most alternatives `n_probs` may ask for.
const MAX_N_PROBS: u32 = 20;

/// `POST /completion`'s body: llama-server's own fields, then the
/// sampling fields it shares with the OpenAI routes.
#[derive(Debug, Deserialize)]
pub struct NativeRequest {
    /// The prompt, in any of llama-server's forms (see [`prompt_ids`]).
    #[serde(default)]
    prompt: Option<Value>,
    /// Answer with the generated token ids too (`tokens`).
    #[serde(default)]
    return_tokens: bool,
    /// Tokens to generate; -1 (or absent): the server's `-n`, else until
    /// the model stops or the context is full.
    #[serde(default)]
    n_predict: Option<i64>,
    /// Alternatives reported per generated token.
    #[serde(default)]
    n_probs: Option<u32>,
    /// llama-server's forms: `{"ID or text": bias}` or `[[ID or text,
    /// bias], ...]`, a text standing for each of its tokens and `false`
    /// for a ban.
    #[serde(default)]
    logit_bias: Option<Value>,
    /// llama-server's probabilities after the sampler chain: refused, as
    /// minfer reports them under the raw logits.
    #[serde(default)]
    post_sampling_probs: bool,
    /// Everything else. Fields of llama-server's that change no result
    /// here (`cache_prompt`: minfer always reuses a cached prefix; `id_slot`)
    /// are read and left.
    #[serde(flatten)]
    sampling: Sampling,
}

/// A native completion ready for the model thread.
struct Prepared {
    parts: Vec<Part>,
    /// Each prompt as text, for the answer's `prompt`.
    prompts: Vec<String>,
    cfg: GenerateConfig,
}

fn prepare(served: &Served, req: &NativeRequest) -> Result<Prepared, ApiError> {
    if req.post_sampling_probs {
        return Err(ApiError::unsupported(
            "post_sampling_probs",
            "probabilities are reported under the model's raw logits, before sampling",
        ));
    }
    let mut sampling = req.sampling.clone();
    if let Some(bias) = &req.logit_bias {
        sampling.logit_bias = Some(token_bias(served, bias)?);
    }
    sampling.max_tokens = match req.n_predict {
        None => None,
        Some(n) if n < 0 => None,
        Some(0) => {
            return Err(ApiError::bad_param(
                "n_predict",
                "n_predict must be -1 (no limit) or at least 1",
            ))
        }
        Some(n) => Some(n as u64),
    };
    let mut cfg = sampling.to_config(served.defaults)?;
    let n_probs = req.n_probs.unwrap_or(0);
    if n_probs > MAX_N_PROBS {
        return Err(ApiError::bad_param(
            "n_probs",
            format!("n_probs must be between 0 and {MAX_N_PROBS}, got {n_probs}"),
        ));
    }
    if n_probs > 0 {
        // At most MAX_N_PROBS, so it fits.
        cfg.logprobs = Some(n_probs as u8);
    }
    check_vocab(&cfg, served)?;
    let tok = served.loaded.tokenizer();
    let n_vocab = tok.n_vocab();
    let prompts = prompt_ids(served, req.prompt.as_ref())?;
    let mut parts = Vec::with_capacity(prompts.len());
    let mut texts = Vec::with_capacity(prompts.len());
    for ids in prompts {
        if let Some(bad) = ids.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(ApiError::bad_param(
                "prompt",
                format!("token id {bad} is outside the vocabulary of {n_vocab} tokens"),
            ));
        }
        texts.push(String::from_utf8_lossy(&tok.decode(&ids, true)).into_owned());
        parts.push(Part {
            prompt: ids,
            cfgs: vec![cfg.clone()],
        });
    }
    Ok(Prepared {
        parts,
        prompts: texts,
        cfg,
    })
}

/// The token ids of each prompt of llama-server's `prompt`: a string; a
/// list of token ids; a list mixing ids and strings (one prompt: the
/// strings tokenized in place, only the first with the model's BOS rule);
/// `{"prompt_string": …}`; or a list of any of these that holds no bare
/// number (one prompt each).
///
/// # Errors
/// A 400 naming `prompt` for anything else, an empty list, or
/// `multimodal_data` (minfer reads text only).
fn prompt_ids(served: &Served, v: Option<&Value>) -> Result<Vec<Vec<u32>>, ApiError> {
    let bad = |why: &str| ApiError::bad_param("prompt", why.to_string());
    let v = v.ok_or_else(|| bad("prompt is required"))?;
    let has_number = |v: &Value| v.as_array().is_some_and(|l| l.iter().any(Value::is_number));
    let prompts: Vec<&Value> = match v {
        Value::Array(list) if !has_number(v) => list.iter().collect(),
        other => vec![other],
    };
    if prompts.is_empty() {
        return Err(bad("the prompt list is empty"));
    }
    prompts
        .into_iter()
        .map(|p| match p {
            Value::Object(o) => {
                if o.contains_key("multimodal_data") {
                    return Err(bad("multimodal_data is not supported: minfer reads text"));
                }
                let inner = o.get("prompt_string").ok_or_else(|| {
                    bad("a prompt object needs `prompt_string`")
                })?;
                mixed_ids(served, inner).ok_or_else(|| bad("prompt_string must be text or a list of ids and texts"))
            }
            other => mixed_ids(served, other).ok_or_else(|| {
                bad("prompt elements must be texts, lists of token ids (with texts among them), or {\"prompt_string\": …} objects")
            }),
        })
        .collect()
}

/// One prompt of text and ids; `None` for another kind of value.
fn mixed_ids(served: &Served, v: &Value) -> Option<Vec<u32>> {
    let tok = served.loaded.tokenizer();
    match v {
        Value::String(t) => Some(served.loaded.tokenize(t)),
        Value::Array(list) => {
            let mut ids = Vec::new();
            for (i, e) in list.iter().enumerate() {
                match e {
                    Value::String(t) => ids.extend(tok.encode(t, i == 0, true)),
                    Value::Number(n) => ids.push(u32::try_from(n.as_u64()?).ok()?),
                    _ => return None,
                }
            }
            Some(ids)
        }
        _ => None,
    }
}

/// llama-server's `logit_bias` as ids (in text) and biases, the form the
/// OpenAI routes take.
fn token_bias(served: &Served, v: &Value) -> Result<HashMap<String, f32>, ApiError> {
    let bad = || {
        ApiError::bad_param(
            "logit_bias",
            "logit_bias must map token ids or texts to a bias (a number, or false for a ban), \
             as an object or a list of [token, bias] pairs",
        )
    };
    let pairs: Vec<(Value, &Value)> = match v {
        Value::Null => Vec::new(),
        Value::Object(m) => m.iter().map(|(k, b)| (json!(k), b)).collect(),
        Value::Array(list) => list
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([k, b]) => Ok((k.clone(), b)),
                _ => Err(bad()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(bad()),
    };
    let mut out = HashMap::new();
    for (k, b) in pairs {
        let bias = match b {
            Value::Bool(false) => -100.0,
            Value::Number(n) => n.as_f64().ok_or_else(bad)? as f32,
            _ => return Err(bad()),
        };
        let ids: Vec<u32> = match &k {
            Value::Number(n) => vec![n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad)?],
            Value::String(t) => match t.parse::<u32>() {
                Ok(id) => vec![id],
                Err(_) => served.loaded.tokenizer().encode(t, false, false),
            },
            _ => return Err(bad()),
        };
        for id in ids {
            out.insert(id.to_string(), bias);
        }
    }
    Ok(out)
}

/// llama-server's name for how a generation ended.
fn stop_type(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Eog | StopReason::Grammar => "eos",
        StopReason::StopString => "word",
        StopReason::MaxTokens | StopReason::ContextFull | StopReason::CacheFull => "limit",
        StopReason::Cancelled => "none",
    }
}

/// One token's entry of `completion_probabilities`, with its ids, as
/// llama-server's.
fn token_probs(lp: &TokenLogprob) -> Value {
    let one = |id: u32, bytes: &[u8], l: Option<f32>| json!({"id": id, "token": String::from_utf8_lossy(bytes), "bytes": bytes, "logprob": l});
    let mut v = one(lp.id, &lp.bytes, lp.logprob);
    let top: Vec<Value> = lp
        .top
        .iter()
        .flatten()
        .map(|(id, bytes, l)| one(*id, bytes, Some(*l)))
        .collect();
    v["top_logprobs"] = json!(top);
    v
}

/// What one choice's answer has gathered so far, and when.
struct Choice {
    text: String,
    probs: Vec<Value>,
    /// When its first text came: the prompt was done.
    first: Option<Instant>,
    /// Its token ids and the engine's timings, once it ended.
    generated: Option<Generated>,
}

/// The fixed parts of every object of one answer.
struct Answer {
    model: String,
    prompts: Vec<String>,
    cfg: GenerateConfig,
    started: Instant,
    choices: Vec<Choice>,
    /// The request asked for the token ids.
    return_tokens: bool,
}

impl Answer {
    fn new(served: &Served, prep: &Prepared, return_tokens: bool) -> Answer {
        Answer {
            return_tokens,
            model: served.id.clone(),
            prompts: prep.prompts.clone(),
            cfg: prep.cfg.clone(),
            started: Instant::now(),
            choices: (0..prep.prompts.len())
                .map(|_| Choice {
                    text: String::new(),
                    probs: Vec::new(),
                    first: None,
                    generated: None,
                })
                .collect(),
        }
    }

    /// The settings the request ran with, in llama-server's names.
    fn settings(&self) -> Value {
        let s = &self.cfg.sampler;
        let n_predict = match self.cfg.max_tokens {
            0 => -1,
            n => n as i64,
        };
        json!({
            "n_predict": n_predict,
            "seed": s.seed,
            "temperature": s.temp,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "stop": self.cfg.stop,
            "n_probs": self.cfg.logprobs.unwrap_or(0),
        })
    }

    /// The last object of choice `k`: everything but the text, which
    /// `content` carries (all of it, or none when streamed).
    fn last(&self, k: usize, f: &Finish, content: &str) -> Value {
        let c = &self.choices[k];
        let now = Instant::now();
        let first = c.first.unwrap_or(now);
        // The engine's own timings where it sent them, else the times the
        // events came.
        let (prompt_ms, predicted_ms) = match &c.generated {
            Some(g) => (g.prefill_secs * 1e3, g.decode_secs * 1e3),
            None => (
                first.duration_since(self.started).as_secs_f64() * 1e3,
                now.duration_since(first).as_secs_f64() * 1e3,
            ),
        };
        let tokens = match (&c.generated, self.return_tokens) {
            (Some(g), true) => json!(g.tokens),
            _ => json!([]),
        };
        let prompt_n = f.prompt_tokens - f.cached_tokens.min(f.prompt_tokens);
        let per = |n: usize, ms: f64| if ms > 0.0 { n as f64 / ms * 1e3 } else { 0.0 };
        let per_token = |n: usize, ms: f64| if n > 0 { ms / n as f64 } else { 0.0 };
        let steps = f.completion_tokens.saturating_sub(1);
        let mut v = json!({
            "index": k,
            "content": content,
            "id_slot": -1,
            "stop": true,
            "model": self.model,
            "tokens_predicted": f.completion_tokens,
            "tokens_evaluated": f.prompt_tokens,
            "tokens_cached": f.prompt_tokens + f.completion_tokens,
            "generation_settings": self.settings(),
            "prompt": self.prompts[k],
            "has_new_line": c.text.contains('\n'),
            "truncated": false,
            "stop_type": stop_type(f.reason),
            "stopping_word": "",
            "tokens": tokens,
            "timings": {
                "cache_n": f.cached_tokens,
                "prompt_n": prompt_n,
                "prompt_ms": prompt_ms,
                "prompt_per_token_ms": per_token(prompt_n, prompt_ms),
                "prompt_per_second": per(prompt_n, prompt_ms),
                "predicted_n": f.completion_tokens,
                "predicted_ms": predicted_ms,
                // The first token comes with the prompt's last batch: the
                // rate is over the decode steps after it, as llama-server's.
                "predicted_per_token_ms": per_token(steps, predicted_ms),
                "predicted_per_second": per(steps, predicted_ms),
            },
        });
        if self.cfg.logprobs.is_some() && content.len() == c.text.len() {
            v["completion_probabilities"] = json!(c.probs);
        }
        v
    }

    /// Takes one event of a stream: adds the objects to send for it to
    /// `pending`; whether a choice ended; `Err` for a failed request.
    fn feed(&mut self, out: Out, pending: &mut Vec<Value>) -> Result<bool, String> {
        match out {
            Out::Text(k, s) if k < self.choices.len() => {
                let c = &mut self.choices[k];
                c.first.get_or_insert_with(Instant::now);
                c.text.push_str(&s);
                let mut v = json!({"index": k, "content": s, "stop": false, "id_slot": -1,
                                   "tokens": []});
                if !c.probs.is_empty() {
                    v["completion_probabilities"] = json!(std::mem::take(&mut c.probs));
                }
                pending.push(v);
            }
            Out::Logprobs(k, lp) if k < self.choices.len() => {
                self.choices[k].probs.push(token_probs(&lp))
            }
            Out::Done(k, f) if k < self.choices.len() => {
                pending.push(self.last(k, &f, ""));
                return Ok(true);
            }
            Out::Error(e) => return Err(e),
            _ => {}
        }
        Ok(false)
    }
}

/// Reads the whole answer; one object per prompt.
async fn collect(mut a: Answer, ticket: Ticket, mut rx: UnboundedReceiver<Out>) -> Response {
    let n = a.choices.len();
    let mut done: Vec<Option<Value>> = vec![None; n];
    let mut probs: Vec<Vec<Value>> = vec![Vec::new(); n];
    while done.iter().any(Option::is_none) {
        let Some(out) = rx.recv().await else {
            return ApiError::internal("the model thread stopped").into_response();
        };
        match out {
            Out::Text(k, s) if k < n => {
                let c = &mut a.choices[k];
                c.first.get_or_insert_with(Instant::now);
                c.text.push_str(&s);
            }
            Out::Logprobs(k, lp) if k < n => probs[k].push(token_probs(&lp)),
            Out::Generated(k, g) if k < n => a.choices[k].generated = Some(g),
            Out::Done(k, f) if k < n => {
                a.choices[k].probs = std::mem::take(&mut probs[k]);
                let text = a.choices[k].text.clone();
                done[k] = Some(a.last(k, &f, &text));
            }
            Out::Error(e) => return ApiError::internal(e).into_response(),
            _ => {}
        }
    }
    drop(ticket);
    let mut all: Vec<Value> = done.into_iter().flatten().collect();
    if all.len() == 1 {
        Json(all.remove(0)).into_response()
    } else {
        Json(all).into_response()
    }
}

struct StreamState {
    answer: Answer,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    pending: VecDeque<String>,
    left: usize,
    done: bool,
}

/// Streams the answer as llama-server does.
fn stream(answer: Answer, ticket: Ticket, rx: UnboundedReceiver<Out>, keep: KeepAlive) -> Response {
    let left = answer.choices.len();
    let st = StreamState {
        answer,
        rx,
        ticket: Some(ticket),
        pending: VecDeque::new(),
        left,
        done: false,
    };
    let events = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(d) = st.pending.pop_front() {
                return Some((Ok::<_, Infallible>(SseEvent::default().data(d)), st));
            }
            if st.done {
                return None;
            }
            let Some(out) = st.rx.recv().await else {
                let e = ApiError::internal("the model thread stopped");
                st.pending.push_back(e.body().to_string());
                st.done = true;
                continue;
            };
            let mut objs = Vec::new();
            match st.answer.feed(out, &mut objs) {
                Ok(ended) => {
                    st.pending.extend(objs.into_iter().map(|v| v.to_string()));
                    if ended {
                        st.left -= 1;
                        if st.left == 0 {
                            st.done = true;
                            st.ticket = None;
                        }
                    }
                }
                Err(e) => {
                    st.pending
                        .push_back(ApiError::internal(e).body().to_string());
                    st.done = true;
                    st.ticket = None;
                }
            }
        }
    });
    Sse::new(events).keep_alive(keep).into_response()
}

/// `POST /completion`.
pub async fn completion(
    State(shared): State<Arc<Shared>>,
    body: Body,
) -> Result<Response, ApiError> {
    let (streams, return_tokens, prep) =
        parse_off_thread(&shared, body, move |s, req: NativeRequest| {
            let served = s.served()?;
            served.check_model(&req.sampling.model)?;
            let prep = prepare(served, &req)?;
            if req.sampling.stream && prep.parts.len() > 1 {
                return Err(ApiError::bad_param(
                    "stream",
                    "a list of prompts is answered as one array: stream one prompt at a time",
                ));
            }
            Ok((req.sampling.stream, req.return_tokens, prep))
        })
        .await?;
    let served = shared.served()?;
    let answer = Answer::new(served, &prep, return_tokens);
    let (ticket, rx) = admit(
        &shared,
        Admission {
            parts: prep.parts,
            score: None,
            param: "prompt",
        },
    )?;
    Ok(if streams {
        let keep = KeepAlive::new()
            .interval(shared.cfg.keep_alive)
            .text("keep-alive");
        stream(answer, ticket, rx, keep)
    } else {
        collect(answer, ticket, rx).await
    })
}
