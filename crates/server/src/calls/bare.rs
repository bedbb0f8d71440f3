//! Calls written outside the family's markers. Small models taught the
//! `<tool_call>` tags often answer with the call's JSON alone
//! (Qwen2.5-Coder writes `{"name": …, "arguments": …}`), or put it in a
//! ```` ```json ```` fence after a sentence. As llama.cpp's and Ollama's
//! parsers do, an answer that starts with such JSON is held back and, if
//! it is nothing but calls of the request's tools, answered as calls; a
//! fenced block anywhere in the answer is held until it closes and, if it
//! holds nothing but such calls, becomes them. Anything else is released
//! as the text it was.
//!
//! Bare JSON is decided one value at a time: a complete value followed by
//! the start of another is a call at once (so that calls stream as they
//! are written, and a model that repeats its call can be stopped), while
//! the last value waits for the end, since text after it would make the
//! whole answer text.

use serde_json::Value;

use super::json::{parse_any, value_calls};
use super::types::{Catalog, Piece};

const FENCE: &str = "```";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Only whitespace of the content so far.
    Undecided,
    /// The content started like JSON: held to the end.
    Bare,
    /// Inside a code fence: held until it closes.
    Fence,
    /// Plain content: passed on as it comes, but for a possible fence.
    Passing,
}

/// The filter over one answer's pieces.
#[derive(Debug, Clone)]
pub struct BareCalls {
    known: Catalog,
    state: State,
    held: String,
}

/// The length of the longest suffix of `s` that is a proper prefix of a
/// fence (one or two backticks at the end).
fn partial_fence(s: &str) -> usize {
    let n = s.len() - s.trim_end_matches('`').len();
    if n < FENCE.len() {
        n
    } else {
        0
    }
}

impl BareCalls {
    /// A filter recognising calls of the functions in `known`.
    pub fn new(known: Catalog) -> BareCalls {
        BareCalls {
            known,
            state: State::Undecided,
            held: String::new(),
        }
    }

    /// Passes `pieces` on, holding content that may be a call.
    pub fn push(&mut self, pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out = Vec::with_capacity(pieces.len());
        for p in pieces {
            match p {
                Piece::Content(text) => {
                    self.held.push_str(&text);
                    while self.step(&mut out) {}
                }
                other => out.push(other),
            }
        }
        out
    }

    /// Decides what it can of the held text; `true` when the state
    /// changed and another pass may decide more.
    fn step(&mut self, out: &mut Vec<Piece>) -> bool {
        match self.state {
            State::Undecided => {
                let head = self.held.trim_start();
                if head.starts_with('{') || head.starts_with('[') {
                    self.state = State::Bare;
                } else if head.starts_with(FENCE) {
                    self.state = State::Fence;
                } else if head.is_empty() || FENCE.starts_with(head) {
                    return false;
                } else {
                    self.state = State::Passing;
                }
                true
            }
            State::Bare => self.bare_values(out),
            State::Passing => {
                if let Some(at) = self.held.find(FENCE) {
                    let text: String = self.held.drain(..at).collect();
                    push_text(out, text);
                    self.state = State::Fence;
                    return true;
                }
                let keep = partial_fence(&self.held);
                let text: String = self.held.drain(..self.held.len() - keep).collect();
                push_text(out, text);
                false
            }
            State::Fence => {
                // The fence closes after its opening line.
                let start = self.held.find(FENCE).unwrap_or(0) + FENCE.len();
                let Some(line) = self.held[start..].find('\n') else {
                    return false;
                };
                let body = start + line;
                let Some(close) = self.held[body..].find(FENCE) else {
                    return false;
                };
                let end = body + close + FENCE.len();
                let block: String = self.held.drain(..end).collect();
                self.decide(block, out);
                self.state = State::Passing;
                true
            }
        }
    }

    /// Releases the complete bare values that another value follows, as
    /// calls; all that is held as text once something else shows up.
    fn bare_values(&mut self, out: &mut Vec<Piece>) -> bool {
        let mut values = serde_json::Deserializer::from_str(&self.held).into_iter::<Value>();
        let mut calls = Vec::new();
        let mut decided = 0;
        let text = loop {
            match values.next() {
                Some(Ok(v)) => {
                    let end = values.byte_offset();
                    let rest = self.held[end..].trim_start();
                    if rest.is_empty() {
                        break false;
                    }
                    if !rest.starts_with(['{', '[']) {
                        break true;
                    }
                    match value_calls(&v, Some(&self.known)) {
                        Some(c) => {
                            calls.extend(c);
                            decided = end;
                        }
                        None => break true,
                    }
                }
                Some(Err(e)) if e.is_eof() => break false,
                Some(Err(_)) => break true,
                None => break false,
            }
        };
        if decided > 0 {
            self.held.drain(..decided);
            out.extend(calls.into_iter().map(Piece::Call));
        }
        if text {
            let rest = std::mem::take(&mut self.held);
            push_text(out, rest);
            self.state = State::Passing;
        }
        text
    }

