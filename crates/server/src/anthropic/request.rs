//! A Messages request and its translation into an OpenAI chat request:
//! system, turns with text, `tool_use`, `tool_result` and `thinking`
//! blocks, tools, tool choice, sampling.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::openai::request::ChatRequest;
use crate::translate::{self, string_at};

/// `POST /v1/messages` (and `count_tokens`, which needs no `max_tokens`).
#[derive(Debug, Clone, Deserialize)]
pub struct MessagesRequest {
    /// The model (any name unless `--strict-model`).
    #[serde(default)]
    pub model: String,
    /// The system prompt: a string or a list of text blocks.
    #[serde(default)]
    pub system: Option<Value>,
    /// The turns, alternating user and assistant.
    pub messages: Vec<Turn>,
    /// Most tokens to generate; required by `/v1/messages`.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Strings that end the answer.
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    /// Temperature, 0 to 1.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Top-k.
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Stream as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// `{type: auto | any | tool | none, name?, disable_parallel_tool_use?}`.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `{type: enabled | disabled}`: the template's `enable_thinking`.
    #[serde(default)]
    pub thinking: Option<Value>,
    /// `{format: {type: "json_schema", schema}}` constrains the text;
    /// `effort` is accepted and changes nothing here.
    #[serde(default)]
    pub output_config: Option<Value>,
    /// Servers of tools Anthropic would call: left out (logged).
    #[serde(default)]
    pub mcp_servers: Option<Value>,
    /// A code execution container: left out (logged).
    #[serde(default)]
    pub container: Option<Value>,
}

/// One turn of `messages`.
#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// A string or a list of content blocks.
    pub content: Value,
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, message)
}

/// The prefix of the attribution line Claude Code puts first in its
/// system prompt. It changes with every session and release and means
/// nothing to the model; left in, it would make each session's prompt
/// differ from its first token and defeat the prefix cache.
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

/// The text of a string or a list of `text` blocks (the system prompt, a
/// tool result's content).
fn plain_text(v: &Value, at: &str) -> Result<String, ApiError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.iter().enumerate() {
                let at = format!("{at}[{j}]");
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = string_at(b, "text", &at)?;
                        if !text.starts_with(BILLING_HEADER) {
                            parts.push(text);
                        }
                    }
                    Some(other) => return Err(unsupported_block(&at, other)),
                    None => return Err(bad(&format!("{at}.type"), "a block needs a type")),
                }
            }
            Ok(parts.join("\n"))
        }
        _ => Err(bad(
            at,
            format!("{at} must be a string or a list of blocks"),
        )),
    }
}

fn unsupported_block(at: &str, kind: &str) -> ApiError {
    let what = match kind {
        "image" | "document" | "search_result" => "this server reads text only",
        _ => "this server does not know it here",
    };
    ApiError::bad_param(
        &format!("{at}.type"),
        format!("content blocks of type `{kind}` are not supported ({what})"),
    )
    .with_code("unsupported_parameter")
}

/// The OpenAI chat messages of one turn, pushed onto `out`; `names` maps
/// the ids of earlier `tool_use` blocks to their tools.
fn turn(
    i: usize,
    t: &Turn,
    names: &mut HashMap<String, String>,
    out: &mut Vec<Value>,
) -> Result<(), ApiError> {
    let role = match t.role.as_str() {
        r @ ("user" | "assistant") => r,
        // A system entry between the turns (Claude Code sends them under
        // the `mid-conversation-system` beta): the chat path places it
        // where the template allows, or folds it into the system prompt.
        "system" => {
            let text = plain_text(&t.content, &format!("messages[{i}].content"))?;
            if !text.is_empty() {
                out.push(json!({"role": "system", "content": text}));
            }
            return Ok(());
        }
        other => {
            return Err(bad(
                &format!("messages[{i}].role"),
                format!("the role must be `user`, `assistant` or `system`, got `{other}`"),
            ))
        }
    };
    let blocks = match &t.content {
        Value::String(s) => {
            out.push(json!({"role": role, "content": s}));
            return Ok(());
        }
        Value::Array(b) => b,
        _ => {
            return Err(bad(
                &format!("messages[{i}].content"),
                "content must be a string or a list of blocks",
            ))
        }
    };
    let (mut texts, mut calls, mut thinking) = (Vec::new(), Vec::new(), String::new());
    let mut results = 0;
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        let Some(kind) = b.get("type").and_then(Value::as_str) else {
            return Err(bad(&format!("{at}.type"), "a block needs a type"));
        };
        match (role, kind) {
            (_, "text") => texts.push(json!({"type": "text", "text": string_at(b, "text", &at)?})),
            ("assistant", "tool_use") => {
                let id = string_at(b, "id", &at)?;
                let name = string_at(b, "name", &at)?;
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                names.insert(id.clone(), name.clone());
                calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}}));
            }
            ("assistant", "thinking") => thinking.push_str(&string_at(b, "thinking", &at)?),
            // Nothing readable to carry back.
            ("assistant", "redacted_thinking") => {}
            ("user", "tool_result") => {
                // Text before a result stays before it.
                if !texts.is_empty() {
                    out.push(json!({"role": "user", "content": std::mem::take(&mut texts)}));
                }
                let id = string_at(b, "tool_use_id", &at)?;
                let mut content = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(c) => plain_text(c, &format!("{at}.content"))?,
                };
                if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    content = format!("Error: {content}");
                }
                let mut m = json!({"role": "tool", "tool_call_id": id, "content": content});
                if let Some(n) = names.get(&id) {
                    m["name"] = json!(n);
                }
                out.push(m);
                results += 1;
            }
            _ => return Err(unsupported_block(&at, kind)),
        }
    }
    if role == "assistant" {
        let mut m = json!({"role": "assistant", "content": texts});
        if !calls.is_empty() {
            if texts_empty(&m) {
                m["content"] = Value::Null;
            }
            m["tool_calls"] = Value::Array(calls);
        }
        if !thinking.is_empty() {
            m["reasoning_content"] = json!(thinking);
        }
        out.push(m);
    } else if !texts.is_empty() || results == 0 {
        out.push(json!({"role": "user", "content": texts}));
    }
    Ok(())
}

