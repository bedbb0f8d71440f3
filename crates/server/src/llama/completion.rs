//! llama-server's native `POST /completion`: a raw prompt (text or token
//! ids, one or a list), `n_predict`, `n_probs`, and llama-server's answer
//! fields (`content`, `stop`, `stop_type`, `tokens_predicted`,
//! `tokens_evaluated`, `timings`, ...), streamed as server-sent events of
//! `{"content", "stop": false}` with a last `"stop": true` object that
//! carries the rest, as llama-server sends them (no `[DONE]`).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use minfer_engine::{GenerateConfig, StopReason};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::events::{Finish, Generated, Out, Report, Timings, TokenLogprob};
use crate::gather::gather;
use crate::http::{admit, parse_off_thread, Admission, ApiError};
use crate::models::Served;
use crate::models::{Model, Ticket};
use crate::openai::request::Sampling;
use crate::openai::sampling::check_vocab;
use crate::state::Shared;
use crate::worker::Part;

/// The most alternatives `n_probs` may ask for.
const MAX_N_PROBS: u32 = 20;

/// `POST /completion`'s body: llama-server's own fields, then the
/// sampling fields it shares with the OpenAI routes.
#[derive(Debug, Deserialize)]
pub struct NativeRequest {
    /// The prompt, in any of llama-server's forms (see [`prompt_ids`]).
    #[serde(default)]
    pub prompt: Option<Value>,
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
    /// The slot its prompt and answer stand for once it ends, for
    /// `/slots/{id}?action=save` (-1 or absent: none).
    #[serde(default)]
    id_slot: Option<i64>,
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
    pub sampling: Sampling,
}

/// A native completion ready for the model thread.
pub struct Prepared {
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
    let mut cfg = sampling.to_config(served.defaults())?;
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

/// The fixed parts of every object of one answer.
struct Answer {
    model: String,
    prompts: Vec<String>,
    cfg: GenerateConfig,
    /// The request asked for the token ids.
    return_tokens: bool,
}

impl Answer {
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

    /// The last object of prompt `k`'s answer, which ended as `f`, with
    /// `content` (all of its text, or none when streamed) and the
    /// engine's token ids and timings `g`.
    fn last(
        &self,
        k: usize,
        f: &Finish,
        g: Option<&Generated>,
        content: &str,
        has_new_line: bool,
    ) -> Value {
        let tokens = match (g, self.return_tokens) {
            (Some(g), true) => json!(g.tokens),
            _ => json!([]),
        };
        let timings = match g {
            Some(g) => g.timings(f),
            None => Generated::default().timings(f),
        };
        json!({
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
            "has_new_line": has_new_line,
            "truncated": false,
            "stop_type": stop_type(f.reason),
            "stopping_word": "",
            "tokens": tokens,
            "timings": timings,
        })
    }
}

/// Reads the whole answer; one object per prompt (an array for several).
async fn collect(a: Answer, ticket: Ticket, mut rx: UnboundedReceiver<Out>) -> Response {
    let got = gather(a.prompts.len(), &mut rx, None).await;
    drop(ticket);
    let got = match got {
        Ok(got) => got,
        Err(e) => return e.into_response(),
    };
    let mut all: Vec<Value> = got
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let mut v = a.last(
                k,
                &c.finish,
                c.generated.as_ref(),
                &c.text,
                c.text.contains('\n'),
            );
            if a.cfg.logprobs.is_some() {
                v["completion_probabilities"] = c.logprobs.iter().map(token_probs).collect();
            }
            v
        })
        .collect();
    if all.len() == 1 {
        Json(all.remove(0)).into_response()
    } else {
        Json(all).into_response()
    }
}

/// A streamed answer (of one prompt) on its way.
struct StreamState {
    answer: Answer,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    pending: VecDeque<String>,
    /// Log probabilities not sent yet: they go with the text holding
    /// their tokens.
    probs: Vec<Value>,
    has_new_line: bool,
    generated: Option<Generated>,
    /// The timings to send with the next text (`timings_per_token`).
    timings: Option<Timings>,
    /// What the request asked to hear while it runs.
    report: Report,
    done: bool,
}

