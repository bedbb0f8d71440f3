//! A Responses request and its translation into an OpenAI chat request:
//! `input` items and `instructions` become chat messages, the function
//! tools (namespaces flattened) and `text.format` the chat request's tools
//! and `response_format`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::ApiError;
use crate::openai::request::ChatRequest;
use crate::translate::{self, string_at};

/// `POST /v1/responses`.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponsesRequest {
    /// The model (any name unless `--strict-model`).
    #[serde(default)]
    pub model: String,
    /// A user message, or a list of input items.
    pub input: Value,
    /// The system prompt.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Most tokens to generate.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Temperature, 0 to 2.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Function tools: `{type: "function", name, description, parameters}`.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// `none`, `auto`, `required` or `{type: "function", name}`.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Whether one answer may hold several calls (default true).
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// Stream as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// `{format: {type: text | json_object | json_schema, …}}`.
    #[serde(default)]
    pub text: Option<Value>,
    /// `{effort, summary}`: an effort turns the template's thinking on
    /// (`none` off).
    #[serde(default)]
    pub reasoning: Option<Value>,
    /// Request metadata, echoed back.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Timings with every streamed text delta (llama-server's).
    #[serde(default)]
    pub timings_per_token: bool,
    /// `response.in_progress` events with the prompt's progress while a
    /// streamed prompt is evaluated (llama-server's).
    #[serde(default)]
    pub return_progress: bool,
    /// Stateful and server-side features, refused by name.
    #[serde(flatten)]
    pub refused: Refused,
}

/// Fields that need state or work this server does not keep or do.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Refused {
    /// Storing the response (nothing is stored).
    pub store: Option<bool>,
    /// Continuing a stored response.
    pub previous_response_id: Option<String>,
    /// A stored conversation.
    pub conversation: Option<Value>,
    /// Running in the background.
    pub background: Option<bool>,
    /// A stored prompt template.
    pub prompt: Option<Value>,
    // `include` (extra data beside the answer: encrypted reasoning, hosted
    // tools' results) is accepted by being ignored: none is made here, and
    // the answer is the same without it.
}

impl Refused {
    fn check(&self) -> Result<(), ApiError> {
        let stateless = "this server is stateless and stores nothing";
        if self.store == Some(true) {
            return Err(ApiError::unsupported("store", stateless));
        }
        if self.previous_response_id.is_some() {
            return Err(ApiError::unsupported("previous_response_id", stateless));
        }
        if self.conversation.as_ref().is_some_and(|c| !c.is_null()) {
            return Err(ApiError::unsupported("conversation", stateless));
        }
        if self.background == Some(true) {
            return Err(ApiError::unsupported("background", stateless));
        }
        if self.prompt.as_ref().is_some_and(|p| !p.is_null()) {
            return Err(ApiError::unsupported("prompt", "no stored prompts"));
        }
        Ok(())
    }
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, message)
}

/// The text of a message's content or a call's output: a string or a list
/// of text parts.
fn content_text(v: &Value, at: &str) -> Result<String, ApiError> {
    let parts = match v {
        Value::String(s) => return Ok(s.clone()),
        Value::Array(p) => p,
        _ => return Err(bad(at, format!("{at} must be a string or a list of parts"))),
    };
    let mut s = String::new();
    for (j, p) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        match p.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => s.push_str(&string_at(p, "text", &at)?),
            Some("refusal") => s.push_str(&string_at(p, "refusal", &at)?),
            Some(other) => {
                return Err(ApiError::unsupported(
                    &format!("{at}.type"),
                    &format!("content parts of type `{other}`; this server reads text only"),
                ))
            }
            None => return Err(bad(&format!("{at}.type"), "a content part needs a type")),
        }
    }
    Ok(s)
}

/// Input items that record hosted tools' work (searches, code runs, MCP
/// listings): left out of the prompt, as the tools themselves are.
const HOSTED_ITEMS: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "computer_call",
    "computer_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_list_tools",
    "mcp_call",
    "mcp_approval_request",
    "mcp_approval_response",
    "tool_search_call",
    "tool_search_output",
];