fn texts_empty(m: &Value) -> bool {
    m["content"].as_array().is_some_and(Vec::is_empty)
}

/// `tools` in OpenAI's shape. Anthropic's own tool types (server tools
/// such as web search, which its servers run) are left out: no model here
/// could call them.
fn tools(list: &[Value]) -> Result<Value, ApiError> {
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        if let Some(kind) = t.get("type").and_then(Value::as_str) {
            if kind != "custom" {
                crate::tools::log_left_out(kind);
                continue;
            }
        }
        let name = string_at(t, "name", &format!("tools[{i}]"))?;
        let mut f = json!({"name": name});
        if let Some(d) = t.get("description") {
            f["description"] = d.clone();
        }
        if let Some(s) = t.get("input_schema") {
            f["parameters"] = s.clone();
        }
        out.push(json!({"type": "function", "function": f}));
    }
    Ok(Value::Array(out))
}

/// `tool_choice` in OpenAI's shape, and whether one answer may hold
/// several calls.
fn tool_choice(v: &Value) -> Result<(Value, bool), ApiError> {
    let parallel = v.get("disable_parallel_tool_use").and_then(Value::as_bool) != Some(true);
    let choice = match v.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = string_at(v, "name", "tool_choice")?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => {
            return Err(bad(
                "tool_choice",
                "tool_choice.type must be auto, any, tool or none",
            ))
        }
    };
    Ok((choice, parallel))
}