    /// A held block: calls if it is nothing but calls, else its text.
    fn decide(&self, block: String, out: &mut Vec<Piece>) {
        match parse_any(&block, Some(&self.known)) {
            Some(calls) => out.extend(calls.into_iter().map(Piece::Call)),
            None => push_text(out, block),
        }
    }

    /// The answer ended: what was held, as calls or as text.
    pub fn finish(&mut self) -> Vec<Piece> {
        let held = std::mem::take(&mut self.held);
        let mut out = Vec::new();
        match self.state {
            // A fence cut off by the token limit is decided as it stands.
            State::Bare | State::Fence => self.decide(held, &mut out),
            State::Undecided | State::Passing => push_text(&mut out, held),
        }
        self.state = State::Passing;
        out
    }
}

fn push_text(out: &mut Vec<Piece>, text: String) {
    if text.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(Piece::Content(t)) => t.push_str(&text),
        _ => out.push(Piece::Content(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::Call;
    use serde_json::json;

    fn known() -> Catalog {
        Catalog::new(vec![
            ("get_weather".into(), json!({})),
            ("now".into(), json!({})),
        ])
    }

    fn run(chunks: &[&str]) -> Vec<Piece> {
        let mut f = BareCalls::new(known());
        let mut out = Vec::new();
        for c in chunks {
            for p in f.push(vec![Piece::Content((*c).into())]) {
                merge(&mut out, p);
            }
        }
        for p in f.finish() {
            merge(&mut out, p);
        }
        out
    }

    fn merge(out: &mut Vec<Piece>, p: Piece) {
        match (p, out.last_mut()) {
            (Piece::Content(s), Some(Piece::Content(t))) => t.push_str(&s),
            (p, _) => out.push(p),
        }
    }

    /// Every way of cutting `text` into two chunks gives `want`.
    fn every_cut(text: &str, want: &[Piece]) {
        for i in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            assert_eq!(run(&[&text[..i], &text[i..]]), want, "cut at {i}: {text}");
        }
    }

    fn weather(city: &str) -> Piece {
        Piece::Call(Call {
            name: "get_weather".into(),
            arguments: format!(r#"{{"city":"{city}"}}"#),
        })
    }

    #[test]
    fn bare_and_fenced_calls_become_calls() {
        every_cut(
            " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n",
            &[weather("Paris")],
        );
        every_cut(
            "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```",
            &[weather("Rome")],
        );
        assert_eq!(
            run(&[
                "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n",
                "[{\"name\": \"now\"}]"
            ]),
            vec![
                weather("A"),
                Piece::Call(Call {
                    name: "now".into(),
                    arguments: "{}".into()
                })
            ]
        );
    }

    #[test]
    fn a_fence_after_text_becomes_a_call_and_the_text_stays() {
        every_cut(
            "I'll check.\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```\nDone.",
            &[
                Piece::Content("I'll check.\n".into()),
                weather("Oslo"),
                Piece::Content("\nDone.".into()),
            ],
        );
    }

    #[test]
    fn anything_else_stays_text() {
        for text in [
            "{\"name\": \"unknown_tool\", \"arguments\": {}}",
            "{\"city\": \"Paris\"}",
            "{\"name\": \"now\"} and some words",
            "```python\nprint(1)\n```",
            "Run this:\n```sh\nls ``x``\n```\nok `a` ``b``",
            "{not json",
            "`",
        ] {
            every_cut(text, &[Piece::Content(text.into())]);
        }
        // Plain text passes as it comes, before the end.
        let mut f = BareCalls::new(known());
        assert_eq!(
            f.push(vec![Piece::Content("  ".into())]),
            Vec::<Piece>::new()
        );
        assert_eq!(
            f.push(vec![Piece::Content("Hi {".into())]),
            vec![Piece::Content("  Hi {".into())]
        );
        assert!(f.finish().is_empty());
    }
}