/// The chat messages of `input` (after `instructions`).
fn messages(req: &ResponsesRequest) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    if let Some(s) = &req.instructions {
        out.push(json!({"role": "system", "content": s}));
    }
    let items = match &req.input {
        Value::String(s) => {
            out.push(json!({"role": "user", "content": s}));
            return Ok(out);
        }
        Value::Array(items) => items,
        _ => return Err(bad("input", "input must be a string or a list of items")),
    };
    // A reasoning item's text goes with the assistant turn that follows.
    let mut reasoning: Option<String> = None;
    let mut names = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = match item.get("type").and_then(Value::as_str) {
            Some(k) => k,
            None if item.get("role").is_some() => "message",
            None => return Err(bad(&format!("{at}.type"), "an input item needs a type")),
        };
        match kind {
            "message" => {
                let role = string_at(item, "role", &at)?;
                if !matches!(role.as_str(), "user" | "assistant" | "system" | "developer") {
                    return Err(bad(
                        &format!("{at}.role"),
                        format!("unknown message role `{role}`"),
                    ));
                }
                let content = item.get("content").unwrap_or(&Value::Null);
                let text = content_text(content, &format!("{at}.content"))?;
                let mut m = json!({"role": role, "content": text});
                if role == "assistant" {
                    if let Some(r) = reasoning.take() {
                        m["reasoning_content"] = json!(r);
                    }
                }
                out.push(m);
            }
            "function_call" => {
                let id = string_at(item, "call_id", &at)?;
                let mut name = string_at(item, "name", &at)?;
                if let Some(ns) = item.get("namespace").and_then(Value::as_str) {
                    name = flat_name(ns, &name);
                }
                let args = string_at(item, "arguments", &at)?;
                names.insert(id.clone(), name.clone());
                let call = json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": args}});
                // Calls after an assistant message belong to that turn.
                let last = out.last_mut().filter(|m| m["role"] == "assistant");
                match last {
                    Some(m) if m["tool_calls"].is_array() => {
                        if let Some(list) = m["tool_calls"].as_array_mut() {
                            list.push(call);
                        }
                    }
                    Some(m) => m["tool_calls"] = json!([call]),
                    None => {
                        let mut m =
                            json!({"role": "assistant", "content": null, "tool_calls": [call]});
                        if let Some(r) = reasoning.take() {
                            m["reasoning_content"] = json!(r);
                        }
                        out.push(m);
                    }
                }
            }
            "function_call_output" => {
                let id = string_at(item, "call_id", &at)?;
                let output = item.get("output").unwrap_or(&Value::Null);
                let content = content_text(output, &format!("{at}.output"))?;
                let mut m = json!({"role": "tool", "tool_call_id": id, "content": content});
                if let Some(n) = names.get(&id) {
                    m["name"] = json!(n);
                }
                out.push(m);
            }
            "reasoning" => {
                let texts = ["content", "summary"].into_iter().find_map(|f| {
                    let list = item.get(f)?.as_array().filter(|l| !l.is_empty())?;
                    Some(
                        list.iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<String>(),
                    )
                });
                reasoning = texts;
            }
            // Calls of hosted tools, run by the provider: their results
            // were never the model's to read here.
            other if HOSTED_ITEMS.contains(&other) => crate::tools::log_left_out(other),
            other => {
                return Err(ApiError::unsupported(
                    &format!("{at}.type"),
                    &format!("input items of type `{other}`"),
                ))
            }
        }
    }
    Ok(out)
}

/// One function of a `namespace` tool: the name the model sees (the
/// namespace and the function's name joined) and the two the client
/// expects back in the call item.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scoped {
    pub(super) flat: String,
    pub(super) namespace: String,
    pub(super) name: String,
}

/// The name the model sees for function `name` of `namespace`: the two
/// joined (MCP namespaces end in `__`, some functions start with `_`, and
/// then nothing more is needed between them).
fn flat_name(namespace: &str, name: &str) -> String {
    if namespace.ends_with('_') || name.starts_with('_') {
        format!("{namespace}{name}")
    } else {
        format!("{namespace}__{name}")
    }
}

/// The functions of one `namespace` tool: its name, each function's name
/// and the function itself.
fn members(t: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    let ns = t.get("name").and_then(Value::as_str).unwrap_or_default();
    let list = t.get("tools").and_then(Value::as_array);
    list.into_iter().flatten().map(move |f| {
        let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
        (ns, name, f)
    })
}

/// The functions of the `namespace` tools in `list`.
pub(super) fn scoped(list: &[Value]) -> Vec<Scoped> {
    list.iter()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("namespace"))
        .flat_map(members)
        .map(|(ns, name, _)| Scoped {
            flat: flat_name(ns, name),
            namespace: ns.to_string(),
            name: name.to_string(),
        })
        .collect()
}

/// One function tool in the chat shape, named `name`.
fn chat_function(t: &Value, name: &Value) -> Value {
    let mut f = json!({"name": name});
    for k in ["description", "parameters"] {
        if let Some(v) = t.get(k).filter(|v| !v.is_null()) {
            f[k] = v.clone();
        }
    }
    json!({"type": "function", "function": f})
}

