//! A request's generations streamed in OpenAI's shape: server-sent events
//! of chunks, ending in `data: [DONE]`, with a keep-alive comment while
//! the prompt is prefilled.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::logprobs;
use super::render::{finish_reason, Api, Shape};
use crate::events::{Finish, Out, Progress, Report, Timings, TokenLogprob};
use crate::http::ApiError;
use crate::models::Ticket;
use crate::output::{Piece, Splitter};

/// Where one choice of a stream stands.
struct ChoiceState {
    splitter: Splitter,
    /// Tool calls sent so far.
    calls: usize,
    /// Log probabilities not yet sent with a chunk.
    logprobs: Vec<TokenLogprob>,
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
    /// The first choice's timings, once it has ended.
    timings: Option<Value>,
    /// The first choice's token ids and engine times, until it ends.
    generated: Option<crate::events::Generated>,
    /// The first choice's timings to send with its next chunk
    /// (`timings_per_token`).
    tick: Option<Timings>,
    /// What the request asked to hear while it runs.
    report: Report,
    done: bool,
}

impl StreamState {
    fn chunk(&mut self, k: usize, delta: Value, finish: Option<&str>) {
        let mut v = self.chunk_value(k, delta, finish);
        if k == 0 {
            if let Some(t) = self.tick.take() {
                v["timings"] = t.to_json();
            }
        }
        self.pending.push_back(v.to_string());
    }

    /// A chunk with no text that says how far the prompt has come
    /// (llama-server's `return_progress`).
    fn progress(&mut self, p: &Progress) {
        let mut v = self.chunk_value(0, json!({}), None);
        v["prompt_progress"] = p.to_json();
        if self.report.timings {
            v["timings"] = p.timings.to_json();
        }
        self.pending.push_back(v.to_string());
    }

    fn chunk_value(&mut self, k: usize, delta: Value, finish: Option<&str>) -> Value {
        let shape = &self.shape;
        let lp = std::mem::take(&mut self.choices[k].logprobs);
        let choice = match shape.api {
            Api::Chat => {
                let lp = logprobs::chat(shape.logprobs, &lp);
                json!({"index": k, "delta": delta, "logprobs": lp, "finish_reason": finish})
            }
            Api::Text => {
                let text = delta["content"].as_str().unwrap_or("").to_string();
                let lp = if shape.logprobs && !lp.is_empty() {
                    logprobs::legacy(&lp, &mut self.choices[k].offset)
                } else if shape.logprobs {
                    // Text of no new token (the echoed prompt).
                    self.choices[k].offset += text.chars().count();
                    logprobs::legacy(&[], &mut 0)
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
        v
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
            finish_reason(f)
        };
        self.chunk(k, json!({}), Some(reason));
        self.choices[k].done = true;
        self.completion_tokens += f.completion_tokens;
        self.cached_tokens = self.cached_tokens.max(f.cached_tokens);
        if k == 0 {
            if let Some(g) = self.generated.take() {
                self.timings = Some(g.timings(f));
            }
        }
        if self.choices.iter().all(|c| c.done) {
            if self.shape.include_usage {
                let mut v = self.shape.envelope(true, Vec::new());
                v["usage"] = self.shape.usage(self.completion_tokens, self.cached_tokens);
                // llama-server's timings ride on the usage chunk.
                if let Some(t) = self.timings.take() {
                    v["timings"] = t;
                }
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
            Out::Generated(0, g) => {
                self.generated = Some(g.clone());
                return;
            }
            Out::Generated(..) => return,
            Out::Timings(0, t) => {
                self.tick = Some(*t);
                return;
            }
            Out::Progress(0, p) => {
                let p = *p;
                self.progress(&p);
                return;
            }
            Out::Timings(..) | Out::Progress(..) => return,
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
            Out::Generated(..) | Out::Timings(..) | Out::Progress(..) => {}
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
    report: Report,
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
        timings: None,
        generated: None,
        tick: None,
        report,
        done: false,
    };
    for k in 0..st.shape.n {
        match st.shape.api {
            // llama-server opens with a null content: a stream of only tool
            // calls never carries text, and its clients read an empty
            // string as a text delta.
            Api::Chat => st.chunk(k, json!({"role": "assistant", "content": null}), None),
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
