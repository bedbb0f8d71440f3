//! Tool calls written as bare JSON. Ollama has no `tool_choice`: a call is
//! always the model's own choice, and small models taught the
//! `<tool_call>` tags often answer with the call's JSON alone (Qwen2.5-Coder
//! writes `{"name": …, "arguments": …}`, sometimes in a ```json fence).
//! As llama.cpp's and Ollama's parsers do, an answer that starts with such
//! JSON is held back and, if it is nothing but calls of the given tools,
//! answered as calls; anything else is released as the text it was.

use serde_json::Value;

use crate::output::Piece;
use crate::tools::Call;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Only whitespace of the content so far.
    Undecided,
    /// The content started like JSON: held to the end.
    Holding,
    /// Plain content: passed on as it comes.
    Passing,
}

/// The filter over one answer's pieces.
#[derive(Debug, Clone)]
pub struct BareCalls {
    names: Vec<String>,
    state: State,
    held: String,
}

impl BareCalls {
    /// A filter recognising calls of the functions `names`.
    pub fn new(names: Vec<String>) -> BareCalls {
        BareCalls {
            names,
            state: State::Undecided,
            held: String::new(),
        }
    }

    /// Passes `pieces` on, holding content that may be a call.
    pub fn push(&mut self, pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out = Vec::with_capacity(pieces.len());
        for p in pieces {
            let Piece::Content(text) = p else {
                out.push(p);
                continue;
            };
            match self.state {
                State::Passing => out.push(Piece::Content(text)),
                State::Holding => self.held.push_str(&text),
                State::Undecided => {
                    self.held.push_str(&text);
                    let head = self.held.trim_start();
                    if head.starts_with('{') || head.starts_with('`') {
                        self.state = State::Holding;
                    } else if !head.is_empty() {
                        self.state = State::Passing;
                        out.push(Piece::Content(std::mem::take(&mut self.held)));
                    }
                }
            }
        }
        out
    }

    /// The answer ended: what was held, as calls or as text.
    pub fn finish(&mut self) -> Vec<Piece> {
        let held = std::mem::take(&mut self.held);
        self.state = State::Passing;
        if held.is_empty() {
            return Vec::new();
        }
        match parse(&held, &self.names) {
            Some(calls) => calls.into_iter().map(Piece::Call).collect(),
            None => vec![Piece::Content(held)],
        }
    }
}

/// One call object: a given tool's `name` and object `arguments` (a JSON
/// string of an object, or none, is taken too).
fn call(v: &Value, names: &[String]) -> Option<Call> {
    let o = v.as_object()?;
    let name = o.get("name")?.as_str()?;
    if !names.iter().any(|n| n == name) {
        return None;
    }
    let args = match o.get("arguments").or_else(|| o.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(s)) => serde_json::from_str(s).ok()?,
        Some(a) => a.clone(),
    };
    args.is_object().then(|| Call {
        name: name.to_string(),
        arguments: args.to_string(),
    })
}

/// `text` as calls: one or more call objects (or lists of them), in an
/// optional code fence; `None` if anything else is in it.
fn parse(text: &str, names: &[String]) -> Option<Vec<Call>> {
    let mut body = text.trim();
    if let Some(rest) = body.strip_prefix("```") {
        let (_lang, inner) = rest.split_once('\n')?;
        body = inner.trim_end().strip_suffix("```")?.trim();
    }
    let mut calls = Vec::new();
    for v in serde_json::Deserializer::from_str(body).into_iter::<Value>() {
        match v.ok()? {
            Value::Array(list) => {
                for item in &list {
                    calls.push(call(item, names)?);
                }
            }
            one => calls.push(call(&one, names)?),
        }
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["get_weather".into(), "now".into()]
    }

    fn run(chunks: &[&str]) -> Vec<Piece> {
        let mut f = BareCalls::new(names());
        let mut out = Vec::new();
        for c in chunks {
            out.extend(f.push(vec![Piece::Content((*c).into())]));
        }
        out.extend(f.finish());
        out
    }

    fn weather(city: &str) -> Piece {
        Piece::Call(Call {
            name: "get_weather".into(),
            arguments: format!(r#"{{"city":"{city}"}}"#),
        })
    }

    #[test]
    fn bare_and_fenced_calls_become_calls() {
        assert_eq!(
            run(&[
                " {\"name\": \"get_weather\", ",
                "\"arguments\": {\"city\": \"Paris\"}}\n"
            ]),
            vec![weather("Paris")]
        );
        assert_eq!(
            run(&[
                "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```"
            ]),
            vec![weather("Rome")]
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
    fn anything_else_stays_text() {
        for text in [
            "{\"name\": \"unknown_tool\", \"arguments\": {}}",
            "{\"city\": \"Paris\"}",
            "{\"name\": \"now\"} and some words",
            "```python\nprint(1)\n```",
            "{not json",
        ] {
            assert_eq!(run(&[text]), vec![Piece::Content(text.into())], "{text}");
        }
        // Plain text passes as it comes, before the end.
        let mut f = BareCalls::new(names());
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