/// Function tools in the chat shape, the functions of `namespace` tools
/// flattened among them; other tool types (hosted tools the provider would
/// run) go through by type for the chat path to leave out.
fn tools(list: &[Value]) -> Value {
    let mut out = Vec::with_capacity(list.len());
    for t in list {
        match t.get("type").and_then(Value::as_str) {
            Some("function") => out.push(chat_function(t, &t["name"])),
            Some("namespace") => {
                for (ns, name, f) in members(t) {
                    out.push(chat_function(f, &json!(flat_name(ns, name))));
                }
            }
            _ => out.push(json!({"type": t.get("type")})),
        }
    }
    Value::Array(out)
}

fn tool_choice(v: &Value) -> Result<Value, ApiError> {
    match v {
        Value::String(_) => Ok(v.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = string_at(v, "name", "tool_choice")?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(ApiError::unsupported(
            "tool_choice",
            "only none, auto, required or {\"type\": \"function\", \"name\": …}",
        )),
    }
}

/// `text.format` as the chat request's `response_format`.
fn response_format(text: &Value) -> Result<Option<Value>, ApiError> {
    let Some(f) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let schema = f.get("schema").filter(|s| s.is_object()).ok_or_else(|| {
                bad(
                    "text.format.schema",
                    "text.format json_schema needs a schema object",
                )
            })?;
            Ok(Some(
                json!({"type": "json_schema", "json_schema": {"schema": schema}}),
            ))
        }
        _ => Err(bad(
            "text.format.type",
            "text.format.type must be text, json_object or json_schema",
        )),
    }
}

