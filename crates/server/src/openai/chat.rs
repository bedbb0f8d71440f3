//! A chat request made ready to run: messages checked and rendered through
//! the chat template (with tools and template variables), the output
//! constraint chosen (tool calls, a response format, after any thinking),
//! and one configuration per choice; and the endpoint that runs it.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use minfer_engine::{ChatTemplate, GenerateConfig, Trigger};
use serde_json::{json, Value};

use super::handle::{answer, prepared};
use super::render::Api;
use super::request::{message_text, ChatRequest, Sampling};
use super::sampling::check_vocab;
use crate::calls::{Format, Syntax};
use crate::http::{Admission, ApiError};
use crate::models::Served;
use crate::output::Split;
use crate::state::Shared;
use crate::tools::{self, Choice, Tools};

/// A chat request ready for the model thread.
#[derive(Debug)]
pub struct Prepared {
    /// The prompt's token ids.
    pub ids: Vec<u32>,
    /// One configuration per choice.
    pub cfgs: Vec<GenerateConfig>,
    /// How the answers are split into reasoning, content and calls.
    pub split: Split,
}

const THINK_CLOSE: &str = "</think>";

/// Checks the messages and turns them into what chat templates read.
fn messages(req: &ChatRequest) -> Result<Value, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "`messages` must not be empty",
        ));
    }
    let mut out = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "developer" => "system",
            r @ ("system" | "user" | "assistant" | "tool") => r,
            other => {
                return Err(ApiError::bad_param(
                    &format!("messages[{i}].role"),
                    format!("unknown message role `{other}`"),
                ))
            }
        };
        let calls = m.tool_calls.as_ref().filter(|c| !c.is_null());
        if m.content.is_none() && !(role == "assistant" && calls.is_some()) {
            let param = format!("messages[{i}].content");
            return Err(ApiError::bad_param(
                &param,
                format!("{param} is missing: a {} message needs content", m.role),
            ));
        }
        let mut v = json!({"role": role, "content": message_text(m)?});
        if let Some(c) = calls {
            if !c.is_array() {
                return Err(ApiError::bad_param(
                    &format!("messages[{i}].tool_calls"),
                    "tool_calls must be a list",
                ));
            }
            v["tool_calls"] = crate::calls::template_calls(c);
        }
        if let Some(id) = &m.tool_call_id {
            v["tool_call_id"] = json!(id);
        }
        if let Some(n) = &m.name {
            v["name"] = json!(n);
        }
        if let Some(r) = &m.reasoning_content {
            v["reasoning_content"] = json!(r);
        }
        out.push(v);
    }
    Ok(Value::Array(out))
}

/// Every system message joined into the first one, for a template that
/// renders the system prompt only at the start (clients such as Claude
/// Code put system entries between the turns).
fn fold_system(msgs: &Value) -> Value {
    let Some(list) = msgs.as_array() else {
        return msgs.clone();
    };
    let (system, rest): (Vec<&Value>, Vec<&Value>) =
        list.iter().partition(|m| m["role"] == "system");
    if system.is_empty() {
        return msgs.clone();
    }
    let text: Vec<&str> = system
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = vec![json!({"role": "system", "content": text.join("\n\n")})];
    out.extend(rest.into_iter().cloned());
    Value::Array(out)
}

/// The functions described in the system prompt, for a template that has
/// no place for tools: the model is shown each function's schema and the
/// JSON form of a call, which the generic parser reads back.
fn tools_in_system(msgs: &Value, tools: &Tools) -> Value {
    let listing: Vec<String> = tools
        .json
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"].to_string())
        .collect();
    let text = format!(
        "You can call these functions, each described by a JSON schema of its arguments:\n{}\n\nTo call one, answer with nothing but a JSON object of the form {{\"name\": <function name>, \"arguments\": <an object of arguments>}}; to call several, a JSON list of such objects.",
        listing.join("\n")
    );
    let mut list = msgs.as_array().cloned().unwrap_or_default();
    match list.first_mut() {
        Some(m) if m["role"] == "system" => {
            let head = m["content"].as_str().unwrap_or("").to_string();
            m["content"] = json!(format!("{head}\n\n{text}"));
        }
        _ => list.insert(0, json!({"role": "system", "content": text})),
    }
    Value::Array(list)
}

