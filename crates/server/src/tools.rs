//! Tool calling: the request's `tools` and `tool_choice`, the grammar that
//! makes a model's tool calls always parse, and the model's tool-call
//! syntax (`<tool_call>{"name": …, "arguments": …}</tool_call>`, as the
//! Qwen and Hermes templates teach it).

use minfer_engine::{Constraint, Tokenizer, Trigger};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

/// One entry of `tools`.
#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    /// Only `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: Option<Function>,
}

/// A function the model may call.
#[derive(Debug, Clone, Deserialize)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON schema of its arguments (an object schema).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// What `tool_choice` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// No tool call; the tools are not even shown to the model.
    None,
    /// The model decides; a call, once started, is constrained.
    Auto,
    /// At least one call, constrained from the first token.
    Required,
    /// A call of this function, constrained from the first token.
    Named(String),
}

impl Choice {
    /// Parses `tool_choice`: `"none"`, `"auto"`, `"required"` or
    /// `{"type": "function", "function": {"name": …}}`.
    ///
    /// # Errors
    /// A 400 naming `tool_choice`.
    pub fn parse(v: Option<&Value>, have_tools: bool) -> Result<Choice, ApiError> {
        let bad = |m: String| ApiError::bad_param("tool_choice", m);
        let choice = match v {
            None | Some(Value::Null) => {
                if have_tools {
                    Choice::Auto
                } else {
                    Choice::None
                }
            }
            Some(Value::String(s)) => match s.as_str() {
                "none" => Choice::None,
                "auto" => Choice::Auto,
                "required" => Choice::Required,
                other => return Err(bad(format!("unknown tool_choice `{other}`"))),
            },
            Some(Value::Object(o)) => {
                let name = o
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("tool_choice needs function.name".into()))?;
                Choice::Named(name.to_string())
            }
            Some(_) => return Err(bad("tool_choice must be a string or an object".into())),
        };
        if choice != Choice::None && !have_tools {
            return Err(bad("tool_choice needs `tools`".into()));
        }
        Ok(choice)
    }
}

/// The checked `tools` of a request.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The functions, in request order.
    pub functions: Vec<Function>,
    /// `tools` as the chat template receives it.
    pub json: Value,
}

impl Tools {
    /// Checks `tools`: each a `function` with a name and an object schema.
    ///
    /// # Errors
    /// A 400 naming `tools[i]…`.
    pub fn parse(tools: &[Tool]) -> Result<Tools, ApiError> {
        let mut functions: Vec<Function> = Vec::with_capacity(tools.len());
        let mut json = Vec::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            let at = |f: &str| format!("tools[{i}]{f}");
            if t.kind != "function" {
                return Err(ApiError::bad_param(
                    &at(".type"),
                    format!(
                        "tools of type `{}` are not supported; only `function`",
                        t.kind
                    ),
                ));
            }
            let f = t.function.clone().ok_or_else(|| {
                ApiError::bad_param(&at(".function"), format!("{} is missing", at(".function")))
            })?;
            let ok_name = !f.name.is_empty()
                && f.name.len() <= 64
                && f.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
            if !ok_name {
                return Err(ApiError::bad_param(
                    &at(".function.name"),
                    format!(
                        "function names are 1 to 64 letters, digits, `_`, `-` or `.`; got `{}`",
                        f.name
                    ),
                ));
            }
            if functions.iter().any(|g| g.name == f.name) {
                return Err(ApiError::bad_param(
                    &at(".function.name"),
                    format!("two tools are named `{}`", f.name),
                ));
            }
            if let Some(p) = &f.parameters {
                if !p.is_object() {
                    return Err(ApiError::bad_param(
                        &at(".function.parameters"),
                        "parameters must be a JSON schema object",
                    ));
                }
            }
            let mut entry = json!({"name": f.name});
            if let Some(d) = &f.description {
                entry["description"] = json!(d);
            }
            entry["parameters"] = f
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            json.push(json!({"type": "function", "function": entry}));
            functions.push(f);
        }
        Ok(Tools {
            functions,
            json: Value::Array(json),
        })
    }

    fn get(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// How a model writes a tool call, read from its chat template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Syntax {
    /// The opening tag.
    pub open: &'static str,
    /// The closing tag.
    pub close: &'static str,
    /// Whether the tags are single special tokens of the vocabulary.
    pub special_tags: bool,
}

impl Syntax {
    /// The syntax a template teaches, if minfer knows it.
    pub fn of_template(source: &str, tok: &Tokenizer) -> Option<Syntax> {
        if !source.contains("<tool_call>") {
            return None;
        }
        let is_special_token = |text: &str| {
            tok.encode(text, false, true)
                .as_slice()
                .first()
                .is_some_and(|&id| tok.is_special(id) && tok.decode_token(id) == text.as_bytes())
        };
        Some(Syntax {
            open: "<tool_call>",
            close: "</tool_call>",
            special_tags: is_special_token("<tool_call>") && is_special_token("</tool_call>"),
        })
    }

    fn tag(&self, tag: &str) -> String {
        if self.special_tags {
            tag.to_string()
        } else {
            serde_json::to_string(tag).unwrap_or_default()
        }
    }
}

