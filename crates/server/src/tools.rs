//! Tool calling: the request's `tools` and `tool_choice`, and the grammar
//! that makes a model's tool calls always parse in its family's syntax
//! (see [`calls`](crate::calls) for the syntaxes and their parsers).

use minfer_engine::{Constraint, Trigger};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::calls::{Catalog, Format, Syntax};
use crate::http::ApiError;

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
    /// Tools of other types (the hosted tools of OpenAI's API: web or file
    /// search, a code interpreter, …) are for a server that runs them; they
    /// are left out of the prompt, as the model could not call them here,
    /// and said so once in the log.
    ///
    /// # Errors
    /// A 400 naming `tools[i]…`.
    pub fn parse(tools: &[Tool]) -> Result<Tools, ApiError> {
        let mut functions: Vec<Function> = Vec::with_capacity(tools.len());
        let mut json = Vec::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            let at = |f: &str| format!("tools[{i}]{f}");
            if t.kind != "function" {
                log_left_out(&t.kind);
                continue;
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

    /// The functions as the call parsers need them.
    pub fn catalog(&self) -> Catalog {
        Catalog::new(
            self.functions
                .iter()
                .map(|f| {
                    let schema = f.parameters.clone().unwrap_or(Value::Null);
                    (f.name.clone(), schema)
                })
                .collect(),
        )
    }
}

/// Says once per process and tool type that tools of `kind` are left out.
pub fn log_left_out(kind: &str) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen
        .get_or_insert_with(HashSet::new)
        .insert(kind.to_string())
    {
        eprintln!(
            "minfer serve: tools of type `{kind}` run on the provider's side; they are left out of the prompt (said once)"
        );
    }
}

/// The schema of one call: `{"name": <name>, <key>: <parameters>}`, with
/// `key` the family's name for the arguments.
fn call_schema(f: &Function, key: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"const": f.name}, key: arguments(f)},
        "required": ["name", key],
        "additionalProperties": false,
    })
}

/// A Lark string literal of `text`.
fn lit(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The arguments schema of `f` (any object when it gives none).
fn arguments(f: &Function) -> Value {
    f.parameters
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}))
}

/// `schema` laid out on one line with a space after `,` and `:`, as the
/// templates show calls.
fn one_line(mut schema: Value) -> Value {
    schema["x-guidance"] =
        json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "});
    schema
}

/// The grammar of a harmony answer that must call one of `allowed`: an
/// optional `analysis` message (the model's reasoning, free text), then a
/// `commentary` message to `functions.NAME` with JSON arguments, ended by
/// `<|call|>`, the header as gpt-oss writes it. A harmony answer holds
/// one call: `<|call|>` ends the generation. With a token budget
/// (`budget` > 0) the reasoning gets at most half of it, so that the call
/// the request demands still fits.
fn harmony_calls(allowed: &[&Function], special: bool, budget: usize) -> Constraint {
    let m = |t: &str| if special { t.to_string() } else { lit(t) };
    let cap = match budget / 2 {
        0 => String::new(),
        n => format!("[max_tokens={n}]"),
    };
    let mut lark = format!(
        "start: analysis? call\n\
         analysis: {ch} \"analysis\" {msg} note {end} {start} \"assistant\"\n\
         note{cap}: /([^<]|<[^|])*/\n\
         call: {ch} \"commentary to=functions.\" (",
        ch = m("<|channel|>"),
        msg = m("<|message|>"),
        end = m("<|end|>"),
        start = m("<|start|>"),
    );
    let names: Vec<String> = (0..allowed.len()).map(|i| format!("f{i}")).collect();
    lark.push_str(&names.join(" | "));
    lark.push_str(")\n");
    for (i, f) in allowed.iter().enumerate() {
        lark.push_str(&format!(
            "f{i}: {} {} \"json\" {} a{i} {}\na{i}: %json {}\n",
            lit(&format!("{} ", f.name)),
            m("<|constrain|>"),
            m("<|message|>"),
            m("<|call|>"),
            one_line(arguments(f)),
        ));
    }
    Constraint::Lark(lark)
}

