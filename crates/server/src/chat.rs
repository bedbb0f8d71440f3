//! A chat request made ready to run: messages checked and rendered through
//! the chat template (with tools and template variables), the output
//! constraint chosen (tool calls, a response format, after any thinking),
//! and one configuration per choice.

use minfer_engine::{GenerateConfig, Trigger};
use serde_json::{json, Value};

use crate::api::{self, ChatRequest, Sampling};
use crate::error::ApiError;
use crate::respond::Split;
use crate::state::Served;
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
        let mut v = json!({"role": role, "content": api::message_text(m)?});
        if let Some(c) = calls {
            if !c.is_array() {
                return Err(ApiError::bad_param(
                    &format!("messages[{i}].tool_calls"),
                    "tool_calls must be a list",
                ));
            }
            v["tool_calls"] = tools::template_calls(c);
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

/// Renders, tokenizes and configures `req` for `served`; `limit` is the
/// most choices a request may ask for.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn prepare(served: &Served, req: &ChatRequest, limit: usize) -> Result<Prepared, ApiError> {
    req.refused.check()?;
    let n = req.sampling.choices(limit)?;
    let mut cfg = req.sampling.to_config(0)?;
    let msgs = messages(req)?;
    let tools = match &req.tools {
        Some(t) if !t.is_empty() => Some(Tools::parse(t)?),
        _ => None,
    };
    let choice = Choice::parse(req.tool_choice.as_ref(), tools.is_some())?;
    let template = served.template.as_ref().ok_or_else(|| {
        ApiError::bad_param(
            "messages",
            format!(
                "the model `{}` has no chat template; use /v1/completions or start the server with --chat-template",
                served.id
            ),
        )
    })?;
    let ab = &served.abilities;
    let use_tools = tools.as_ref().filter(|_| choice != Choice::None);
    let syntax = match use_tools {
        None => None,
        Some(_) if !ab.tools => {
            return Err(ApiError::bad_param(
                "tools",
                format!(
                    "the chat template of `{}` does not take tools; start the server with --chat-template chatml or a template that does",
                    served.id
                ),
            ))
        }
        Some(_) => Some(ab.tool_syntax.clone().ok_or_else(|| {
            ApiError::bad_param(
                "tools",
                format!(
                    "the chat template of `{}` takes tools, but in a call syntax minfer does not know (it knows <tool_call> tags)",
                    served.id
                ),
            )
        })?),
    };
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
    let text = t
        .render_json(&msgs, use_tools.map(|t| &t.json), true)
        .map_err(|e| ApiError::bad_param("messages", e.to_string()))?;
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
        if let Some((c, trigger)) = tools::constraint(tools, &choice, parallel, syntax)? {
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
    api::check_vocab(&cfg, served)?;
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
        },
    })
}
