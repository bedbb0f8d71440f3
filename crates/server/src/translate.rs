//! What the Anthropic Messages and OpenAI Responses endpoints share. Both
//! translate their requests into a [`ChatRequest`] and run it through the
//! chat path ([`chat::prepare`], then [`admit`](crate::http::admit)); both
//! then list and stream the answer as ordered blocks (thinking, text, tool
//! calls), which [`Blocks`] cuts from the model's text with the chat
//! [`Splitter`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::calls::Call;
use crate::events::{Finish, Generated, Out, Progress, Timings};
use crate::gather::gather;
use crate::http::{Admitted, ApiError};
use crate::models::{Model, Ticket};
use crate::openai::chat::{self, Prepared};
use crate::openai::request::ChatRequest;
use crate::output::{Piece, Split, Splitter};
use crate::state::Preparing;

/// Builds the chat request an endpoint translated into OpenAI's chat
/// shape.
///
/// # Errors
/// A 400 when the translation does not make a valid chat request.
pub fn chat_request(v: Value) -> Result<ChatRequest, ApiError> {
    serde_json::from_value(v).map_err(|e| {
        ApiError::bad_request(format!("the body does not match the expected schema: {e}"))
    })
}

/// Checks the model, renders and tokenizes `req` as the chat endpoint
/// does (one choice).
///
/// # Errors
/// A 400 naming the field at fault, 404 for another model, the errors
/// of a wait for the model to load.
pub fn prepare(call: &Preparing, req: &ChatRequest) -> Result<(Arc<Model>, Prepared), ApiError> {
    let model = call.model(&req.sampling.model)?;
    let prep = chat::prepare(model.served()?, req, 1)?;
    Ok((model, prep))
}

/// The string `field` of the object at `at` (a request path such as
/// `messages[2].content[0]`).
///
/// # Errors
/// A 400 naming `at.field` when it is missing or not a string.
pub fn string_at(v: &Value, field: &str, at: &str) -> Result<String, ApiError> {
    v.get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            let param = format!("{at}.{field}");
            ApiError::bad_param(&param, format!("{param} must be a string"))
        })
}

/// One block of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Thinking text.
    Reasoning(String),
    /// Answer text.
    Text(String),
    /// A tool call.
    Call(Call),
}

/// What happens to the blocks as the answer streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Ev {
    /// Block `i` starts: a text block empty, a call whole.
    Open(usize, Block),
    /// More text of the open block `i` (of the open block's kind).
    Delta(usize, Block),
    /// Block `i` is complete.
    Close(usize, Block),
}

/// Cuts one choice's text into blocks: consecutive text of one kind is one
/// block, and every call is a block of its own.
#[derive(Debug)]
pub struct Blocks {
    splitter: Splitter,
    open: Option<Block>,
    /// The complete blocks, in order.
    pub closed: Vec<Block>,
}

impl Blocks {
    /// Blocks of an answer split as `split` says.
    pub fn new(split: &Split) -> Blocks {
        Blocks {
            splitter: Splitter::new(split),
            open: None,
            closed: Vec::new(),
        }
    }

    /// The blocks of a whole answer.
    pub fn of(split: &Split, text: &str) -> Vec<Block> {
        let mut b = Blocks::new(split);
        b.push(text);
        b.finish();
        b.closed
    }

    /// Adds generated text; returns what happened to the blocks.
    pub fn push(&mut self, text: &str) -> Vec<Ev> {
        let mut out = Vec::new();
        for p in self.splitter.push(text) {
            self.piece(p, &mut out);
        }
        out
    }

    /// The answer ended: the open block closes.
    pub fn finish(&mut self) -> Vec<Ev> {
        let mut out = Vec::new();
        for p in self.splitter.finish() {
            self.piece(p, &mut out);
        }
        self.close(&mut out);
        out
    }

    /// Whether the answer is complete although the model goes on (see
    /// [`Splitter::ended`]).
    pub fn ended(&self) -> bool {
        self.splitter.ended()
    }