/// The grammar of the calls `choice` allows, and the trigger that makes it
/// lazy (`auto`: free text until the opening marker); `None` for no
/// grammar. The families whose calls have no opening marker (Llama 3's
/// and the generic bare JSON), and Qwen3-Coder's XML, are constrained only
/// when a call is required: under `auto` their calls are parsed from the
/// free text.
///
/// `budget` is the request's token budget (0: none).
///
/// # Errors
/// A 400 naming `tool_choice` for a function that is not in `tools`.
pub fn constraint(
    tools: &Tools,
    choice: &Choice,
    parallel: bool,
    syntax: &Syntax,
    budget: usize,
) -> Result<Option<(Constraint, Option<Trigger>)>, ApiError> {
    let key = if syntax.format == Format::Llama3 {
        "parameters"
    } else {
        "arguments"
    };
    let allowed: Vec<&Function> = match choice {
        Choice::None => return Ok(None),
        Choice::Named(name) => {
            let f = tools.get(name).ok_or_else(|| {
                ApiError::bad_param(
                    "tool_choice",
                    format!("tool_choice names `{name}`, which is not in `tools`"),
                )
            })?;
            vec![f]
        }
        Choice::Auto | Choice::Required => tools.functions.iter().collect(),
    };
    let lazy = *choice == Choice::Auto;
    if lazy
        && matches!(
            syntax.format,
            Format::Llama3 | Format::Json | Format::QwenXml | Format::Harmony
        )
    {
        return Ok(None);
    }
    if syntax.format == Format::Harmony {
        return Ok(Some((
            harmony_calls(&allowed, syntax.special_tags, budget),
            None,
        )));
    }
    let schemas: Vec<Value> = allowed.iter().map(|f| call_schema(f, key)).collect();
    let mut schema = if schemas.len() == 1 {
        schemas.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({"anyOf": schemas})
    };
    let several = parallel && !matches!(choice, Choice::Named(_));
    if syntax.format == Format::Mistral {
        // One marker, then the list of calls.
        schema = json!({"type": "array", "items": schema, "minItems": 1});
        if !several {
            schema["maxItems"] = json!(1);
        }
    }
    let schema = one_line(schema);
    let repeat = if several && syntax.format != Format::Mistral {
        "(\"\\n\" call)*"
    } else {
        ""
    };
    let marker = |m: &str| {
        if syntax.special_tags {
            m.to_string()
        } else {
            lit(m)
        }
    };
    let call = match syntax.format {
        Format::Hermes | Format::QwenXml => format!(
            "{} \"\\n\" args \"\\n\" {}",
            marker(syntax.open),
            marker(syntax.close)
        ),
        Format::Mistral => format!("{} args", marker(syntax.open)),
        // Harmony has its own grammar above.
        Format::Llama3 | Format::Json | Format::Harmony => "args".to_string(),
    };
    let lark = format!("start: call {repeat}\ncall: {call}\nargs: %json {schema}\n");
    let trigger = lazy.then(|| Trigger {
        text: syntax.open.to_string(),
        include: true,
    });
    Ok(Some((Constraint::Lark(lark), trigger)))
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
        let syntax = Syntax::hermes(true);
        let t = tools();
        assert!(constraint(&t, &Choice::None, true, &syntax, 0)
            .unwrap()
            .is_none());
        let (c, trig) = constraint(&t, &Choice::Auto, true, &syntax, 0)
            .unwrap()
            .unwrap();
        assert_eq!(trig.unwrap().text, "<tool_call>");
        let Constraint::Lark(g) = c else { panic!() };
        assert!(g.contains("anyOf") && g.contains("(\"\\n\" call)*"), "{g}");
        let (c, trig) = constraint(&t, &Choice::Named("now".into()), true, &syntax, 0)
            .unwrap()
            .unwrap();
        assert!(trig.is_none());
        let Constraint::Lark(g) = c else { panic!() };
        assert!(!g.contains("anyOf") && !g.contains("call)*"), "{g}");
        assert!(constraint(&t, &Choice::Named("nope".into()), true, &syntax, 0).is_err());
    }

    #[test]
    fn hosted_tools_are_left_out() {
        let t: Vec<Tool> = serde_json::from_value(json!([
            {"type": "web_search"},
            {"type": "function", "function": {"name": "now"}},
            {"type": "code_interpreter", "container": {"type": "auto"}}
        ]))
        .unwrap();
        let t = Tools::parse(&t).unwrap();
        assert_eq!(t.functions.len(), 1);
        assert_eq!(t.json.as_array().unwrap().len(), 1);
        assert!(t.catalog().has("now"));
    }

    #[test]
    fn grammars_follow_the_family() {
        let t = tools();
        let lark = |format: Format, choice: Choice| {
            constraint(&t, &choice, true, &Syntax::of_format(format, true), 0)
                .unwrap()
                .map(|(c, trig)| {
                    let Constraint::Lark(g) = c else { panic!() };
                    (g, trig.map(|t| t.text))
                })
        };
        for f in [
            Format::Llama3,
            Format::Json,
            Format::QwenXml,
            Format::Harmony,
        ] {
            assert!(lark(f, Choice::Auto).is_none(), "{f:?}");
        }
        let (g, trig) = lark(Format::Mistral, Choice::Auto).unwrap();
        assert_eq!(trig.as_deref(), Some("[TOOL_CALLS]"));
        assert!(
            g.contains("call: [TOOL_CALLS] args") && g.contains("\"minItems\":1"),
            "{g}"
        );
        let (g, trig) = lark(Format::Llama3, Choice::Required).unwrap();
        assert!(trig.is_none());
        assert!(
            g.contains("\"parameters\"") && g.contains("call: args"),
            "{g}"
        );
        let (g, _) = lark(Format::QwenXml, Choice::Named("now".into())).unwrap();
        assert!(g.contains("call: <tool_call>"), "{g}");
        let (g, trig) = lark(Format::Harmony, Choice::Required).unwrap();
        assert!(trig.is_none());
        assert!(
            g.contains("start: analysis? call\n")
                && g.contains("call: <|channel|> \"commentary to=functions.\" (f0 | f1)\n")
                && g.contains("f1: \"now \" <|constrain|> \"json\" <|message|> a1 <|call|>\n"),
            "{g}"
        );
        let (g, _) = lark(Format::Harmony, Choice::Named("now".into())).unwrap();
        assert!(g.contains("(f0)\n") && g.contains("f0: \"now \""), "{g}");
        // Markers that are not special tokens are text.
        let text = Syntax::of_format(Format::Harmony, false);
        let Some((Constraint::Lark(g), _)) =
            constraint(&t, &Choice::Required, true, &text, 300).unwrap()
        else {
            panic!()
        };
        assert!(g.contains("call: \"<|channel|>\" \"commentary"), "{g}");
        assert!(g.contains("note[max_tokens=150]: "), "{g}");
    }
}
