//! Ollama's response shapes: one JSON object, or NDJSON lines, each a
//! piece of the answer, ending in a `done: true` line with the counts and
//! the durations (in nanoseconds). An answer splits into `thinking`,
//! content and `tool_calls` on the way, as the OpenAI side splits it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::error::OllamaError;
use super::time;
use crate::events::{Finish, Out};
use crate::http::ApiError;
use crate::models::Ticket;
use crate::openai::logprobs;
use crate::output::{Piece, Split, Splitter};

/// Which endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/api/chat`: the text is in `message.content`.
    Chat,
    /// `/api/generate`: the text is in `response`.
    Generate,
}

/// A piece of the answer for one line.
#[derive(Debug, Default)]
struct Delta {
    content: String,
    thinking: String,
    calls: Vec<Value>,
    logprobs: Vec<Value>,
}

impl Delta {
    fn merge(&mut self, other: Delta) {
        self.content.push_str(&other.content);
        self.thinking.push_str(&other.thinking);
        self.calls.extend(other.calls);
        self.logprobs.extend(other.logprobs);
    }
}

/// What one event of the model thread decided.
enum Step {
    /// More of the answer (possibly nothing yet: text held back).
    More(Vec<Delta>),
    /// The last of the answer, and how it ended.
    Done(Vec<Delta>, Finish),
    /// The generation failed.
    Failed(String),
}

/// The state of one answer, from the request's arrival to its end.
pub struct Reply {
    kind: Kind,
    /// The name the request used, echoed as Ollama does.
    model: String,
    splitter: Splitter,
    started: Instant,
    submitted: Instant,
    /// When the first token came (the prompt was evaluated).
    first: Option<Instant>,
    /// Distinguishes this request's call ids from others'.
    id: u64,
    calls: usize,
    /// Log probabilities not yet sent with a piece.
    logprobs: Vec<Value>,
}

