//! The chat template a server renders with: the model's own or one given
//! with `--chat-template` / `--chat-template-file`, checked at start-up,
//! and what it can do (tools, thinking).

use std::path::PathBuf;

use minfer_engine::{ChatMessage, ChatTemplate, Tokenizer};
use serde_json::json;

use crate::calls::Syntax;

mod named;

/// A chat template named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateChoice {
    /// A built-in template by name (`chatml`, or one of llama.cpp's names
    /// such as `llama3`), or the Jinja text itself.
    Named(String),
    /// A Jinja file.
    File(PathBuf),
}

impl std::fmt::Display for TemplateChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateChoice::Named(n) if n.contains("{%") || n.contains("{{") => {
                f.write_str("--chat-template (inline)")
            }
            TemplateChoice::Named(n) => write!(f, "--chat-template {n}"),
            TemplateChoice::File(p) => write!(f, "--chat-template-file {}", p.display()),
        }
    }
}

/// ChatML, with tools in the Hermes form (`<tool_call>` tags) that the
/// Qwen family uses.
const CHATML: &str = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for m in messages %}
    {%- if m.role == 'system' and loop.first %}
    {%- elif m.role == 'tool' %}
        {{- '<|im_start|>user\n<tool_response>\n' + m.content + '\n</tool_response><|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + m.role + '\n' + (m.content or '') }}
        {%- for tc in m.tool_calls or [] %}
            {%- set f = tc.function if tc.function is defined else tc %}
            {{- '\n<tool_call>\n{"name": "' + f.name + '", "arguments": ' + (f.arguments | tojson) + '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}"#;

/// The built-in templates by name.
pub const BUILTIN: &[(&str, &str)] = &[("chatml", CHATML)];

impl TemplateChoice {
    /// Reads and compiles the template.
    ///
    /// # Errors
    /// A message naming the flag: an unknown name, an unreadable file, a
    /// template that does not compile.
    pub fn load(&self) -> Result<ChatTemplate, String> {
        let source = match self {
            TemplateChoice::Named(n) => match BUILTIN.iter().find(|(name, _)| name == n) {
                Some((_, src)) => (*src).to_string(),
                None if n.contains("{%") || n.contains("{{") => n.clone(),
                None if named::named(n).is_some() => named::named(n).unwrap_or_default(),
                None => {
                    let names: Vec<&str> = BUILTIN
                        .iter()
                        .map(|(n, _)| *n)
                        .chain(named::NAMES.iter().copied())
                        .collect();
                    return Err(format!(
                        "--chat-template {n}: unknown template; built in: {} (or give Jinja text, or --chat-template-file FILE)",
                        names.join(", ")
                    ));
                }
            },
            TemplateChoice::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("--chat-template-file {}: {e}", p.display()))?,
        };
        ChatTemplate::new(&source).map_err(|e| format!("{self}: {e}"))
    }
}

/// Renders a short conversation, so that a template that cannot render
/// one fails at start-up rather than on every request.
///
/// # Errors
/// The template's error.
pub fn check(t: &ChatTemplate) -> Result<(), String> {
    let msgs = [
        ChatMessage::new("system", "You are helpful."),
        ChatMessage::new("user", "Hello"),
        ChatMessage::new("assistant", "Hi!"),
        ChatMessage::new("user", "How are you?"),
    ];
    t.render(&msgs, None, true)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// What a chat template can do, found once at start-up.
#[derive(Debug, Clone, Default)]
pub struct Abilities {
    /// The template renders `tools` (its output changes when given some).
    pub tools: bool,
    /// The tool-call syntax it teaches (a template that takes tools and
    /// shows no known markers gets the generic bare-JSON one).
    pub tool_syntax: Option<Syntax>,
    /// The template knows `<think>` blocks (a reasoning model's).
    pub thinking: bool,
    /// The template writes gpt-oss's harmony messages (`<|channel|>`):
    /// answers carry their reasoning and calls in channels.
    pub harmony: bool,
}

/// `t` with the server's `enable_thinking`, as llama-server passes it: a
/// template that knows thinking (by its `<think>` tags or the variable)
/// is told `reasoning` (`--reasoning`), on unless off, since some close
/// their block when the variable is not true; other templates are left
/// alone unless `reasoning` says. A request's own variable overrides it.
pub fn with_thinking(t: ChatTemplate, ab: &Abilities, reasoning: Option<bool>) -> ChatTemplate {
    let knows = ab.thinking || t.source().contains("enable_thinking");
    match reasoning.or(knows.then_some(true)) {
        Some(on) => t.with_var("enable_thinking", &serde_json::Value::Bool(on)),
        None => t,
    }
}

/// What `t` can do: whether it renders tools (its output changes when
/// given one), which call syntax it teaches, whether it knows thinking.
pub fn abilities(t: &ChatTemplate, tok: &Tokenizer) -> Abilities {
    let msgs = [ChatMessage::new("user", "What is the weather?")];
    let tool = json!([{"type": "function", "function": {"name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let plain = t.render(&msgs, None, true);
    let with = t.render(&msgs, Some(&tool), true);
    let tools = matches!((&plain, &with), (Ok(a), Ok(b)) if a != b);
    Abilities {
        tools,
        tool_syntax: tools.then(|| Syntax::of_template(t.source(), tok)),
        thinking: t.source().contains("<think>"),
        harmony: t.source().contains("<|channel|>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A question, the model's call of `get_weather` and its result.
    fn weather_call() -> serde_json::Value {
        json!([
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "sunny", "tool_call_id": "c"}
        ])
    }

    #[test]
    fn builtin_chatml_renders_tools_and_calls() {
        let t = TemplateChoice::Named("chatml".into()).load().unwrap();
        check(&t).unwrap();
        let msgs = weather_call();
        let tools = json!([{"type": "function", "function": {"name": "get_weather"}}]);
        let out = t.render_json(&msgs, Some(&tools), true).unwrap();
        assert!(out.contains("<tools>\n{\"type\": \"function\""), "{out}");
        assert!(
            out.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            "{out}"
        );
        assert!(
            out.contains("<tool_response>\nsunny\n</tool_response>"),
            "{out}"
        );
        assert!(out.ends_with("<|im_start|>assistant\n"), "{out}");
    }

    /// gpt-oss's template (llama.cpp's copy of OpenAI's): tools as a
    /// TypeScript namespace, an earlier call as a message to
    /// `functions.NAME`, its result from the tool, and the generation
    /// prompt that the harmony reader starts from.
    #[test]
    fn gpt_oss_template_renders_harmony() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/templates/openai-gpt-oss-120b.jinja"
        );
        let t = TemplateChoice::File(path.into()).load().unwrap();
        check(&t).unwrap();
        assert!(t.source().contains("<|channel|>"));
        let msgs = weather_call();
        let tools = json!([{"type": "function", "function": {"name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let out = t.render_json(&msgs, Some(&tools), true).unwrap();
        assert!(out.contains("namespace functions {"), "{out}");
        assert!(out.contains("type get_weather = "), "{out}");
        let call = "<|start|>assistant to=functions.get_weather<|channel|>commentary json\
                    <|message|>{\"city\": \"Paris\"}<|call|>";
        assert!(out.contains(call), "{out}");
        let result = "<|start|>functions.get_weather to=assistant<|channel|>commentary\
                      <|message|>\"sunny\"<|end|>";
        assert!(out.contains(result), "{out}");
        assert!(out.ends_with("<|start|>assistant"), "{out}");
    }

    #[test]
    fn unknown_names_and_broken_files_are_clear_errors() {
        let e = TemplateChoice::Named("alpaca".into()).load().unwrap_err();
        assert!(
            e.contains("unknown template") && e.contains("chatml") && e.contains("llama3"),
            "{e}"
        );
        assert!(TemplateChoice::Named("vicuna".into()).load().is_ok());
        let e = TemplateChoice::File("/nonexistent/t.jinja".into())
            .load()
            .unwrap_err();
        assert!(
            e.contains("--chat-template-file /nonexistent/t.jinja"),
            "{e}"
        );
        let e = TemplateChoice::Named("{% for %}".into())
            .load()
            .unwrap_err();
        assert!(e.contains("inline"), "{e}");
    }
}
