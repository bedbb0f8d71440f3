//! Turning a request's generations into OpenAI's response shapes: one JSON
//! object, or a stream of server-sent events ending in `data: [DONE]`.
//! A chat answer is split into reasoning, content and tool calls on the
//! way (see [`output`](crate::output)).

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::ApiError;
pub use crate::output::Split;
use crate::output::{Piece, Splitter};
use crate::state::Ticket;
use crate::worker::{Finish, Out};

/// Which API the response belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Text,
}

/// The fixed parts of every object of one response.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Chat or text completion.
    pub api: Api,
    /// `chatcmpl-…` / `cmpl-…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// Whether streamed chunks carry `usage` (null until the last one).
    pub include_usage: bool,
    /// Whether choices carry log probabilities.
    pub logprobs: bool,
    /// Choices in the response.
    pub n: usize,
    /// Prompt tokens, each prompt counted once however many choices
    /// continue it.
    pub prompt_tokens: usize,
    /// Chat: how answers are split.
    pub split: Split,
    /// Text completions: the text each choice starts with (`echo`).
    pub echo: Vec<String>,
}

impl Shape {
    /// A shape for request `n` of `api` with one choice.
    pub fn new(api: Api, n: u64, model: &str, include_usage: bool) -> Shape {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let prefix = match api {
            Api::Chat => "chatcmpl",
            Api::Text => "cmpl",
        };
        Shape {
            api,
            id: format!("{prefix}-{n:016x}"),
            created,
            model: model.to_string(),
            include_usage,
            logprobs: false,
            n: 1,
            prompt_tokens: 0,
            split: Split::default(),
            echo: Vec::new(),
        }
    }

    /// The same shape with log probabilities in the choices.
    pub fn with_logprobs(mut self, on: bool) -> Shape {
        self.logprobs = on;
        self
    }

    /// The same shape with `n` choices continuing prompts of
    /// `prompt_tokens` tokens in all.
    pub fn with_choices(mut self, n: usize, prompt_tokens: usize) -> Shape {
        self.n = n.max(1);
        self.prompt_tokens = prompt_tokens;
        self
    }

    /// The same shape splitting chat answers as `split` says.
    pub fn with_split(mut self, split: Split) -> Shape {
        self.split = split;
        self
    }

    /// The same shape with choice `k` starting with `echo[k]`.
    pub fn with_echo(mut self, echo: Vec<String>) -> Shape {
        self.echo = echo;
        self
    }

    fn splitter(&self) -> Splitter {
        Splitter::new(&self.split)
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.api, chunk) {
            (Api::Chat, false) => "chat.completion",
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Text, _) => "text_completion",
        }
    }

    /// The token counts; `cached` prompt tokens came from the prefix
    /// cache (OpenAI's `prompt_tokens_details.cached_tokens`).
    fn usage(&self, completion_tokens: usize, cached: usize) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        })
    }

    fn call_id(&self, choice: usize, call: usize) -> String {
        let tail = self.id.rsplit('-').next().unwrap_or("0");
        format!("call_{tail}{choice:02}{call:02}")
    }

    fn envelope(&self, chunk: bool, choices: Vec<Value>) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// The whole answer as one object.
    pub fn complete(&self, choices: &[Collected]) -> Value {
        let mut list = Vec::with_capacity(choices.len());
        let (mut completion, mut cached) = (0, 0);
        for (k, c) in choices.iter().enumerate() {
            completion += c.finish.completion_tokens;
            cached = cached.max(c.finish.cached_tokens);
            list.push(match self.api {
                Api::Chat => self.chat_choice(k, c),
                Api::Text => {
                    let echo = self.echo.get(k).map_or("", String::as_str);
                    let text = format!("{echo}{}", c.text);
                    let lp = if self.logprobs && !echo.is_empty() {
                        // The echoed prompt's own entries come first.
                        let all: Vec<Value> = c
                            .prompt_logprobs
                            .iter()
                            .chain(&c.logprobs)
                            .cloned()
                            .collect();
                        legacy_logprobs(&all, &mut 0)
                    } else if self.logprobs {
                        legacy_logprobs(&c.logprobs, &mut 0)
                    } else {
                        Value::Null
                    };
                    json!({
                        "index": k,
                        "text": text,
                        "logprobs": lp,
                        "finish_reason": c.finish.finish_reason(),
                    })
                }
            });
        }
        let mut v = self.envelope(false, list);
        v["usage"] = self.usage(completion, cached);
        v
    }

    fn chat_choice(&self, k: usize, c: &Collected) -> Value {
        let mut s = self.splitter();
        let mut pieces = s.push(&c.text);
        pieces.extend(s.finish());
        let (mut content, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
        for p in pieces {
            match p {
                Piece::Content(t) => content.push_str(&t),
                Piece::Reasoning(t) => reasoning.push_str(&t),
                Piece::Call(call) => calls.push(json!({
                    "id": self.call_id(k, calls.len()),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })),
            }
        }
        let mut message = json!({"role": "assistant", "content": content});
        if !reasoning.is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
        let finish = if calls.is_empty() {
            c.finish.finish_reason()
        } else {
            if content.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = Value::Array(calls);
            "tool_calls"
        };
        let logprobs = if self.logprobs {
            json!({"content": c.logprobs, "refusal": null})
        } else {
            Value::Null
        };
        json!({
            "index": k,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish,
        })
    }
}