    /// Whether the answer called a tool.
    pub fn has_calls(&self) -> bool {
        self.closed.iter().any(|b| matches!(b, Block::Call(_)))
    }

    fn close(&mut self, out: &mut Vec<Ev>) {
        if let Some(b) = self.open.take() {
            out.push(Ev::Close(self.closed.len(), b.clone()));
            self.closed.push(b);
        }
    }

    fn piece(&mut self, p: Piece, out: &mut Vec<Ev>) {
        let i = self.closed.len();
        let (delta, empty) = match p {
            Piece::Call(c) => {
                self.close(out);
                let i = self.closed.len();
                out.push(Ev::Open(i, Block::Call(c.clone())));
                out.push(Ev::Close(i, Block::Call(c.clone())));
                self.closed.push(Block::Call(c));
                return;
            }
            Piece::Content(t) => (Block::Text(t), Block::Text(String::new())),
            Piece::Reasoning(t) => (Block::Reasoning(t), Block::Reasoning(String::new())),
        };
        match (&mut self.open, &delta) {
            (Some(Block::Text(s)), Block::Text(t))
            | (Some(Block::Reasoning(s)), Block::Reasoning(t)) => {
                s.push_str(t);
                out.push(Ev::Delta(i, delta));
            }
            _ => {
                self.close(out);
                let i = self.closed.len();
                self.open = Some(delta.clone());
                out.push(Ev::Open(i, empty));
                out.push(Ev::Delta(i, delta));
            }
        }
    }
}

/// A server-sent event: its name and its data.
pub type Named = (&'static str, Value);

/// An endpoint's server-sent events for one streamed answer.
pub trait Sink: Send + 'static {
    /// Events for more text of the answer.
    fn text(&mut self, s: &str, out: &mut Vec<Named>);
    /// Events for the end of the answer (the stream ends after them).
    fn done(&mut self, f: &Finish, out: &mut Vec<Named>);
    /// Events for a failure (the stream ends after them).
    fn error(&mut self, e: &ApiError, out: &mut Vec<Named>);
    /// An event that says the answer is still coming, sent while nothing
    /// else is (a long prompt being prefilled): clients abort a stream
    /// that stays silent too long.
    fn idle(&mut self, out: &mut Vec<Named>);
    /// Whether the answer is complete although the model goes on: the
    /// generation is then stopped, and ends as if the model had.
    fn ended(&self) -> bool;
    /// Events for the prompt's progress (only for a request that asked).
    fn progress(&mut self, _p: &Progress, _out: &mut Vec<Named>) {}
    /// The timings so far, sent just before more text (only for a request
    /// that asked).
    fn timings(&mut self, _t: Timings) {}
    /// The answer's token ids and engine times, just before its end.
    fn generated(&mut self, _g: &Generated) {}
}

/// Feeds `sink` the stream tests' answer (a thinking block, text, then one
/// tool call, in pieces cut across the tags) and its end at an
/// end-of-generation token; returns every event it made.
#[cfg(test)]
pub(crate) fn feed_think_text_call(sink: &mut impl Sink) -> Vec<Named> {
    let mut out = Vec::new();
    for t in [
        "<think>h",
        "m</think>Hi",
        " there<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
    ] {
        sink.text(t, &mut out);
    }
    let f = Finish {
        prompt_tokens: 4,
        completion_tokens: 9,
        cached_tokens: 0,
        reason: minfer_engine::StopReason::Eog,
    };
    sink.done(&f, &mut out);
    out
}

fn event((name, v): Named) -> SseEvent {
    SseEvent::default().event(name).data(v.to_string())
}

struct Stream<S> {
    sink: S,
    rx: UnboundedReceiver<Out>,
    /// Dropped with the stream: a client that goes away cancels.
    ticket: Option<Ticket>,
    pending: VecDeque<Named>,
}