impl MessagesRequest {
    /// The same request as an OpenAI chat request; `need_max` for
    /// `/v1/messages`, where `max_tokens` is required.
    ///
    /// # Errors
    /// A 400 naming the field at fault.
    pub fn to_chat(&self, need_max: bool) -> Result<ChatRequest, ApiError> {
        // Tools that Anthropic's servers would run: nothing here runs them.
        for (f, v) in [
            ("mcp_servers", &self.mcp_servers),
            ("container", &self.container),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_null()) {
                crate::tools::log_left_out(f);
            }
        }
        let mut msgs = Vec::with_capacity(self.messages.len() + 1);
        if let Some(s) = self.system.as_ref().filter(|s| !s.is_null()) {
            msgs.push(json!({"role": "system", "content": plain_text(s, "system")?}));
        }
        let mut names = HashMap::new();
        for (i, t) in self.messages.iter().enumerate() {
            turn(i, t, &mut names, &mut msgs)?;
        }
        let mut v = json!({"model": self.model, "messages": msgs});
        match self.max_tokens {
            None if need_max => return Err(bad("max_tokens", "max_tokens: Field required")),
            Some(0) => return Err(bad("max_tokens", "max_tokens must be at least 1")),
            m => v["max_completion_tokens"] = json!(m),
        }
        if let Some(t) = self.temperature {
            if !(0.0..=1.0).contains(&t) {
                return Err(bad(
                    "temperature",
                    format!("temperature must be between 0 and 1, got {t}"),
                ));
            }
            v["temperature"] = json!(t);
        }
        v["top_p"] = json!(self.top_p);
        v["top_k"] = json!(self.top_k);
        if let Some(stop) = &self.stop_sequences {
            if stop.len() > 4 {
                return Err(bad(
                    "stop_sequences",
                    format!("at most 4 stop sequences, got {}", stop.len()),
                ));
            }
            v["stop"] = json!(stop);
        }
        if let Some(t) = self.tools.as_ref().filter(|t| !t.is_empty()) {
            v["tools"] = tools(t)?;
        }
        if let Some(c) = self.tool_choice.as_ref().filter(|c| !c.is_null()) {
            let (choice, parallel) = tool_choice(c)?;
            v["tool_choice"] = choice;
            v["parallel_tool_calls"] = json!(parallel);
        }
        if let Some(t) = self.thinking.as_ref().filter(|t| !t.is_null()) {
            let on = match t.get("type").and_then(Value::as_str) {
                Some("enabled" | "adaptive" | "between_tools") => true,
                Some("disabled") => false,
                _ => return Err(bad("thinking", "thinking.type must be enabled or disabled")),
            };
            v["chat_template_kwargs"] = json!({"enable_thinking": on});
        }
        let format = self.output_config.as_ref().and_then(|c| c.get("format"));
        if let Some(f) = format.filter(|f| !f.is_null()) {
            let schema = f.get("schema").filter(|s| s.is_object());
            match (f.get("type").and_then(Value::as_str), schema) {
                (Some("json_schema"), Some(s)) => {
                    v["response_format"] =
                        json!({"type": "json_schema", "json_schema": {"schema": s}})
                }
                _ => {
                    return Err(bad(
                        "output_config.format",
                        "output_config.format must be {\"type\": \"json_schema\", \"schema\": {…}}",
                    ))
                }
            }
        }
        translate::chat_request(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::request::{message_text, Message};

    fn chat(body: Value) -> Result<ChatRequest, ApiError> {
        let r: MessagesRequest = serde_json::from_value(body).unwrap();
        r.to_chat(true)
    }

    fn texts(m: &Message) -> String {
        message_text(m).unwrap()
    }

    #[test]
    fn turns_translate_to_chat_messages() {
        let r = chat(json!({
            "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
            "stop_sequences": ["\n\n"], "temperature": 0, "top_k": 5,
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
            "thinking": {"type": "disabled"},
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": ""},
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "Sunny"}]},
                    {"type": "text", "text": "And so?"}]}
            ]
        }))
        .unwrap();
        let roles: Vec<&str> = r.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(texts(&r.messages[0]), "Be brief.");
        let a = &r.messages[2];
        assert!(a.content.is_none());
        assert_eq!(a.reasoning_content.as_deref(), Some("hm"));
        let call = &a.tool_calls.as_ref().unwrap()[0];
        assert_eq!(call["function"]["arguments"], r#"{"city":"Paris"}"#);
        let t = &r.messages[3];
        assert_eq!(t.tool_call_id.as_deref(), Some("t1"));
        assert_eq!(t.name.as_deref(), Some("get_weather"));
        assert_eq!(texts(t), "Sunny");
        assert_eq!(texts(&r.messages[4]), "And so?");
        assert_eq!(r.tool_choice.unwrap()["function"]["name"], "get_weather");
        assert_eq!(r.parallel_tool_calls, Some(false));
        assert_eq!(r.chat_template_kwargs.unwrap()["enable_thinking"], false);
        let c = r
            .sampling
            .to_config(crate::config::RequestDefaults::max(0))
            .unwrap();
        assert_eq!((c.max_tokens, c.stop.len(), c.sampler.top_k), (9, 1, 5));
    }

    #[test]
    fn bad_requests_name_the_field() {
        let ok = json!({"role": "user", "content": "hi"});
        for (extra, param) in [
            (json!({}), "max_tokens"),
            (json!({"max_tokens": 0}), "max_tokens"),
            (json!({"max_tokens": 5, "temperature": 1.5}), "temperature"),
            (
                json!({"max_tokens": 5, "stop_sequences": ["a", "b", "c", "d", "e"]}),
                "stop_sequences",
            ),
            (
                json!({"max_tokens": 5, "tool_choice": {"type": "sometimes"}}),
                "tool_choice",
            ),
            (
                json!({"max_tokens": 5, "thinking": {"type": "maybe"}}),
                "thinking",
            ),
            (
                json!({"max_tokens": 5, "output_config": {"format": {"type": "json_schema"}}}),
                "output_config.format",
            ),
            (
                json!({"max_tokens": 5, "messages": [{"role": "user", "content": [
                    {"type": "image", "source": {}}]}]}),
                "messages[0].content[0].type",
            ),
            (
                json!({"max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]}),
                "messages[0].role",
            ),
        ] {
            let mut body = json!({"model": "m", "messages": [ok]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let e = chat(body).unwrap_err();
            assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some(param)));
        }
    }

    #[test]
    fn what_claude_code_sends_is_taken() {
        // System entries between the turns, a volatile attribution line
        // first in the system prompt, a server tool, an MCP connector.
        let r = chat(json!({
            "model": "claude-sonnet-4-5", "max_tokens": 32000,
            "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.0.abc; cc_entrypoint=cli;"},
                {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "system", "content": "Remember the plan."},
                {"role": "user", "content": "go on"}],
            "tools": [
                {"name": "Bash", "input_schema": {"type": "object", "propertyNames": {"type": "string"}}},
                {"type": "web_search_20250305", "name": "web_search"}],
            "mcp_servers": [{"type": "url", "url": "http://127.0.0.1:1", "name": "x"}],
            "context_management": {"edits": []}, "metadata": {"user_id": "u"}
        }))
        .unwrap();
        let roles: Vec<&str> = r.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "system", "user"]);
        assert_eq!(texts(&r.messages[0]), "You are Claude Code.");
        assert_eq!(texts(&r.messages[2]), "Remember the plan.");
        let tools = r.tools.unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].function.as_ref().unwrap().name, "Bash");
    }
}