/// OpenAI's legacy completions `logprobs` for `entries` (chat-style
/// entries from the worker); `offset` is the text's length in characters
/// before the first token, advanced past each.
fn legacy_logprobs(entries: &[Value], offset: &mut usize) -> Value {
    let mut tokens = Vec::with_capacity(entries.len());
    let mut lps = Vec::with_capacity(entries.len());
    let mut tops = Vec::with_capacity(entries.len());
    let mut offsets = Vec::with_capacity(entries.len());
    for e in entries {
        let tok = e["token"].as_str().unwrap_or("");
        tokens.push(json!(tok));
        lps.push(e["logprob"].clone());
        match e["top_logprobs"].as_array() {
            // The prompt's first token: nothing before it to predict it.
            None => tops.push(Value::Null),
            Some(list) => {
                let mut top = serde_json::Map::new();
                for t in list {
                    top.insert(
                        t["token"].as_str().unwrap_or("").to_string(),
                        t["logprob"].clone(),
                    );
                }
                tops.push(Value::Object(top));
            }
        }
        offsets.push(json!(*offset));
        *offset += tok.chars().count();
    }
    json!({
        "tokens": tokens,
        "token_logprobs": lps,
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}

/// One choice's whole output.
#[derive(Debug, Clone)]
pub struct Collected {
    /// The text.
    pub text: String,
    /// Its tokens' log probabilities (when asked for).
    pub logprobs: Vec<Value>,
    /// Its prompt's log probabilities (`echo` with `logprobs`).
    pub prompt_logprobs: Vec<Value>,
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
        .zip(finish)
        .filter_map(|(((text, logprobs), prompt_logprobs), f)| {
            f.map(|finish| Collected {
                text,
                logprobs,
                prompt_logprobs,
                finish,
            })
        })
        .collect())
}

/// Waits for the whole generation and answers it as one JSON object.
pub async fn collect(shape: Shape, ticket: Ticket, mut rx: UnboundedReceiver<Out>) -> Response {
    let watch = (shape.api == Api::Chat).then_some((&shape.split, &ticket));
    let result = gather(shape.n, &mut rx, watch).await;
    drop(ticket);
    match result {
        Ok(c) => axum::Json(shape.complete(&c)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Where one choice of a stream stands.
struct ChoiceState {
    splitter: Splitter,
    /// Tool calls sent so far.
    calls: usize,
    /// Log probabilities not yet sent with a chunk.
    logprobs: Vec<Value>,
    /// Characters of text sent (text completions' `text_offset`).
    offset: usize,
    done: bool,
    /// Events held back until the echoed prompt's own log probabilities
    /// arrive (`echo` with `logprobs`), so that the prompt comes first.
    held: Option<Vec<Out>>,
}

struct StreamState {
    shape: Shape,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    pending: VecDeque<String>,
    choices: Vec<ChoiceState>,
    completion_tokens: usize,
    /// Prompt tokens the prefix cache held.
    cached_tokens: usize,
    done: bool,
}

impl StreamState {
    fn chunk(&mut self, k: usize, delta: Value, finish: Option<&str>) {
        let shape = &self.shape;
        let lp = std::mem::take(&mut self.choices[k].logprobs);
        let choice = match shape.api {
            Api::Chat => {
                let lp = if shape.logprobs {
                    json!({"content": lp, "refusal": null})
                } else {
                    Value::Null
                };
                json!({"index": k, "delta": delta, "logprobs": lp, "finish_reason": finish})
            }
            Api::Text => {
                let text = delta["content"].as_str().unwrap_or("").to_string();
                let lp = if shape.logprobs && !lp.is_empty() {
                    legacy_logprobs(&lp, &mut self.choices[k].offset)
                } else if shape.logprobs {
                    // Text of no new token (the echoed prompt).
                    self.choices[k].offset += text.chars().count();
                    legacy_logprobs(&[], &mut 0)
                } else {
                    self.choices[k].offset += text.chars().count();
                    Value::Null
                };
                json!({"index": k, "text": text, "logprobs": lp, "finish_reason": finish})
            }
        };
        let mut v = shape.envelope(true, vec![choice]);
        if shape.include_usage {
            v["usage"] = Value::Null;
        }
        self.pending.push_back(v.to_string());
    }

    fn pieces(&mut self, k: usize, pieces: Vec<Piece>) {
        for p in pieces {
            match p {
                Piece::Content(t) => self.chunk(k, json!({"content": t}), None),
                Piece::Reasoning(t) => self.chunk(k, json!({"reasoning_content": t}), None),
                Piece::Call(call) => {
                    let i = self.choices[k].calls;
                    self.choices[k].calls += 1;
                    let id = self.shape.call_id(k, i);
                    // As OpenAI streams a call: the name first, then the
                    // arguments.
                    let head = json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                        "function": {"name": call.name, "arguments": ""}}]});
                    self.chunk(k, head, None);
                    let args = json!({"tool_calls": [{"index": i,
                        "function": {"arguments": call.arguments}}]});
                    self.chunk(k, args, None);
                }
            }
        }
    }

    fn text(&mut self, k: usize, s: &str) {
        if self.shape.api == Api::Chat {
            let pieces = self.choices[k].splitter.push(s);
            self.pieces(k, pieces);
            // Every choice has its answer although the model goes on.
            if self.choices.iter().all(|c| c.done || c.splitter.ended()) {
                if let Some(t) = &self.ticket {
                    t.stop();
                }
            }
        } else {
            self.chunk(k, json!({"content": s}), None);
        }
    }

    fn finish(&mut self, k: usize, f: &Finish) {
        if self.shape.api == Api::Chat {
            let pieces = self.choices[k].splitter.finish();
            self.pieces(k, pieces);
        }
        let reason = if self.choices[k].calls > 0 {
            "tool_calls"
        } else {
            f.finish_reason()
        };
        self.chunk(k, json!({}), Some(reason));
        self.choices[k].done = true;
        self.completion_tokens += f.completion_tokens;
        self.cached_tokens = self.cached_tokens.max(f.cached_tokens);
        if self.choices.iter().all(|c| c.done) {
            if self.shape.include_usage {
                let mut v = self.shape.envelope(true, Vec::new());
                v["usage"] = self.shape.usage(self.completion_tokens, self.cached_tokens);
                self.pending.push_back(v.to_string());
            }
            self.end("[DONE]".to_string());
        }
    }

    fn handle(&mut self, out: Out) {
        let n = self.shape.n;
        let k = match &out {
            Out::Text(k, _) | Out::Logprobs(k, _) | Out::PromptLogprobs(k, _) | Out::Done(k, _) => {
                *k
            }
            Out::Error(_) => 0,
        };
        if k >= n {
            return;
        }
        if let (Some(held), false) = (
            self.choices[k].held.as_mut(),
            matches!(out, Out::PromptLogprobs(..) | Out::Error(_)),
        ) {
            held.push(out);
            return;
        }
        match out {
            Out::Text(k, s) => self.text(k, &s),
            Out::Logprobs(k, v) => self.choices[k].logprobs.push(v),
            Out::PromptLogprobs(k, v) => {
                let echo = self.shape.echo.get(k).cloned().unwrap_or_default();
                self.choices[k].logprobs = v;
                self.chunk(k, json!({"content": echo}), None);
                for o in self.choices[k].held.take().unwrap_or_default() {
                    self.handle(o);
                }
            }
            Out::Done(k, f) => self.finish(k, &f),
            Out::Error(e) => self.end(ApiError::internal(e).body().to_string()),
        }
    }

    fn end(&mut self, last: String) {
        self.pending.push_back(last);
        self.done = true;
        self.ticket = None;
    }
}