/// The text of a last assistant message that the answer continues
/// (llama-server's assistant prefill, vLLM's `continue_final_message`):
/// the prompt is the conversation before it, opened for the assistant,
/// then this text. `None` when the last message is not a plain assistant
/// text, or when the request asks for neither.
///
/// # Errors
/// A 400 when `add_generation_prompt` and `continue_final_message` are
/// both set, as llama-server and vLLM refuse them.
fn prefill(req: &ChatRequest, msgs: &Value) -> Result<Option<String>, ApiError> {
    let cont = req.continue_final_message.unwrap_or(false);
    if cont && req.add_generation_prompt == Some(true) {
        return Err(ApiError::bad_param(
            "continue_final_message",
            "continue_final_message and add_generation_prompt cannot both be true",
        ));
    }
    let last = msgs.as_array().and_then(|l| l.last());
    let text = last
        .filter(|m| m["role"] == "assistant" && m.get("tool_calls").is_none())
        .and_then(|m| m["content"].as_str())
        .filter(|t| !t.is_empty());
    if cont && text.is_none() {
        return Err(ApiError::bad_param(
            "continue_final_message",
            "continue_final_message needs a last assistant message with text",
        ));
    }
    Ok(text.map(str::to_string))
}

/// Renders `msgs` with `t`; a template that refuses system messages after
/// the first turn gets them joined into one system prompt instead. A last
/// assistant message with text is continued (see [`prefill`]).
fn render(
    t: &ChatTemplate,
    msgs: &Value,
    tools: Option<&Value>,
    req: &ChatRequest,
) -> Result<String, ApiError> {
    if let Some(text) = prefill(req, msgs)? {
        let mut before = msgs.clone();
        if let Some(list) = before.as_array_mut() {
            list.pop();
        }
        return Ok(render_turns(t, &before, tools, true)? + &text);
    }
    render_turns(t, msgs, tools, req.add_generation_prompt.unwrap_or(true))
}

fn render_turns(
    t: &ChatTemplate,
    msgs: &Value,
    tools: Option<&Value>,
    open: bool,
) -> Result<String, ApiError> {
    let first = t.render_json(msgs, tools, open);
    let late_system = msgs
        .as_array()
        .is_some_and(|l| l.iter().skip(1).any(|m| m["role"] == "system"));
    match first {
        Ok(text) => Ok(text),
        Err(_) if late_system => t
            .render_json(&fold_system(msgs), tools, open)
            .map_err(|e| ApiError::bad_param("messages", e.to_string())),
        Err(e) => Err(ApiError::bad_param("messages", e.to_string())),
    }
}

/// The call syntax of a request with `tools`: the template's own, or the
/// generic JSON form for a template that has no place for tools.
fn syntax_for(served: &Served, use_tools: Option<&Tools>) -> Option<Syntax> {
    use_tools?;
    let ab = &served.abilities;
    match &ab.tool_syntax {
        Some(s) if ab.tools => Some(s.clone()),
        _ => Some(Syntax::of_format(Format::Json, false)),
    }
}

/// The prompt text of `req` for `served` (what `/apply-template`
/// answers), with the request's functions and its `tool_choice`.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn rendered(
    served: &Served,
    req: &ChatRequest,
) -> Result<(String, Option<Tools>, Choice), ApiError> {
    let mut msgs = messages(req)?;
    let tools = match &req.tools {
        Some(t) if !t.is_empty() => Some(Tools::parse(t)?).filter(|t| !t.functions.is_empty()),
        _ => None,
    };
    let sent_tools = req.tools.as_ref().is_some_and(|t| !t.is_empty());
    let choice = Choice::parse(req.tool_choice.as_ref(), sent_tools)?;
    // Only hosted tools, all left out: nothing the model could call.
    let choice = if tools.is_some() {
        choice
    } else {
        Choice::None
    };
    let template = served.template.as_ref().ok_or_else(|| {
        ApiError::bad_param(
            "messages",
            format!(
                "the model `{}` has no chat template; use /v1/completions or start the server with --chat-template",
                served.id
            ),
        )
    })?;
    let use_tools = tools.as_ref().filter(|_| choice != Choice::None);
    let template_tools = match use_tools {
        Some(t) if !served.abilities.tools => {
            msgs = tools_in_system(&msgs, t);
            None
        }
        other => other.map(|t| &t.json),
    };
    // The request's word on thinking, else the server's (`--reasoning`).
    let asked = req
        .chat_template_kwargs
        .as_ref()
        .and_then(|kw| kw.get("enable_thinking"))
        .and_then(serde_json::Value::as_bool);
    // The server's `enable_thinking` is in the template since the load.
    let thinking = asked.or(served.cfg.reasoning);
    // A copy of the template only for a request with variables of its own.
    let with_vars;
    let t = match req
        .chat_template_kwargs
        .as_ref()
        .filter(|kw| !kw.is_empty())
    {
        None => template,
        Some(kw) => {
            with_vars = kw
                .iter()
                .fold(template.clone(), |t, (k, v)| t.with_var(k, v));
            &with_vars
        }
    };
    let mut text = render(t, &msgs, template_tools, req)?;
    if thinking == Some(false) {
        close_thinking(&mut text, template.source());
    }
    Ok((text, tools, choice))
}

