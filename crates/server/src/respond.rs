//! Turning a generation's output into OpenAI's response shapes: one JSON
//! object, or a stream of server-sent events ending in `data: [DONE]`.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::ApiError;
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
    /// Whether choices carry `logprobs.content` (chat only).
    pub logprobs: bool,
}

fn usage(f: &Finish) -> Value {
    json!({
        "prompt_tokens": f.prompt_tokens,
        "completion_tokens": f.completion_tokens,
        "total_tokens": f.prompt_tokens + f.completion_tokens,
    })
}

impl Shape {
    /// A shape for request `n` of `api`.
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
        }
    }

    /// The same shape with `logprobs.content` in the chat choices.
    pub fn with_logprobs(mut self, on: bool) -> Shape {
        self.logprobs = on;
        self
    }

    /// A choice's `logprobs`: null unless asked for, then
    /// `{"content": entries}`.
    fn logprobs_value(&self, entries: Vec<Value>) -> Value {
        if self.logprobs && self.api == Api::Chat {
            json!({"content": entries, "refusal": null})
        } else {
            Value::Null
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.api, chunk) {
            (Api::Chat, false) => "chat.completion",
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Text, _) => "text_completion",
        }
    }

    /// The whole answer as one object.
    pub fn complete(&self, text: &str, logprobs: Vec<Value>, f: &Finish) -> Value {
        let choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": self.logprobs_value(logprobs),
                "finish_reason": f.finish_reason(),
            }),
            Api::Text => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": f.finish_reason(),
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage(f),
        })
    }

    /// A streamed chunk with one choice.
    fn chunk(&self, delta: Value, text: &str, lp: Vec<Value>, finish: Option<&str>) -> Value {
        let choice = match self.api {
            Api::Chat => {
                let lp = self.logprobs_value(lp);
                json!({"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish})
            }
            Api::Text => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish})
            }
        };
        let mut v = json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    /// The chunk that opens a chat stream (the role), if the API has one.
    pub fn opening(&self) -> Option<Value> {
        (self.api == Api::Chat).then(|| {
            self.chunk(
                json!({"role": "assistant", "content": ""}),
                "",
                Vec::new(),
                None,
            )
        })
    }

    /// A chunk of text, with the log probabilities of the tokens reported
    /// since the last chunk.
    pub fn text(&self, s: &str, lp: Vec<Value>) -> Value {
        self.chunk(json!({"content": s}), s, lp, None)
    }

    /// The chunk that carries the finish reason (and the log probabilities
    /// of tokens whose text was never shown, such as a stop string's).
    pub fn closing(&self, f: &Finish, lp: Vec<Value>) -> Value {
        self.chunk(json!({}), "", lp, Some(f.finish_reason()))
    }

    /// The usage chunk (no choices) sent last when asked for.
    pub fn usage_chunk(&self, f: &Finish) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(f),
        })
    }
}

/// Waits for the whole generation and answers it as one JSON object.
pub async fn collect(shape: Shape, ticket: Ticket, mut rx: UnboundedReceiver<Out>) -> Response {
    let mut text = String::new();
    let mut logprobs = Vec::new();
    let result = loop {
        match rx.recv().await {
            Some(Out::Text(s)) => text.push_str(&s),
            Some(Out::Logprobs(v)) => logprobs.push(v),
            Some(Out::Done(f)) => break Ok(f),
            Some(Out::Error(e)) => break Err(ApiError::internal(e)),
            None => break Err(ApiError::internal("the model thread stopped")),
        }
    };
    drop(ticket);
    match result {
        Ok(f) => axum::Json(shape.complete(&text, logprobs, &f)).into_response(),
        Err(e) => e.into_response(),
    }
}

struct StreamState {
    shape: Shape,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    pending: VecDeque<String>,
    /// Log probabilities not yet sent with a chunk.
    logprobs: Vec<Value>,
    done: bool,
}

fn data(v: &Value) -> String {
    v.to_string()
}

/// Streams the generation as server-sent events.
pub fn stream(shape: Shape, ticket: Ticket, rx: UnboundedReceiver<Out>) -> Response {
    let mut pending = VecDeque::new();
    if let Some(v) = shape.opening() {
        pending.push_back(data(&v));
    }
    let st = StreamState {
        shape,
        rx,
        ticket: Some(ticket),
        pending,
        logprobs: Vec::new(),
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
            match st.rx.recv().await {
                Some(Out::Text(s)) => {
                    let lp = std::mem::take(&mut st.logprobs);
                    st.pending.push_back(data(&st.shape.text(&s, lp)));
                }
                Some(Out::Logprobs(v)) => st.logprobs.push(v),
                Some(Out::Done(f)) => {
                    let lp = std::mem::take(&mut st.logprobs);
                    st.pending.push_back(data(&st.shape.closing(&f, lp)));
                    if st.shape.include_usage {
                        st.pending.push_back(data(&st.shape.usage_chunk(&f)));
                    }
                    st.pending.push_back("[DONE]".to_string());
                    st.done = true;
                    st.ticket = None;
                }
                Some(Out::Error(e)) => {
                    st.pending.push_back(data(&ApiError::internal(e).body()));
                    st.done = true;
                    st.ticket = None;
                }
                None => {
                    let e = ApiError::internal("the model thread stopped");
                    st.pending.push_back(data(&e.body()));
                    st.done = true;
                    st.ticket = None;
                }
            }
        }
    });
    Sse::new(events).into_response()
}
