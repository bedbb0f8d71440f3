//! What the call parsers and the answer splitter share: a parsed call, the
//! syntax families and how a template's is found, the request's functions,
//! and the pieces an answer is split into.

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
    /// gpt-oss's harmony: a call is a `commentary` message to
    /// `functions.NAME` whose body is the JSON arguments, ended by
    /// `<|call|>`. Read by the answer splitter's harmony reader.
    Harmony,
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
            Format::Harmony => ("<|channel|>", "<|call|>"),
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
        if source.contains("<|channel|>") {
            Format::Harmony
        } else if source.contains("<tool_call>") {
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
    pub(super) fn is_string_param(&self, name: &str, param: &str) -> bool {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, schema)| schema.get("properties")?.get(param)?.get("type"))
            .is_some_and(|t| t == "string")
    }
}

/// One decided piece of the answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Answer text.
    Content(String),
    /// Thinking text.
    Reasoning(String),
    /// A complete tool call.
    Call(Call),
}
