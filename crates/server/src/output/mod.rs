//! Splitting an answer, as it streams, into reasoning (`<think>…</think>`),
//! content and tool calls (in the syntax the template teaches, and the
//! bare or fenced JSON calls small models write instead). Text that might
//! be the start of a marker is held back until the next piece decides it.

mod harmony;

pub use crate::calls::Piece;
use crate::calls::{BareCalls, Call, Catalog, Syntax};
use harmony::Harmony;

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// How a chat answer is split.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// Extract `<think>` blocks into `reasoning_content`.
    pub reasoning: bool,
    /// The prompt opened the thinking block: the answer starts inside it.
    pub in_thinking: bool,
    /// Parse tool calls in this syntax.
    pub tools: Option<Syntax>,
    /// The request's functions: calls written outside the markers count
    /// only when they name one of these.
    pub known: Catalog,
    /// The answer is in gpt-oss's harmony format (channels and
    /// recipients; see `harmony`), which then decides reasoning and calls.
    pub harmony: bool,
}

#[cfg(test)]
impl Split {
    /// The stream tests' split: reasoning on, not inside a thinking block,
    /// Qwen's `<tool_call>` tags (special tokens), no functions for bare
    /// calls.
    pub(crate) fn qwen_tools() -> Split {
        Split {
            reasoning: true,
            in_thinking: false,
            tools: Some(Syntax::hermes(true)),
            known: Catalog::default(),
            harmony: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before any text: a `<think>` here opens the reasoning.
    Start,
    Reasoning,
    Content,
    /// Inside a tool call's tags.
    Call,
}

/// The streaming splitter of one choice.
#[derive(Debug, Clone)]
pub struct Splitter {
    state: State,
    /// Text not yet decided.
    buf: String,
    /// Extract `<think>` blocks (otherwise they stay in the content).
    reasoning: bool,
    /// Drop the whitespace that starts the content to come (after a
    /// thinking block or a call), however it is chunked.
    trim: bool,
    tools: Option<Syntax>,
    known: Catalog,
    /// With tools: the filter that catches calls outside the markers.
    bare: Option<BareCalls>,
    /// The calls of the answer so far.
    calls: Vec<Call>,
    /// The answer is over although the model goes on: see
    /// [`Splitter::ended`].
    ended: bool,
    /// A harmony answer's reader, which replaces the steps below.
    harmony: Option<Harmony>,
}

/// Calls in one answer past which the model is taken to be looping.
const MAX_CALLS: usize = 32;

/// The length of the longest suffix of `s` that is a proper prefix of
/// `tag` (text that may still become the tag).
fn partial_tag(s: &str, tag: &str) -> usize {
    (1..tag.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl Splitter {
    /// A splitter that extracts reasoning when `split.reasoning`, starting
    /// inside the thinking block when the prompt opened it, and tool calls
    /// in `split.tools`' syntax (and, for the functions of `split.known`,
    /// as bare or fenced JSON).
    pub fn new(split: &Split) -> Splitter {
        let bare = (split.tools.is_some() && !split.known.is_empty())
            .then(|| BareCalls::new(split.known.clone()));
        Splitter {
            state: if split.reasoning && split.in_thinking {
                State::Reasoning
            } else {
                State::Start
            },
            buf: String::new(),
            reasoning: split.reasoning,
            trim: false,
            tools: split.tools.clone(),
            known: split.known.clone(),
            bare,
            calls: Vec::new(),
            ended: false,
            harmony: split.harmony.then(|| Harmony::new(split.known.clone())),
        }
    }

    /// Whether the answer is over although the model may go on: it wrote a
    /// call it had already written (small models repeat their call until
    /// the context is full), or more calls than any answer needs. What
    /// follows is dropped; the caller should stop the generation.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Passes `pieces` on up to the first repeated call.
    fn settle(&mut self, pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out = Vec::with_capacity(pieces.len());
        for p in pieces {
            if self.ended {
                break;
            }
            if let Piece::Call(c) = &p {
                if self.calls.contains(c) || self.calls.len() >= MAX_CALLS {
                    self.ended = true;
                    break;
                }
                self.calls.push(c.clone());
            }
            out.push(p);
        }
        out
    }

    /// Adds generated text; returns what is now decided.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        if self.ended {
            return Vec::new();
        }
        if let Some(h) = &mut self.harmony {
            let out = h.push(text, false);
            return self.settle(out);
        }
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out, false) {}
        let out = match &mut self.bare {
            Some(b) => b.push(out),
            None => out,
        };
        self.settle(out)
    }

    /// The generation ended: everything left is decided.
    pub fn finish(&mut self) -> Vec<Piece> {
        if self.ended {
            return Vec::new();
        }
        if let Some(h) = &mut self.harmony {
            let out = h.push("", true);
            return self.settle(out);
        }
        let mut out = Vec::new();
        while self.step(&mut out, true) {}
        let out = match &mut self.bare {
            Some(b) => {
                let mut all = b.push(out);
                all.extend(b.finish());
                all
            }
            None => out,
        };
        self.settle(out)
    }

    /// Decides what it can of the buffer; `true` when the state changed
    /// and another pass may decide more.
    fn step(&mut self, out: &mut Vec<Piece>, end: bool) -> bool {
        match self.state {
            State::Start => {
                let trimmed = self.buf.trim_start();
                if !self.reasoning || trimmed.starts_with(THINK_OPEN) {
                    if self.reasoning {
                        let skip = self.buf.len() - trimmed.len() + THINK_OPEN.len();
                        self.buf.drain(..skip);
                        self.state = State::Reasoning;
                    } else {
                        self.state = State::Content;
                    }
                    return true;
                }
                if !end && !trimmed.is_empty() && THINK_OPEN.starts_with(trimmed)
                    || !end && trimmed.is_empty()
                {
                    return false;
                }
                self.state = State::Content;
                true
            }
            State::Reasoning => {
                if let Some(at) = self.buf.find(THINK_CLOSE) {
                    let text: String = self.buf.drain(..at).collect();
                    self.buf.drain(..THINK_CLOSE.len());
                    emit(out, Piece::Reasoning(text));
                    // The blank lines between the blocks belong to neither.
                    self.trim = true;
                    self.state = State::Content;
                    return true;
                }
                let keep = if end {
                    0
                } else {
                    partial_tag(&self.buf, THINK_CLOSE)
                };
                let text: String = self.buf.drain(..self.buf.len() - keep).collect();
                emit(out, Piece::Reasoning(text));
                false
            }
            State::Content => {
                if self.trim {
                    let rest = self.buf.trim_start().len();
                    self.buf.drain(..self.buf.len() - rest);
                    if self.buf.is_empty() {
                        return false;
                    }
                    self.trim = false;
                }
                let Some(open) = self
                    .tools
                    .as_ref()
                    .map(|t| t.open)
                    .filter(|o| !o.is_empty())
                else {
                    emit(out, Piece::Content(std::mem::take(&mut self.buf)));
                    return false;
                };
                if let Some(at) = self.buf.find(open) {
                    let text: String = self.buf.drain(..at).collect();
                    emit(out, Piece::Content(text));
                    self.buf.drain(..open.len());
                    self.state = State::Call;
                    return true;
                }
                let keep = if end { 0 } else { partial_tag(&self.buf, open) };
                let text: String = self.buf.drain(..self.buf.len() - keep).collect();
                emit(out, Piece::Content(text));
                false
            }
            State::Call => {
                let Some(t) = &self.tools else {
                    return false;
                };
                let (open, close) = (t.open, t.close);
                let found = (!close.is_empty()).then(|| self.buf.find(close)).flatten();
                match found {
                    Some(at) => {
                        let body: String = self.buf.drain(..at).collect();
                        self.buf.drain(..close.len());
                        match t.parse_body(&body, &self.known) {
                            Some(calls) => out.extend(calls.into_iter().map(Piece::Call)),
                            // Not a call after all: the text stays text.
                            None => emit(out, Piece::Content(format!("{open}{body}{close}"))),
                        }
                        // Whitespace between calls is not content.
                        self.trim = true;
                        self.state = State::Content;
                        true
                    }
                    None if end => {
                        // The families whose calls run to the end, or a
                        // call cut off: whatever parses is a call.
                        let body = std::mem::take(&mut self.buf);
                        match t.parse_body(&body, &self.known) {
                            Some(calls) => out.extend(calls.into_iter().map(Piece::Call)),
                            None => emit(out, Piece::Content(format!("{open}{body}"))),
                        }
                        self.state = State::Content;
                        false
                    }
                    None => false,
                }
            }
        }
    }
}

/// Pushes a text piece, merging with the previous one of its kind and
/// dropping empty ones.
fn emit(out: &mut Vec<Piece>, p: Piece) {
    match (&p, out.last_mut()) {
        (Piece::Content(s) | Piece::Reasoning(s), _) if s.is_empty() => {}
        (Piece::Content(s), Some(Piece::Content(t)))
        | (Piece::Reasoning(s), Some(Piece::Reasoning(t))) => t.push_str(s),
        _ => out.push(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitter(reasoning: bool, in_thinking: bool, tools: Option<Syntax>) -> Splitter {
        Splitter::new(&Split {
            reasoning,
            in_thinking,
            tools,
            known: Catalog::default(),
            harmony: false,
        })
    }

    fn qwen() -> Option<Syntax> {
        Some(Syntax::hermes(true))
    }

    /// Feeds `text` in pieces of `n` bytes (at character boundaries), then
    /// the end, and merges the result.
    fn split(s: &mut Splitter, text: &str, n: usize) -> Vec<Piece> {
        let mut out = Vec::new();
        for p in split_no_finish(s, text, n).into_iter().chain(s.finish()) {
            emit_any(&mut out, p);
        }
        out
    }

    fn emit_any(out: &mut Vec<Piece>, p: Piece) {
        match p {
            Piece::Call(_) => out.push(p),
            p => emit(out, p),
        }
    }

    #[test]
    fn a_repeated_call_ends_the_answer() {
        let known = Catalog::new(vec![("read".into(), serde_json::json!({}))]);
        let call = "{\"name\": \"read\", \"arguments\": {\"path\": \"a\"}}\n";
        let tagged = format!("<tool_call>\n{}</tool_call>\n", call.trim_end());
        for text in [call.to_string(), tagged] {
            for n in [1, 4, 1000] {
                let mut s = Splitter::new(&Split {
                    reasoning: false,
                    in_thinking: false,
                    tools: qwen(),
                    known: known.clone(),
                    harmony: false,
                });
                let mut out = Vec::new();
                // The model loops: the same call again and again.
                let mut fed = 0;
                while !s.ended() && fed < 20 {
                    out.extend(split_no_finish(&mut s, &text, n));
                    fed += 1;
                }
                assert!(s.ended(), "{text:?} in pieces of {n}");
                assert!(fed <= 3, "ended only after {fed} repeats");
                out.extend(s.push(&text));
                out.extend(s.finish());
                let want = Call {
                    name: "read".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                };
                assert_eq!(out, vec![Piece::Call(want)], "{text:?} in pieces of {n}");
            }
        }
        // Two different calls are two calls, and the answer goes on.
        let mut s = Splitter::new(&Split {
            reasoning: false,
            in_thinking: false,
            tools: qwen(),
            known,
            harmony: false,
        });
        let two = "{\"name\": \"read\", \"arguments\": {\"path\": \"a\"}}\n{\"name\": \"read\", \"arguments\": {\"path\": \"b\"}}";
        let got = split(&mut s, two, 3);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(!s.ended());
    }

    /// Feeds `text` in pieces of `n` bytes (at character boundaries).
    fn split_no_finish(s: &mut Splitter, text: &str, n: usize) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let mut j = (i + n).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            out.extend(s.push(&text[i..j]));
            i = j;
        }
        out
    }

    #[test]
    fn reasoning_content_and_calls_in_any_chunking() {
        let text = "<think>\nI should call it.\n</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
        for n in [1, 2, 3, 5, 7, 1000] {
            let mut s = splitter(true, false, qwen());
            let got = split(&mut s, text, n);
            assert_eq!(
                got,
                vec![
                    Piece::Reasoning("\nI should call it.\n".into()),
                    Piece::Content("Let me check.".into()),
                    Piece::Call(Call {
                        name: "get_weather".into(),
                        arguments: r#"{"city":"Paris"}"#.into()
                    }),
                    Piece::Call(Call {
                        name: "now".into(),
                        arguments: "{}".into()
                    }),
                ],
                "chunks of {n}"
            );
        }
    }

    #[test]
    fn without_extraction_or_tools_everything_is_content() {
        let text = "<think>hm</think>answer <tool_call>x</tool_call>";
        let mut s = splitter(false, false, None);
        assert_eq!(split(&mut s, text, 3), vec![Piece::Content(text.into())]);
    }

    #[test]
    fn a_prompt_that_opened_the_thinking_starts_in_it() {
        let mut s = splitter(true, true, None);
        assert_eq!(
            split(&mut s, "deep thought</think>42", 4),
            vec![
                Piece::Reasoning("deep thought".into()),
                Piece::Content("42".into())
            ]
        );
    }

    #[test]
    fn text_that_only_looks_like_a_tag_is_content() {
        let mut s = splitter(true, false, qwen());
        assert_eq!(
            split(&mut s, "<thin a<tool>b<tool_call>not json</tool_call>", 2),
            vec![Piece::Content(
                "<thin a<tool>b<tool_call>not json</tool_call>".into()
            )]
        );
        let mut s = splitter(true, false, qwen());
        assert_eq!(
            split(&mut s, "x<tool_call>{\"name\": \"f\", \"argu", 4),
            vec![Piece::Content(
                "x<tool_call>{\"name\": \"f\", \"argu".into()
            )]
        );
    }

    #[test]
    fn multibyte_text_near_tags_is_not_split() {
        let mut s = splitter(true, false, qwen());
        assert_eq!(
            split(&mut s, "<think>é</think>ü<", 1),
            vec![Piece::Reasoning("é".into()), Piece::Content("ü<".into())]
        );
    }
}