/// Streams one answer's events: `first`, then what `sink` makes of the
/// model's output, and the sink's keep-alive event whenever the model has
/// said nothing for `keep_alive`.
pub fn stream(
    first: Vec<Named>,
    sink: impl Sink,
    (ticket, rx): (Ticket, UnboundedReceiver<Out>),
    keep_alive: Duration,
) -> Response {
    let st = Stream {
        sink,
        rx,
        ticket: Some(ticket),
        pending: first.into(),
    };
    let events = futures_util::stream::unfold(st, move |mut st| async move {
        loop {
            if let Some(e) = st.pending.pop_front() {
                return Some((Ok::<_, Infallible>(event(e)), st));
            }
            st.ticket.as_ref()?;
            let mut out = Vec::new();
            let Ok(got) = tokio::time::timeout(keep_alive, st.rx.recv()).await else {
                st.sink.idle(&mut out);
                st.pending.extend(out);
                continue;
            };
            match got {
                Some(Out::Text(0, s)) => {
                    st.sink.text(&s, &mut out);
                    if let (true, Some(t)) = (st.sink.ended(), &st.ticket) {
                        t.stop();
                    }
                }
                Some(Out::Done(0, f)) => {
                    st.sink.done(&f, &mut out);
                    st.ticket = None;
                }
                Some(Out::Progress(0, p)) => st.sink.progress(&p, &mut out),
                Some(Out::Timings(0, t)) => st.sink.timings(t),
                Some(Out::Generated(0, g)) => st.sink.generated(&g),
                Some(Out::Error(e)) => {
                    st.sink.error(&ApiError::internal(e), &mut out);
                    st.ticket = None;
                }
                Some(_) => {}
                None => {
                    let e = ApiError::internal("the model thread stopped");
                    st.sink.error(&e, &mut out);
                    st.ticket = None;
                }
            }
            st.pending.extend(out);
        }
    });
    Sse::new(events).into_response()
}

/// Waits for the whole answer of an admitted one-choice request, stopped
/// once it is complete although the model goes on, and cuts it into
/// blocks.
///
/// # Errors
/// The request's error, or a 500 when the model thread stopped.
pub async fn whole(
    split: &Split,
    (ticket, mut rx): Admitted,
) -> Result<(Vec<Block>, Finish), ApiError> {
    let got = gather(1, &mut rx, Some((split, &ticket))).await;
    drop(ticket);
    let c = got?.pop().ok_or_else(|| ApiError::internal("no answer"))?;
    Ok((Blocks::of(split, &c.text), c.finish))
}

/// Unix seconds now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_become_ordered_blocks() {
        let text = "<think>hm</think>Let me look.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
        let call = Call {
            name: "f".into(),
            arguments: r#"{"a":1}"#.into(),
        };
        assert_eq!(
            Blocks::of(&Split::qwen_tools(), text),
            vec![
                Block::Reasoning("hm".into()),
                Block::Text("Let me look.".into()),
                Block::Call(call.clone()),
            ]
        );
        let mut b = Blocks::new(&Split::qwen_tools());
        let mut evs = Vec::new();
        for ch in text.chars() {
            evs.extend(b.push(&ch.to_string()));
        }
        evs.extend(b.finish());
        // Every block opens once, its deltas join to it, and it closes once.
        for (i, block) in b.closed.iter().enumerate() {
            let opens = evs
                .iter()
                .filter(|e| matches!(e, Ev::Open(j, _) if *j == i))
                .count();
            let closes: Vec<&Block> = evs
                .iter()
                .filter_map(|e| match e {
                    Ev::Close(j, b) if *j == i => Some(b),
                    _ => None,
                })
                .collect();
            assert_eq!((opens, closes, i), (1, vec![block], i));
            let joined: String = evs
                .iter()
                .filter_map(|e| match e {
                    Ev::Delta(j, Block::Text(t) | Block::Reasoning(t)) if *j == i => {
                        Some(t.as_str())
                    }
                    _ => None,
                })
                .collect();
            match block {
                Block::Text(t) | Block::Reasoning(t) => assert_eq!(&joined, t),
                Block::Call(_) => assert!(joined.is_empty()),
            }
        }
        assert!(b.has_calls());
        assert!(matches!(evs.last(), Some(Ev::Close(2, Block::Call(_)))));
    }
}
