//! Turning a request's generations into OpenAI's response objects: the
//! fixed parts every object of one response shares, and the whole answer
//! as one JSON object (the stream is [`stream`](super::stream)). A chat
//! answer is split into reasoning, content and tool calls on the way (see
//! [`output`](crate::output)).

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::logprobs;
use crate::events::{Finish, Out};
use crate::gather::{gather, Collected};
use crate::models::Ticket;
use crate::output::{Piece, Split, Splitter};

/// OpenAI's `finish_reason` of a choice that made no tool call.
pub fn finish_reason(f: &Finish) -> &'static str {
    if f.cut_off() {
        "length"
    } else {
        "stop"
    }
}

/// The `system_fingerprint` of every completion object: in OpenAI's API
/// it names the backend configuration that produced an answer; its
/// official clients expose it and llama.cpp's tests expect it.
const FINGERPRINT: &str = concat!("minfer-", env!("CARGO_PKG_VERSION"));

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

    pub(super) fn splitter(&self) -> Splitter {
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
    pub(super) fn usage(&self, completion_tokens: usize, cached: usize) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        })
    }

    pub(super) fn call_id(&self, choice: usize, call: usize) -> String {
        let tail = self.id.rsplit('-').next().unwrap_or("0");
        format!("call_{tail}{choice:02}{call:02}")
    }

    pub(super) fn envelope(&self, chunk: bool, choices: Vec<Value>) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
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
                        let all: Vec<_> = c
                            .prompt_logprobs
                            .iter()
                            .chain(&c.logprobs)
                            .cloned()
                            .collect();
                        logprobs::legacy(&all, &mut 0)
                    } else if self.logprobs {
                        logprobs::legacy(&c.logprobs, &mut 0)
                    } else {
                        Value::Null
                    };
                    json!({
                        "index": k,
                        "text": text,
                        "logprobs": lp,
                        "finish_reason": finish_reason(&c.finish),
                    })
                }
            });
        }
        let mut v = self.envelope(false, list);
        v["usage"] = self.usage(completion, cached);
        // llama-server's timings, of the first choice.
        if let Some((g, c)) = choices
            .first()
            .and_then(|c| Some((c.generated.as_ref()?, c)))
        {
            v["timings"] = g.timings(&c.finish);
        }
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
            finish_reason(&c.finish)
        } else {
            if content.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = Value::Array(calls);
            "tool_calls"
        };
        let logprobs = logprobs::chat(self.logprobs, &c.logprobs);
        json!({
            "index": k,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish,
        })
    }
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
