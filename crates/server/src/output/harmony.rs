//! The harmony format of gpt-oss, as it streams: the answer is a run of
//! messages, each a header (`<|channel|>NAME`, an optional recipient
//! `to=functions.NAME`, an optional `<|constrain|>json`) closed by
//! `<|message|>`, then a body closed by `<|end|>`, `<|call|>` or
//! `<|return|>` (the last two end the generation and may never be
//! written), the next header opening with `<|start|>assistant`. The
//! `analysis` channel is reasoning, a message to `functions.NAME` is a
//! call of NAME with the body as its JSON arguments, and everything else
//! (`final`, a `commentary` preamble) is content.

use crate::calls::{Call, Catalog, Piece};

const MESSAGE: &str = "<|message|>";
const ENDS: [&str; 3] = ["<|end|>", "<|call|>", "<|return|>"];
const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";

/// What the body of the message being read is.
#[derive(Debug, Clone, PartialEq)]
enum Body {
    Reasoning,
    Content,
    /// A call of this function; the body is kept whole.
    Call(String),
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Reading a header (or, before any, deciding whether the answer is
    /// harmony at all).
    Header,
    Body(Body),
    /// The answer did not open with a header: plain content.
    Plain,
}

/// The streaming reader of one harmony answer.
#[derive(Debug, Clone)]
pub(super) struct Harmony {
    state: State,
    buf: String,
    /// The body of a call, until its end.
    call: String,
    known: Catalog,
}

/// The length of the longest suffix of `s` that starts a special token
/// (`<|`…): text that may still become a marker.
fn held(s: &str) -> usize {
    match s.rfind("<|") {
        Some(at) if !s[at..].contains("|>") => s.len() - at,
        _ => usize::from(s.ends_with('<')),
    }
}

/// What a header says the body is: a call when its recipient is a
/// function of `known` (any function when none are known), reasoning on
/// the analysis channel, content otherwise.
fn body_of(header: &str, known: &Catalog) -> Body {
    let recipient = header
        .split(|c: char| c.is_whitespace() || c == '<')
        .find_map(|w| w.strip_prefix("to=functions."));
    if let Some(name) = recipient.filter(|n| !n.is_empty()) {
        let name = name.trim_end_matches(['|', '>']);
        if known.is_empty() || known.has(name) {
            return Body::Call(name.to_string());
        }
    }
    let channel = header
        .split(CHANNEL)
        .nth(1)
        .and_then(|c| c.split(|c: char| c.is_whitespace() || c == '<').next());
    match channel {
        Some("analysis") => Body::Reasoning,
        _ => Body::Content,
    }
}

impl Harmony {
    pub(super) fn new(known: Catalog) -> Harmony {
        Harmony {
            state: State::Header,
            buf: String::new(),
            call: String::new(),
            known,
        }
    }

    /// Adds generated text; returns what is now decided (`end`: the
    /// generation is over and the rest is decided too).
    pub(super) fn push(&mut self, text: &str, end: bool) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out, end) {}
        out
    }

    fn step(&mut self, out: &mut Vec<Piece>, end: bool) -> bool {
        match self.state.clone() {
            State::Plain => {
                out.push(Piece::Content(std::mem::take(&mut self.buf)));
                false
            }
            State::Header => self.header(end),
            State::Body(body) => self.body(body, out, end),
        }
    }

    fn header(&mut self, end: bool) -> bool {
        let lead = self.buf.trim_start();
        if !lead.is_empty() && !lead.starts_with("<|") && !"<|".starts_with(lead) {
            // Not harmony (or text between messages): content as it is.
            self.state = State::Plain;
            return true;
        }
        match self.buf.find(MESSAGE) {
            Some(at) => {
                let header: String = self.buf.drain(..at + MESSAGE.len()).collect();
                let header = header.trim_start().trim_start_matches(START);
                self.state = State::Body(body_of(header, &self.known));
                true
            }
            None if end => {
                // A header cut off by the end: nothing of it is an answer.
                self.buf.clear();
                false
            }
            None => {
                // A header with no `<|message|>` after a whole message's
                // worth of text is not one.
                if self.buf.len() > 512 {
                    self.state = State::Plain;
                    return true;
                }
                false
            }
        }
    }

    fn body(&mut self, body: Body, out: &mut Vec<Piece>, end: bool) -> bool {
        let close = ENDS
            .iter()
            .filter_map(|e| self.buf.find(e).map(|at| (at, e.len())))
            .min();
        let (text, closed): (String, bool) = match close {
            Some((at, len)) => {
                let text = self.buf.drain(..at).collect();
                self.buf.drain(..len);
                (text, true)
            }
            None => {
                let keep = if end { 0 } else { held(&self.buf) };
                (self.buf.drain(..self.buf.len() - keep).collect(), end)
            }
        };
        match &body {
            Body::Reasoning => out.push(Piece::Reasoning(text)),
            Body::Content => out.push(Piece::Content(text)),
            Body::Call(_) => self.call.push_str(&text),
        }
        if !closed {
            return false;
        }
        if let Body::Call(name) = body {
            let args = std::mem::take(&mut self.call);
            out.push(call_or_text(name, &args));
        }
        self.state = State::Header;
        true
    }
}