impl ResponsesRequest {
    /// The same request as an OpenAI chat request.
    ///
    /// # Errors
    /// A 400 naming the field at fault.
    pub fn to_chat(&self) -> Result<ChatRequest, ApiError> {
        self.refused.check()?;
        let mut v = json!({
            "model": self.model,
            "messages": messages(self)?,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "parallel_tool_calls": self.parallel_tool_calls,
        });
        match self.max_output_tokens {
            Some(0) => {
                return Err(bad(
                    "max_output_tokens",
                    "max_output_tokens must be at least 1",
                ))
            }
            m => v["max_completion_tokens"] = json!(m),
        }
        if let Some(t) = self.tools.as_ref().filter(|t| !t.is_empty()) {
            v["tools"] = tools(t);
        }
        if let Some(c) = self.tool_choice.as_ref().filter(|c| !c.is_null()) {
            v["tool_choice"] = tool_choice(c)?;
        }
        if let Some(f) = self
            .text
            .as_ref()
            .map(response_format)
            .transpose()?
            .flatten()
        {
            v["response_format"] = f;
        }
        let effort = self.reasoning.as_ref().and_then(|r| r.get("effort"));
        if let Some(e) = effort.and_then(Value::as_str) {
            v["chat_template_kwargs"] = json!({"enable_thinking": e != "none"});
        }
        translate::chat_request(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Finish;
    use crate::openai::request::message_text;
    use crate::responses::shape::Shape;
    use crate::translate::Block;
    use minfer_engine::StopReason;

    fn chat(body: Value) -> Result<ChatRequest, ApiError> {
        let r: ResponsesRequest = serde_json::from_value(body).unwrap();
        r.to_chat()
    }

    #[test]
    fn items_translate_to_chat_messages() {
        let r = chat(json!({
            "model": "m", "instructions": "Be brief.", "max_output_tokens": 20,
            "reasoning": {"effort": "low"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "f"},
            "text": {"format": {"type": "text"}},
            "input": [
                {"role": "user", "content": "Go."},
                {"type": "reasoning", "id": "rs_1", "summary": [],
                 "content": [{"type": "reasoning_text", "text": "hm"}]},
                {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                 "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
                {"role": "user", "content": [{"type": "input_text", "text": "And?"}]}
            ]
        }))
        .unwrap();
        let roles: Vec<&str> = r.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        let a = &r.messages[2];
        assert_eq!(message_text(a).unwrap(), "Calling.");
        assert_eq!(a.reasoning_content.as_deref(), Some("hm"));
        assert_eq!(a.tool_calls.as_ref().unwrap()[0]["id"], "c1");
        assert_eq!(r.messages[3].name.as_deref(), Some("f"));
        assert_eq!(message_text(&r.messages[4]).unwrap(), "And?");
        assert_eq!(r.tool_choice.unwrap()["function"]["name"], "f");
        assert_eq!(r.chat_template_kwargs.unwrap()["enable_thinking"], true);
        assert!(r.sampling.response_format.is_none());
        assert_eq!(
            r.sampling
                .to_config(crate::config::RequestDefaults::max(0))
                .unwrap()
                .max_tokens,
            20
        );
    }

    #[test]
    fn refused_and_bad_fields_are_named() {
        for (extra, param) in [
            (json!({"store": true}), "store"),
            (
                json!({"previous_response_id": "resp_1"}),
                "previous_response_id",
            ),
            (json!({"background": true}), "background"),
            (json!({"max_output_tokens": 0}), "max_output_tokens"),
            (
                json!({"text": {"format": {"type": "json_schema"}}}),
                "text.format.schema",
            ),
            (
                json!({"text": {"format": {"type": "xml"}}}),
                "text.format.type",
            ),
            (
                json!({"tool_choice": {"type": "allowed_tools"}}),
                "tool_choice",
            ),
            (
                json!({"input": [{"type": "item_reference", "id": "x"}]}),
                "input[0].type",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}),
                "input[0].content[0].type",
            ),
            (json!({"input": 5}), "input"),
        ] {
            let mut body = json!({"model": "m", "input": "hi"});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let e = chat(body).unwrap_err();
            assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some(param)));
        }
        // `store: false` and `include` ask for nothing refused.
        chat(json!({"input": "hi", "store": false,
            "include": ["reasoning.encrypted_content", "file_search_call.results"]}))
        .unwrap();
    }

    #[test]
    fn namespaces_flatten_and_hosted_tools_drop_out() {
        let tools = json!([
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "collaboration", "description": "Agents.", "tools": [
                {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
            {"type": "namespace", "name": "mcp__docs__", "tools": [
                {"type": "function", "name": "search", "parameters": {"type": "object"}}]},
            {"type": "web_search"}, {"type": "file_search", "vector_store_ids": []}
        ]);
        let r = chat(
            json!({"model": "m", "tools": tools, "tool_choice": "auto", "input": [
            {"type": "function_call", "call_id": "c1", "name": "spawn_agent",
             "namespace": "collaboration", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"role": "user", "content": "go"}]}),
        )
        .unwrap();
        let tools = crate::tools::Tools::parse(r.tools.as_deref().unwrap()).unwrap();
        let names: Vec<&str> = tools.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "exec_command",
                "collaboration__spawn_agent",
                "mcp__docs__search"
            ]
        );
        let call = &r.messages[0].tool_calls.as_ref().unwrap()[0];
        assert_eq!(call["function"]["name"], "collaboration__spawn_agent");
        assert_eq!(r.messages.len(), 3);
        // The call comes back under the client's names.
        let shape = Shape {
            n: 1,
            created: 1,
            model: "m".into(),
            prompt_tokens: 1,
            echo: json!({}),
            scoped: scoped(tools_list()),
        };
        let item = shape.item(
            0,
            &Block::Call(crate::calls::Call {
                name: "collaboration__spawn_agent".into(),
                arguments: "{}".into(),
            }),
            "completed",
        );
        assert_eq!(
            (item["name"].as_str(), item["namespace"].as_str()),
            (Some("spawn_agent"), Some("collaboration"))
        );
    }

    fn tools_list() -> &'static [Value] {
        static T: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
        T.get_or_init(|| {
            vec![
                json!({"type": "namespace", "name": "collaboration", "tools": [
                {"type": "function", "name": "spawn_agent"}]}),
            ]
        })
    }

    #[test]
    fn the_response_object_lists_items_in_order() {
        let shape = Shape {
            n: 7,
            created: 1,
            model: "m".into(),
            prompt_tokens: 3,
            echo: json!({"tools": []}),
            scoped: Vec::new(),
        };
        let blocks = vec![
            Block::Reasoning("hm".into()),
            Block::Text("Hi".into()),
            Block::Call(crate::calls::Call {
                name: "f".into(),
                arguments: "{}".into(),
            }),
        ];
        let f = Finish {
            prompt_tokens: 3,
            completion_tokens: 5,
            cached_tokens: 0,
            reason: StopReason::MaxTokens,
        };
        let v = shape.object(&blocks, Some(&f));
        let kinds: Vec<&str> = v["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert_eq!(v["status"], "incomplete");
        assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(v["output"][2]["status"], "incomplete");
        assert_eq!(v["output_text"], "Hi");
        assert_eq!(v["usage"]["total_tokens"], 8);
        assert_eq!(v["tools"], json!([]));
    }
}