impl StreamState {
    /// Takes one event: queues the objects it makes; the last one, or an
    /// error, ends the stream.
    fn feed(&mut self, out: Option<Out>) {
        match out {
            Some(Out::Text(0, s)) => {
                self.has_new_line |= s.contains('\n');
                let mut v = json!({"index": 0, "content": s, "stop": false, "id_slot": -1,
                                   "tokens": []});
                if !self.probs.is_empty() {
                    v["completion_probabilities"] = json!(std::mem::take(&mut self.probs));
                }
                if let Some(t) = self.timings.take() {
                    v["timings"] = t.to_json();
                }
                self.pending.push_back(v.to_string());
            }
            Some(Out::Timings(0, t)) => self.timings = Some(t),
            Some(Out::Progress(0, p)) => {
                let mut v = json!({"index": 0, "content": "", "stop": false, "id_slot": -1,
                                   "tokens": [], "tokens_predicted": 0,
                                   "tokens_evaluated": p.total,
                                   "prompt_progress": p.to_json()});
                if self.report.timings {
                    v["timings"] = p.timings.to_json();
                }
                self.pending.push_back(v.to_string());
            }
            Some(Out::Logprobs(0, lp)) => self.probs.push(token_probs(&lp)),
            Some(Out::Generated(0, g)) => self.generated = Some(g),
            Some(Out::Done(0, f)) => {
                let mut v = self
                    .answer
                    .last(0, &f, self.generated.as_ref(), "", self.has_new_line);
                if !self.probs.is_empty() {
                    v["completion_probabilities"] = json!(std::mem::take(&mut self.probs));
                }
                self.pending.push_back(v.to_string());
                self.end();
            }
            Some(Out::Error(e)) => self.fail(ApiError::internal(e)),
            Some(_) => {}
            None => self.fail(ApiError::internal("the model thread stopped")),
        }
    }

    fn fail(&mut self, e: ApiError) {
        self.pending.push_back(e.body().to_string());
        self.end();
    }

    fn end(&mut self) {
        self.done = true;
        self.ticket = None;
    }
}

/// Streams the answer as llama-server does.
fn stream(
    answer: Answer,
    (ticket, rx): (Ticket, UnboundedReceiver<Out>),
    report: Report,
    keep: KeepAlive,
) -> Response {
    let st = StreamState {
        answer,
        rx,
        ticket: Some(ticket),
        pending: VecDeque::new(),
        probs: Vec::new(),
        has_new_line: false,
        generated: None,
        timings: None,
        report,
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
            let out = st.rx.recv().await;
            st.feed(out);
        }
    });
    Sse::new(events).keep_alive(keep).into_response()
}

/// A native completion made ready off the async workers: whether it
/// streams, whether it returns its tokens, its model and its prompts.
pub struct Ready {
    /// Whether the answer streams.
    streams: bool,
    /// Whether the answer carries its token ids (`return_tokens`).
    return_tokens: bool,
    model: Arc<Model>,
    prep: Prepared,
    /// The slot it stands for once it ends (`id_slot`).
    slot: Option<usize>,
    /// What it wants reported while it streams.
    report: Report,
}

/// Makes `req` ready for `model`.
///
/// # Errors
/// A 400 naming the field at fault; 503 while the model loads.
pub fn ready(model: Arc<Model>, req: &NativeRequest) -> Result<Ready, ApiError> {
    let prep = prepare(model.served()?, req)?;
    if req.sampling.stream && prep.parts.len() > 1 {
        return Err(ApiError::bad_param(
            "stream",
            "a list of prompts is answered as one array: stream one prompt at a time",
        ));
    }
    let slot = req.id_slot.and_then(|s| usize::try_from(s).ok());
    Ok(Ready {
        streams: req.sampling.stream,
        return_tokens: req.return_tokens,
        model,
        prep,
        slot,
        report: req.sampling.report(),
    })
}

/// `POST /completion`.
pub async fn completion(
    State(shared): State<Arc<Shared>>,
    body: Body,
) -> Result<Response, ApiError> {
    let r = parse_off_thread(&shared, body, move |s, req: NativeRequest| {
        ready(s.model(&req.sampling.model)?, &req)
    })
    .await?;
    answer(&shared, r).await
}

/// Admits a native completion and answers it, whole or streamed.
///
/// # Errors
/// The errors of [`admit`].
pub async fn answer(shared: &Arc<Shared>, r: Ready) -> Result<Response, ApiError> {
    let Ready {
        streams,
        return_tokens,
        model,
        prep,
        slot,
        report,
    } = r;
    let answer = Answer {
        model: model.served()?.id.clone(),
        prompts: prep.prompts,
        cfg: prep.cfg,
        return_tokens,
    };
    let (ticket, rx) = admit(
        shared,
        Admission {
            model,
            parts: prep.parts,
            score: None,
            param: "prompt",
            slot,
            report,
        },
    )?;
    Ok(if streams {
        let keep = KeepAlive::new()
            .interval(shared.cfg.keep_alive)
            .text("keep-alive");
        stream(answer, (ticket, rx), report, keep)
    } else {
        collect(answer, ticket, rx).await
    })
}