/// Nanoseconds, as Ollama's durations are.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Reply {
    /// The answer to request `id` named `model`, which arrived at
    /// `started` and was handed to the model thread at `submitted`.
    pub fn new(
        kind: Kind,
        model: &str,
        split: &Split,
        id: u64,
        (started, submitted): (Instant, Instant),
    ) -> Reply {
        Reply {
            kind,
            model: model.to_string(),
            splitter: Splitter::new(split),
            started,
            submitted,
            first: None,
            id,
            calls: 0,
            logprobs: Vec::new(),
        }
    }

    fn call(&mut self, name: String, arguments: &str) -> Value {
        // Ollama's arguments are an object; the call grammar makes them
        // one, and text that is not (a model writing a string) reads as
        // no arguments rather than breaking clients that index into it.
        let args = serde_json::from_str::<Value>(arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let index = self.calls;
        self.calls += 1;
        json!({
            "id": format!("call_{:08x}{index:02}", self.id),
            "function": {"index": index, "name": name, "arguments": args},
        })
    }

    fn deltas(&mut self, pieces: Vec<Piece>) -> Vec<Delta> {
        let mut out: Vec<Delta> = pieces
            .into_iter()
            .map(|p| match p {
                Piece::Content(content) => Delta {
                    content,
                    ..Delta::default()
                },
                Piece::Reasoning(thinking) => Delta {
                    thinking,
                    ..Delta::default()
                },
                Piece::Call(c) => Delta {
                    calls: vec![self.call(c.name, &c.arguments)],
                    ..Delta::default()
                },
            })
            .collect();
        if let Some(d) = out.first_mut() {
            d.logprobs = std::mem::take(&mut self.logprobs);
        }
        out
    }

    /// Whether the answer is complete although the model goes on (see
    /// [`Splitter::ended`]): the caller stops the generation.
    pub fn ended(&self) -> bool {
        self.splitter.ended()
    }

    fn feed(&mut self, out: Out) -> Step {
        match out {
            Out::Text(0, s) => {
                self.first.get_or_insert_with(Instant::now);
                let pieces = self.splitter.push(&s);
                Step::More(self.deltas(pieces))
            }
            Out::Logprobs(0, v) => {
                self.first.get_or_insert_with(Instant::now);
                self.logprobs.push(logprobs::entry(&v));
                Step::More(Vec::new())
            }
            Out::Done(0, f) => {
                let pieces = self.splitter.finish();
                let mut deltas = self.deltas(pieces);
                deltas.push(Delta {
                    logprobs: std::mem::take(&mut self.logprobs),
                    ..Delta::default()
                });
                Step::Done(deltas, f)
            }
            Out::Error(e) => Step::Failed(e),
            // One choice only: nothing else is sent.
            _ => Step::More(Vec::new()),
        }
    }

    /// One line (or the whole answer): `done` carries how it ended.
    fn line(&self, d: &Delta, done: Option<&Finish>) -> Value {
        let mut v = json!({"model": self.model, "created_at": time::now()});
        match self.kind {
            Kind::Chat => {
                let mut m = json!({"role": "assistant", "content": d.content});
                if !d.thinking.is_empty() {
                    m["thinking"] = json!(d.thinking);
                }
                if !d.calls.is_empty() {
                    m["tool_calls"] = json!(d.calls);
                }
                v["message"] = m;
            }
            Kind::Generate => {
                v["response"] = json!(d.content);
                if !d.thinking.is_empty() {
                    v["thinking"] = json!(d.thinking);
                }
            }
        }
        v["done"] = json!(done.is_some());
        if !d.logprobs.is_empty() {
            v["logprobs"] = json!(d.logprobs);
        }
        if let Some(f) = done {
            let now = Instant::now();
            let first = self.first.unwrap_or(now);
            v["done_reason"] = json!(if f.cut_off() { "length" } else { "stop" });
            v["total_duration"] = json!(nanos(now - self.started));
            v["load_duration"] = json!(nanos(self.submitted - self.started));
            v["prompt_eval_count"] = json!(f.prompt_tokens);
            v["prompt_eval_duration"] =
                json!(nanos(first.saturating_duration_since(self.submitted)));
            v["eval_count"] = json!(f.completion_tokens);
            v["eval_duration"] = json!(nanos(now - first));
        }
        v
    }
}

/// The answer of a request that only loads the model (an empty prompt or
/// conversation), or with `keep_alive: 0` unloads it.
pub fn loaded(kind: Kind, model: &str, unloaded: bool) -> Response {
    let mut v = json!({"model": model, "created_at": time::now()});
    match kind {
        Kind::Chat => v["message"] = json!({"role": "assistant", "content": ""}),
        Kind::Generate => v["response"] = json!(""),
    }
    v["done"] = json!(true);
    v["done_reason"] = json!(if unloaded { "unload" } else { "load" });
    axum::Json(v).into_response()
}

/// Waits for the whole answer and sends it as one object.
pub async fn collect(mut reply: Reply, ticket: Ticket, mut rx: UnboundedReceiver<Out>) -> Response {
    let mut all = Delta::default();
    let result = loop {
        let Some(out) = rx.recv().await else {
            break Err(ApiError::internal("the model thread stopped"));
        };
        match reply.feed(out) {
            Step::More(ds) => {
                ds.into_iter().for_each(|d| all.merge(d));
                if reply.ended() {
                    ticket.stop();
                }
            }
            Step::Done(ds, f) => {
                ds.into_iter().for_each(|d| all.merge(d));
                break Ok(reply.line(&all, Some(&f)));
            }
            Step::Failed(e) => break Err(ApiError::internal(e)),
        }
    };
    drop(ticket);
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => OllamaError(e).into_response(),
    }
}

struct StreamState {
    reply: Reply,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    lines: VecDeque<String>,
    done: bool,
}

impl StreamState {
    fn push(&mut self, v: &Value) {
        self.lines.push_back(format!("{v}\n"));
    }