/// A call of `name` with `args` as its arguments when they are a JSON
/// object, else the text it was.
fn call_or_text(name: String, args: &str) -> Piece {
    match serde_json::from_str::<serde_json::Value>(args.trim()) {
        Ok(v @ serde_json::Value::Object(_)) => Piece::Call(Call {
            name,
            arguments: v.to_string(),
        }),
        _ => Piece::Content(args.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Feeds `text` in pieces of `n` bytes (at character boundaries) and
    /// merges neighbouring text pieces of one kind.
    fn read(known: Catalog, text: &str, n: usize) -> Vec<Piece> {
        let mut h = Harmony::new(known);
        let mut raw = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let mut to = (at + n).min(text.len());
            while !text.is_char_boundary(to) {
                to += 1;
            }
            raw.extend(h.push(&text[at..to], false));
            at = to;
        }
        raw.extend(h.push("", true));
        let mut out: Vec<Piece> = Vec::new();
        for p in raw {
            match (&p, out.last_mut()) {
                (Piece::Content(s) | Piece::Reasoning(s), _) if s.is_empty() => {}
                (Piece::Content(s), Some(Piece::Content(t)))
                | (Piece::Reasoning(s), Some(Piece::Reasoning(t))) => t.push_str(s),
                _ => out.push(p),
            }
        }
        out
    }

    fn weather() -> Catalog {
        Catalog::new(vec![("get_weather".into(), json!({}))])
    }

    #[test]
    fn reasoning_then_the_final_answer_in_any_chunking() {
        let text = "<|channel|>analysis<|message|>User asks: 2+2. Easy.<|end|>\
                    <|start|>assistant<|channel|>final<|message|>It is 4.";
        for n in 1..=text.len() {
            assert_eq!(
                read(Catalog::default(), text, n),
                [
                    Piece::Reasoning("User asks: 2+2. Easy.".into()),
                    Piece::Content("It is 4.".into())
                ],
                "chunks of {n}"
            );
        }
    }

    #[test]
    fn a_message_to_a_function_is_a_call() {
        let text = "<|channel|>analysis<|message|>Need weather.<|end|>\
                    <|start|>assistant<|channel|>commentary to=functions.get_weather \
                    <|constrain|>json<|message|>{\"city\": \"Paris\"}";
        for n in [1, 3, 7, text.len()] {
            assert_eq!(
                read(weather(), text, n),
                [
                    Piece::Reasoning("Need weather.".into()),
                    Piece::Call(Call {
                        name: "get_weather".into(),
                        arguments: r#"{"city":"Paris"}"#.into()
                    })
                ],
                "chunks of {n}"
            );
        }
        // The recipient may come before the channel, and `<|call|>` may be
        // written out.
        let text = "<|start|>assistant to=functions.get_weather<|channel|>commentary json\
                    <|message|>{\"city\":\"Oslo\"}<|call|>";
        assert_eq!(
            read(weather(), text, 2),
            [Piece::Call(Call {
                name: "get_weather".into(),
                arguments: r#"{"city":"Oslo"}"#.into()
            })]
        );
    }

    #[test]
    fn unknown_recipients_broken_arguments_and_plain_text_stay_text() {
        let text = "<|channel|>commentary to=functions.nope<|message|>{\"a\": 1}<|end|>";
        assert_eq!(
            read(weather(), text, 4),
            [Piece::Content("{\"a\": 1}".into())]
        );
        let text = "<|channel|>commentary to=functions.get_weather<|message|>{\"city\": ";
        assert_eq!(
            read(weather(), text, 5),
            [Piece::Content("{\"city\": ".into())]
        );
        let text = "Just an answer, <|no header|> at all.";
        assert_eq!(read(weather(), text, 3), [Piece::Content(text.into())]);
        // A commentary preamble is content; an unfinished header is nothing.
        let text = "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|chan";
        assert_eq!(
            read(weather(), text, 6),
            [Piece::Content("Checking.".into())]
        );
    }
}
