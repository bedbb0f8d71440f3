//! Tool calls in the syntax a model writes them: which syntax a chat
//! template teaches (found from the template's text, as llama.cpp's
//! `common/chat` does), the parsers of each family's call text, and the
//! filter that also catches the calls small models write outside their
//! family's markers (bare JSON, a fenced JSON block).

mod bare;
mod json;
mod xml;

pub use bare::BareCalls;

use minfer_engine::Tokenizer;
use serde_json::Value;

/// A parsed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// The arguments as JSON text (OpenAI's `arguments` is a string).
    pub arguments: String,
}

/// The call-syntax families minfer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Hermes / Qwen2.5 / Qwen3: `<tool_call>{"name": …, "arguments": …}</tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<tool_call><function=NAME><parameter=P>V</parameter></function></tool_call>`.
    QwenXml,
    /// Llama 3.x: `{"name": …, "parameters": …}`, after `<|python_tag|>` or alone.
    Llama3,
    /// Mistral: `[TOOL_CALLS][{"name": …, "arguments": …}]` or
    /// `[TOOL_CALLS]NAME[ARGS]{…}`.
    Mistral,
    /// A template that takes tools but teaches no markers (Gemma-style
    /// prompts, custom templates): calls are bare JSON objects.
    Json,
}

/// How a model writes a tool call, read from its chat template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Syntax {
    /// The family.
    pub format: Format,
    /// The text that opens a call; empty when calls have no marker.
    pub open: &'static str,
    /// The text that closes a call; empty when a call runs to the end of
    /// the answer.
    pub close: &'static str,
    /// Whether the markers are single special tokens of the vocabulary.
    pub special_tags: bool,
}

impl Syntax {
    /// Hermes' `<tool_call>` tags, as special tokens or as text.
    #[cfg(test)]
    pub fn hermes(special_tags: bool) -> Syntax {
        Syntax {
            format: Format::Hermes,
            open: "<tool_call>",
            close: "</tool_call>",
            special_tags,
        }
    }

    /// The syntax of `format` with its own markers.
    pub fn of_format(format: Format, special_tags: bool) -> Syntax {
        let (open, close) = match format {
            Format::Hermes | Format::QwenXml => ("<tool_call>", "</tool_call>"),
            Format::Llama3 => ("<|python_tag|>", ""),
            Format::Mistral => ("[TOOL_CALLS]", ""),
            Format::Json => ("", ""),
        };
        Syntax {
            format,
            open,
            close,
            special_tags,
        }
    }

    /// The family a template's text teaches; `Json` for a template that
    /// shows none of the known markers.
    pub fn format_of(source: &str) -> Format {
        if source.contains("<tool_call>") {
            if source.contains("<function=") {
                Format::QwenXml
            } else {
                Format::Hermes
            }
        } else if source.contains("[TOOL_CALLS]") {
            Format::Mistral
        } else if source.contains("<|python_tag|>")
            || source.contains("<|start_header_id|>ipython")
            || (source.contains("<|start_header_id|>") && source.contains("\"parameters\""))
        {
            Format::Llama3
        } else {
            Format::Json
        }
    }

    /// The syntax a template teaches, with its markers checked against the
    /// vocabulary.
    pub fn of_template(source: &str, tok: &Tokenizer) -> Syntax {
        let format = Syntax::format_of(source);
        let is_special_token = |text: &str| {
            tok.encode(text, false, true)
                .as_slice()
                .first()
                .is_some_and(|&id| tok.is_special(id) && tok.decode_token(id) == text.as_bytes())
        };
        let probe = Syntax::of_format(format, false);
        let special = !probe.open.is_empty()
            && is_special_token(probe.open)
            && (probe.close.is_empty() || is_special_token(probe.close));
        Syntax::of_format(format, special)
    }

    /// The calls in the text between the markers (or after the opening
    /// marker, for the families whose calls run to the end).
    pub fn parse_body(&self, body: &str, known: &Catalog) -> Option<Vec<Call>> {
        match self.format {
            Format::QwenXml if body.trim_start().starts_with("<function=") => {
                xml::parse(body, known)
            }
            Format::Mistral => json::parse_mistral(body),
            _ => json::parse_any(body, None),
        }
    }
}