    fn end(&mut self) {
        self.done = true;
        self.ticket = None;
    }

    fn handle(&mut self, out: Option<Out>) {
        let step = match out {
            Some(out) => self.reply.feed(out),
            None => Step::Failed("the model thread stopped".into()),
        };
        match step {
            Step::More(ds) => {
                for d in ds {
                    let v = self.reply.line(&d, None);
                    self.push(&v);
                }
                if let (true, Some(t)) = (self.reply.ended(), &self.ticket) {
                    t.stop();
                }
            }
            Step::Done(mut ds, f) => {
                // The last delta holds the remaining log probabilities and
                // goes with the final line.
                let last = ds.pop().unwrap_or_default();
                for d in ds {
                    let v = self.reply.line(&d, None);
                    self.push(&v);
                }
                let v = self.reply.line(&last, Some(&f));
                self.push(&v);
                self.end();
            }
            Step::Failed(e) => {
                // As Ollama reports a failure mid-stream: a line with
                // `error`, which its clients raise.
                self.push(&json!({"error": e}));
                self.end();
            }
        }
    }
}

/// Streams the answer as NDJSON.
pub fn stream(reply: Reply, ticket: Ticket, rx: UnboundedReceiver<Out>) -> Response {
    let st = StreamState {
        reply,
        rx,
        ticket: Some(ticket),
        lines: VecDeque::new(),
        done: false,
    };
    let body = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(line) = st.lines.pop_front() {
                return Some((Ok::<_, Infallible>(line), st));
            }
            if st.done {
                return None;
            }
            let out = st.rx.recv().await;
            st.handle(out);
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use minfer_engine::StopReason;

    use super::*;

    fn finish(reason: StopReason) -> Finish {
        Finish {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_tokens: 0,
            reason,
        }
    }

    #[test]
    fn chat_pieces_become_thinking_content_and_object_calls() {
        let split = Split::qwen_tools();
        let t = Instant::now();
        let mut r = Reply::new(Kind::Chat, "m:latest", &split, 1, (t, t));
        let mut all = Delta::default();
        for s in [
            "<think>hm</think>",
            "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
        ] {
            let Step::More(ds) = r.feed(Out::Text(0, s.into())) else {
                panic!()
            };
            ds.into_iter().for_each(|d| all.merge(d));
        }
        let Step::Done(ds, f) = r.feed(Out::Done(0, finish(StopReason::Eog))) else {
            panic!()
        };
        ds.into_iter().for_each(|d| all.merge(d));
        let v = r.line(&all, Some(&f));
        assert_eq!(v["model"], "m:latest");
        assert_eq!(v["message"]["thinking"], "hm");
        assert_eq!(v["message"]["content"], "Sure.");
        assert_eq!(
            v["message"]["tool_calls"][0]["function"]["arguments"]["a"],
            1
        );
        assert_eq!(v["done"], true);
        assert_eq!(v["done_reason"], "stop");
        assert_eq!(v["prompt_eval_count"], 7);
        assert_eq!(v["eval_count"], 3);
        assert!(v["total_duration"].as_u64().is_some());
    }

    #[test]
    fn generate_lines_carry_response_and_length_ends() {
        let t = Instant::now();
        let mut r = Reply::new(Kind::Generate, "m", &Split::default(), 2, (t, t));
        let Step::More(ds) = r.feed(Out::Text(0, "<think>x".into())) else {
            panic!()
        };
        assert_eq!(ds.len(), 1);
        let v = r.line(&ds[0], None);
        assert_eq!(v["response"], "<think>x");
        assert_eq!(v["done"], false);
        assert!(v.get("done_reason").is_none());
        let Step::Done(_, f) = r.feed(Out::Done(0, finish(StopReason::MaxTokens))) else {
            panic!()
        };
        assert_eq!(r.line(&Delta::default(), Some(&f))["done_reason"], "length");
    }
}