/// Streams the generation as server-sent events, with a comment line
/// whenever nothing was sent for `keep_alive`.
pub fn stream(
    shape: Shape,
    (ticket, rx): (Ticket, UnboundedReceiver<Out>),
    keep_alive: std::time::Duration,
) -> Response {
    let choices = (0..shape.n)
        .map(|_| ChoiceState {
            splitter: shape.splitter(),
            calls: 0,
            logprobs: Vec::new(),
            offset: 0,
            done: false,
            held: None,
        })
        .collect();
    let mut st = StreamState {
        shape,
        rx,
        ticket: Some(ticket),
        pending: VecDeque::new(),
        choices,
        completion_tokens: 0,
        cached_tokens: 0,
        done: false,
    };
    for k in 0..st.shape.n {
        match st.shape.api {
            Api::Chat => st.chunk(k, json!({"role": "assistant", "content": ""}), None),
            Api::Text => {
                if let Some(e) = st.shape.echo.get(k).filter(|e| !e.is_empty()).cloned() {
                    if st.shape.logprobs {
                        // The echo waits for the prompt's own entries.
                        st.choices[k].held = Some(Vec::new());
                    } else {
                        st.chunk(k, json!({"content": e}), None);
                    }
                }
            }
        }
    }
    let events = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(d) = st.pending.pop_front() {
                return Some((Ok::<_, Infallible>(SseEvent::default().data(d)), st));
            }
            if st.done {
                return None;
            }
            match st.rx.recv().await {
                Some(out) => st.handle(out),
                None => {
                    let e = ApiError::internal("the model thread stopped");
                    st.end(e.body().to_string());
                }
            }
        }
    });
    // A comment line while the prompt is prefilled: OpenAI's clients
    // skip it, and it keeps proxies and idle timers from cutting the
    // stream.
    let keep = KeepAlive::new().interval(keep_alive).text("keep-alive");
    Sse::new(events).keep_alive(keep).into_response()
}