/// The functions of a request, as the parsers need them: the names that
/// a call outside the markers must use, and the parameter types that
/// decide how an XML parameter's text is read.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    functions: Vec<(String, Value)>,
}

impl Catalog {
    /// A catalog of `(name, parameters schema)` pairs.
    pub fn new(functions: Vec<(String, Value)>) -> Catalog {
        Catalog { functions }
    }

    /// Whether there are no functions.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// Whether `name` is one of the functions.
    pub fn has(&self, name: &str) -> bool {
        self.functions.iter().any(|(n, _)| n == name)
    }

    /// Whether parameter `param` of `name` is declared a string (then its
    /// XML text is the value itself, never parsed as JSON).
    fn is_string_param(&self, name: &str, param: &str) -> bool {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, schema)| schema.get("properties")?.get(param)?.get("type"))
            .is_some_and(|t| t == "string")
    }
}

/// A message's `tool_calls` as chat templates expect them: `arguments` as
/// an object where the text parses (templates write it with `tojson`).
pub fn template_calls(calls: &Value) -> Value {
    let mut calls = calls.clone();
    if let Some(list) = calls.as_array_mut() {
        for c in list {
            if let Some(f) = c.get_mut("function") {
                if let Some(Value::String(s)) = f.get("arguments") {
                    if let Ok(v) = serde_json::from_str::<Value>(s) {
                        f["arguments"] = v;
                    }
                }
            }
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn families_are_found_from_template_text() {
        for (src, format) in [
            ("{{ '<tool_call>\\n{\"name\": ...}' }}", Format::Hermes),
            (
                "<tool_call>\\n<function=example>\\n<parameter=p>",
                Format::QwenXml,
            ),
            ("{{ '[TOOL_CALLS]' + calls | tojson }}", Format::Mistral),
            ("{{ '<|python_tag|>' + tool_call.name }}", Format::Llama3),
            (
                "<|start_header_id|>user ... {\"name\": function name, \"parameters\": dict}",
                Format::Llama3,
            ),
            (
                "{% if tools %}{{ tools | tojson }}{% endif %}",
                Format::Json,
            ),
        ] {
            assert_eq!(Syntax::format_of(src), format, "{src}");
        }
    }

    #[test]
    fn bodies_parse_per_family() {
        let cat = Catalog::new(vec![(
            "write".into(),
            json!({"properties": {"path": {"type": "string"}, "n": {"type": "integer"}}}),
        )]);
        let h = Syntax::hermes(true);
        let got = h
            .parse_body("\n{\"name\": \"write\", \"arguments\": {\"n\": 1}}\n", &cat)
            .unwrap();
        assert_eq!(got[0].arguments, r#"{"n":1}"#);
        let x = Syntax::of_format(Format::QwenXml, true);
        let got = x
            .parse_body(
                "\n<function=write>\n<parameter=path>\n007\n</parameter>\n<parameter=n>\n7\n</parameter>\n</function>\n",
                &cat,
            )
            .unwrap();
        assert_eq!(
            got,
            vec![Call {
                name: "write".into(),
                arguments: r#"{"path":"007","n":7}"#.into()
            }]
        );
        let m = Syntax::of_format(Format::Mistral, true);
        assert_eq!(
            m.parse_body("[{\"name\": \"write\", \"arguments\": {}}]", &cat)
                .unwrap()[0]
                .name,
            "write"
        );
        let got = m
            .parse_body("write[ARGS]{\"n\": 2}[TOOL_CALLS]write[ARGS]{}", &cat)
            .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].arguments, r#"{"n":2}"#);
        let l = Syntax::of_format(Format::Llama3, true);
        assert_eq!(
            l.parse_body("{\"name\": \"write\", \"parameters\": {\"n\": 3}}", &cat)
                .unwrap()[0]
                .arguments,
            r#"{"n":3}"#
        );
        assert!(h.parse_body("not json", &cat).is_none());
    }

    #[test]
    fn template_calls_take_object_arguments() {
        let c = template_calls(&json!([{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]));
        assert_eq!(c[0]["function"]["arguments"]["a"], 1);
    }
}