/// Closes the thinking block a prompt opens although thinking is off, as
/// llama-server does: templates with no `enable_thinking` (DeepSeek R1,
/// QwQ) open `<think>` for every answer, and Command R7B's answers begin
/// with a thinking span of their own.
fn close_thinking(text: &mut String, source: &str) {
    if text.ends_with("<think>\n") || text.ends_with("<think>") {
        text.push_str(THINK_CLOSE);
    } else if text.ends_with("<|CHATBOT_TOKEN|>") && source.contains("<|START_THINKING|>") {
        text.push_str("<|START_THINKING|><|END_THINKING|>");
    }
}

/// Renders, tokenizes and configures `req` for `served`; `limit` is the
/// most choices a request may ask for.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn prepare(served: &Served, req: &ChatRequest, limit: usize) -> Result<Prepared, ApiError> {
    req.refused.check()?;
    let n = req.sampling.choices(limit)?;
    let mut cfg = req.sampling.to_config(served.defaults())?;
    let (text, tools, choice) = rendered(served, req)?;
    let ab = &served.abilities;
    let use_tools = tools.as_ref().filter(|_| choice != Choice::None);
    let syntax = syntax_for(served, use_tools);
    let tail = text.trim_end();
    let in_thinking = ab.thinking && tail.ends_with("<think>");
    // The model may think first unless the prompt already closed the block.
    let may_think = ab.thinking && !tail.ends_with(THINK_CLOSE);
    if let (Some(tools), Some(syntax)) = (use_tools, &syntax) {
        if cfg.sampler.constraint.is_some() {
            return Err(ApiError::bad_param(
                "tools",
                "tools cannot be combined with response_format, grammar or json_schema",
            ));
        }
        let parallel = req.parallel_tool_calls.unwrap_or(true);
        if let Some((c, trigger)) =
            tools::constraint(tools, &choice, parallel, syntax, cfg.max_tokens)?
        {
            cfg.sampler.constraint = Some(c);
            cfg.sampler.trigger = trigger;
        }
    }
    if may_think && cfg.sampler.constraint.is_some() && cfg.sampler.trigger.is_none() {
        // The constraint governs the answer, after the thinking block.
        cfg.sampler.trigger = Some(Trigger {
            text: THINK_CLOSE.into(),
            include: false,
        });
    }
    check_vocab(&cfg, served)?;
    let reasoning = match req.reasoning_format.as_deref() {
        None | Some("auto" | "deepseek" | "deepseek-legacy") => true,
        Some("none") => false,
        Some(other) => {
            return Err(ApiError::bad_param(
                "reasoning_format",
                format!("reasoning_format must be none, auto or deepseek, got `{other}`"),
            ))
        }
    };
    let ids = served.loaded.tokenize(&text);
    Ok(Prepared {
        ids,
        cfgs: Sampling::per_choice(&cfg, n),
        split: Split {
            reasoning,
            in_thinking,
            tools: syntax,
            known: use_tools.map(Tools::catalog).unwrap_or_default(),
            harmony: ab.harmony,
        },
    })
}

/// `POST /v1/chat/completions`.
pub async fn handle(State(shared): State<Arc<Shared>>, body: Body) -> Result<Response, ApiError> {
    let (req, model, prep) = prepared(&shared, body, prepare).await?;
    let logprobs = prep.cfgs[0].logprobs.is_some();
    let (n, prompt_tokens) = (prep.cfgs.len(), prep.ids.len());
    let split = prep.split;
    let admission = Admission::one(model, prep.ids, prep.cfgs, "messages");
    answer(&shared, Api::Chat, admission, &req.sampling, |shape| {
        shape
            .with_logprobs(logprobs)
            .with_choices(n, prompt_tokens)
            .with_split(split)
    })
    .await
}