/// The schema of one call: `{"name": <name>, "arguments": <parameters>}`.
fn call_schema(f: &Function) -> Value {
    let params = f
        .parameters
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}));
    json!({
        "type": "object",
        "properties": {"name": {"const": f.name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
}

/// The grammar of the calls `choice` allows, and the trigger that makes it
/// lazy (`auto`: free text until the opening tag); `None` for no grammar.
///
/// # Errors
/// A 400 naming `tool_choice` for a function that is not in `tools`.
pub fn constraint(
    tools: &Tools,
    choice: &Choice,
    parallel: bool,
    syntax: &Syntax,
) -> Result<Option<(Constraint, Option<Trigger>)>, ApiError> {
    let schemas: Vec<Value> = match choice {
        Choice::None => return Ok(None),
        Choice::Named(name) => {
            let f = tools.get(name).ok_or_else(|| {
                ApiError::bad_param(
                    "tool_choice",
                    format!("tool_choice names `{name}`, which is not in `tools`"),
                )
            })?;
            vec![call_schema(f)]
        }
        Choice::Auto | Choice::Required => tools.functions.iter().map(call_schema).collect(),
    };
    let mut schema = if schemas.len() == 1 {
        schemas.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({"anyOf": schemas})
    };
    // One line, a space after `,` and `:`, as the templates show calls.
    schema["x-guidance"] =
        json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "});
    let open = syntax.tag(syntax.open);
    let close = syntax.tag(syntax.close);
    let repeat = if parallel && !matches!(choice, Choice::Named(_)) {
        "(\"\\n\" call)*"
    } else {
        ""
    };
    let lark = format!(
        "start: call {repeat}\ncall: {open} \"\\n\" args \"\\n\" {close}\nargs: %json {schema}\n"
    );
    let trigger = (*choice == Choice::Auto).then(|| Trigger {
        text: syntax.open.to_string(),
        include: true,
    });
    Ok(Some((Constraint::Lark(lark), trigger)))
}

/// A parsed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// The arguments as JSON text (OpenAI's `arguments` is a string).
    pub arguments: String,
}

/// Parses the text between the tags: `{"name": …, "arguments": {…}}`.
pub fn parse_call(body: &str) -> Option<Call> {
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    let name = v.get("name")?.as_str()?.to_string();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(a) => a.to_string(),
    };
    Some(Call { name, arguments })
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

    fn tools() -> Tools {
        let t: Vec<Tool> = serde_json::from_value(json!([
            {"type": "function", "function": {"name": "get_weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}},
            {"type": "function", "function": {"name": "now"}}
        ]))
        .unwrap();
        Tools::parse(&t).unwrap()
    }

    #[test]
    fn tool_choice_forms() {
        assert_eq!(Choice::parse(None, true).unwrap(), Choice::Auto);
        assert_eq!(Choice::parse(None, false).unwrap(), Choice::None);
        assert_eq!(
            Choice::parse(Some(&json!("required")), true).unwrap(),
            Choice::Required
        );
        assert_eq!(
            Choice::parse(
                Some(&json!({"type": "function", "function": {"name": "now"}})),
                true
            )
            .unwrap(),
            Choice::Named("now".into())
        );
        for bad in [json!("sometimes"), json!(3), json!({"type": "function"})] {
            let e = Choice::parse(Some(&bad), true).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("tool_choice"));
        }
        assert!(Choice::parse(Some(&json!("required")), false).is_err());
    }

    #[test]
    fn bad_tools_are_refused_by_path() {
        for (t, param) in [
            (json!([{"type": "retrieval"}]), "tools[0].type"),
            (json!([{"type": "function"}]), "tools[0].function"),
            (
                json!([{"type": "function", "function": {"name": "a b"}}]),
                "tools[0].function.name",
            ),
            (
                json!([{"type": "function", "function": {"name": "a"}},
                       {"type": "function", "function": {"name": "a"}}]),
                "tools[1].function.name",
            ),
            (
                json!([{"type": "function", "function": {"name": "a", "parameters": 3}}]),
                "tools[0].function.parameters",
            ),
        ] {
            let t: Vec<Tool> = serde_json::from_value(t).unwrap();
            let e = Tools::parse(&t).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param));
        }
    }

    #[test]
    fn grammar_per_choice() {
        let syntax = Syntax {
            open: "<tool_call>",
            close: "</tool_call>",
            special_tags: true,
        };
        let t = tools();
        assert!(constraint(&t, &Choice::None, true, &syntax)
            .unwrap()
            .is_none());
        let (c, trig) = constraint(&t, &Choice::Auto, true, &syntax)
            .unwrap()
            .unwrap();
        assert_eq!(trig.unwrap().text, "<tool_call>");
        let Constraint::Lark(g) = c else { panic!() };
        assert!(g.contains("anyOf") && g.contains("(\"\\n\" call)*"), "{g}");
        let (c, trig) = constraint(&t, &Choice::Named("now".into()), true, &syntax)
            .unwrap()
            .unwrap();
        assert!(trig.is_none());
        let Constraint::Lark(g) = c else { panic!() };
        assert!(!g.contains("anyOf") && !g.contains("call)*"), "{g}");
        assert!(constraint(&t, &Choice::Named("nope".into()), true, &syntax).is_err());
    }

    #[test]
    fn calls_parse_with_object_or_string_arguments() {
        assert_eq!(
            parse_call(r#" {"name": "f", "arguments": {"a": 1}} "#),
            Some(Call {
                name: "f".into(),
                arguments: r#"{"a":1}"#.into()
            })
        );
        assert_eq!(
            parse_call(r#"{"name": "f", "arguments": "{\"a\": 1}"}"#)
                .unwrap()
                .arguments,
            r#"{"a": 1}"#
        );
        assert_eq!(parse_call(r#"{"name": "f"}"#).unwrap().arguments, "{}");
        assert_eq!(parse_call("not json"), None);
        let c = template_calls(&json!([{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]));
        assert_eq!(c[0]["function"]["arguments"]["a"], 1);
    }
}
