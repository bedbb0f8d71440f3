//! The bodies of Ollama's `/api/chat` and `/api/generate` and what they
//! become: the OpenAI-side requests that [`chat::prepare`] and
//! [`completion::prepare`] already render, constrain and check, with
//! Ollama's `options` and defaults on top.

use minfer_engine::GenerateConfig;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::options::Options;
use crate::http::ApiError;
use crate::models::Served;
use crate::openai::request::{
    ChatRequest, CompletionRequest, Content, JsonSchemaFormat, Message, Prompt, Refused,
    ResponseFormat,
};
use crate::openai::{chat, completion};
use crate::output::Split;
use crate::tools::{Function, Tool};

/// One chat message.
#[derive(Debug, Clone, Deserialize)]
pub struct OMessage {
    /// `system`, `user`, `assistant` or `tool` (any case).
    pub role: String,
    /// The text.
    #[serde(default)]
    pub content: Option<String>,
    /// An assistant message's thinking.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Images: refused, minfer serves text models.
    #[serde(default)]
    pub images: Option<Vec<Value>>,
    /// An assistant message's calls: `{"function": {"name", "arguments"}}`
    /// with the arguments as an object.
    #[serde(default)]
    pub tool_calls: Option<Vec<OToolCall>>,
    /// A tool message: the tool that answered.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// A tool message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// One call of an assistant message.
#[derive(Debug, Clone, Deserialize)]
pub struct OToolCall {
    /// The call's id, when the client kept it.
    #[serde(default)]
    pub id: Option<String>,
    /// The function and its arguments.
    pub function: OCallFunction,
}

/// The function of a call.
#[derive(Debug, Clone, Deserialize)]
pub struct OCallFunction {
    /// Its name.
    pub name: String,
    /// Its arguments: an object (a JSON string is taken too).
    #[serde(default)]
    pub arguments: Value,
}

/// One entry of `tools` (`type` may be left out: it can only be
/// `function`).
#[derive(Debug, Clone, Deserialize)]
pub struct OTool {
    /// `function`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// The function.
    #[serde(default)]
    pub function: Option<Function>,
}

/// `POST /api/chat`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatBody {
    /// The model's name.
    #[serde(default)]
    pub model: String,
    /// The conversation; empty only loads the model.
    #[serde(default)]
    pub messages: Vec<OMessage>,
    /// Functions the model may call.
    #[serde(default)]
    pub tools: Option<Vec<OTool>>,
    /// The shared fields.
    #[serde(flatten)]
    pub common: Common,
}

/// `POST /api/generate`.
#[derive(Debug, Clone, Deserialize)]
pub struct GenerateBody {
    /// The model's name.
    #[serde(default)]
    pub model: String,
    /// The prompt; empty (with no suffix) only loads the model.
    #[serde(default)]
    pub prompt: String,
    /// Text after the answer: a fill-in-the-middle prompt.
    #[serde(default)]
    pub suffix: Option<String>,
    /// The system message of the rendered turn.
    #[serde(default)]
    pub system: Option<String>,
    /// A Go template in place of the model's: refused unless empty.
    #[serde(default)]
    pub template: Option<String>,
    /// The prompt as it is, without the chat template.
    #[serde(default)]
    pub raw: bool,
    /// Token ids of an earlier exchange: refused unless empty.
    #[serde(default)]
    pub context: Option<Vec<Value>>,
    /// Images: refused.
    #[serde(default)]
    pub images: Option<Vec<Value>>,
    /// The shared fields.
    #[serde(flatten)]
    pub common: Common,
}

/// The fields chat and generate share.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Common {
    /// How long the model stays loaded after this request (Ollama's
    /// durations; 0 unloads it, negative keeps it).
    #[serde(default)]
    pub keep_alive: Option<Value>,
    /// `"json"` or a JSON schema for the answer.
    #[serde(default)]
    pub format: Option<Value>,
    /// Sampler and runner options (`temperature`, `num_predict`, …).
    #[serde(default)]
    pub options: Option<Value>,
    /// Stream NDJSON lines (Ollama's default) or answer once.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Whether a thinking model thinks: a boolean or a level.
    #[serde(default)]
    pub think: Option<Value>,
    /// Report each generated token's log probability.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// Alternatives per token, 0 to 20.
    #[serde(default)]
    pub top_logprobs: Option<u32>,
}

impl Common {
    /// Whether to stream (Ollama streams unless told not to).
    pub fn streams(&self) -> bool {
        self.stream.unwrap_or(true)
    }
}

/// `format`: none, `"json"` or a schema object.
fn response_format(format: Option<&Value>) -> Result<Option<ResponseFormat>, ApiError> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(ResponseFormat {
            kind: "json_object".into(),
            json_schema: None,
        })),
        Some(schema @ Value::Object(_)) => Ok(Some(ResponseFormat {
            kind: "json_schema".into(),
            json_schema: Some(JsonSchemaFormat {
                schema: Some(schema.clone()),
            }),
        })),
        Some(_) => Err(ApiError::bad_param(
            "format",
            "format must be \"json\" or a JSON schema object",
        )),
    }
}

/// `think`: a boolean, or a level (`low`, `medium`, `high`, `max`), which
/// means thinking on.
fn think(v: Option<&Value>) -> Result<Option<bool>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if ["low", "medium", "high", "max"].contains(&s.as_str()) => {
            Ok(Some(true))
        }
        Some(other) => Err(ApiError::bad_param(
            "think",
            format!("invalid think value: {other} (must be \"high\", \"medium\", \"low\", \"max\", true, or false)"),
        )),
    }
}

/// A chat or generate request ready for the model thread.
#[derive(Debug)]
pub struct Prepared {
    /// The prompt's token ids.
    pub ids: Vec<u32>,
    /// What to generate.
    pub cfg: GenerateConfig,
    /// How the answer splits into thinking, content and calls.
    pub split: Split,
}

/// The request sizes a preparation needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Choices one request may have (`-np`).
    pub n_parallel: usize,
    /// The context window.
    pub n_ctx: u32,
}

fn check_images(images: Option<&Vec<Value>>, param: &str) -> Result<(), ApiError> {
    match images {
        Some(v) if !v.is_empty() => Err(ApiError::unsupported(
            param,
            "images: the model served takes text only",
        )),
        _ => Ok(()),
    }
}

/// An Ollama message as the chat templates read an OpenAI one.
fn message(i: usize, m: &OMessage) -> Result<Message, ApiError> {
    check_images(m.images.as_ref(), &format!("messages[{i}].images"))?;
    let calls = m
        .tool_calls
        .as_ref()
        .filter(|c| !c.is_empty())
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    json!({
                        "id": c.id.clone().unwrap_or_else(|| format!("call_{i}_{k}")),
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    })
                })
                .collect::<Value>()
        });
    Ok(Message {
        role: m.role.to_lowercase(),
        // Ollama's content is a string that defaults to empty.
        content: Some(Content::Text(m.content.clone().unwrap_or_default())),
        tool_calls: calls,
        tool_call_id: m.tool_call_id.clone(),
        name: m.tool_name.clone(),
        reasoning_content: m.thinking.clone().filter(|t| !t.is_empty()),
    })
}

/// What `think` asks of the template and of the splitter.
#[derive(Debug, Default)]
struct Thinking {
    /// The template's `enable_thinking`.
    kwargs: Option<Map<String, Value>>,
    /// `none` keeps `<think>` text in the answer.
    reasoning_format: Option<String>,
}

/// `think: false` asks the template not to think and leaves any `<think>`
/// text in the answer, as Ollama does; `true` on a model that cannot
/// think is a 400.
fn thinking(served: &Served, model: &str, think: Option<bool>) -> Result<Thinking, ApiError> {
    match think {
        Some(true) if !served.abilities.thinking => Err(ApiError::bad_param(
            "think",
            format!("\"{model}\" does not support thinking"),
        )),
        None => Ok(Thinking::default()),
        Some(on) => {
            let mut kw = Map::new();
            kw.insert("enable_thinking".into(), json!(on));
            Ok(Thinking {
                kwargs: Some(kw),
                reasoning_format: (!on).then(|| "none".to_string()),
            })
        }
    }
}

/// An OpenAI chat request of `messages` with Ollama's `common` fields.
fn chat_request(
    served: &Served,
    model: &str,
    messages: Vec<Message>,
    tools: Option<Vec<Tool>>,
    common: &Common,
    opts: &Options,
    n_ctx: u32,
) -> Result<ChatRequest, ApiError> {
    let th = thinking(served, model, think(common.think.as_ref())?)?;
    let mut sampling = opts.sampling(model, n_ctx);
    sampling.response_format = response_format(common.format.as_ref())?;
    Ok(ChatRequest {
        messages,
        tools,
        tool_choice: None,
        parallel_tool_calls: None,
        reasoning_format: th.reasoning_format,
        chat_template_kwargs: th.kwargs,
        add_generation_prompt: None,
        continue_final_message: None,
        refused: Refused::default(),
        sampling,
    })
}

/// Log probabilities: `top_logprobs` is 0 to 20 and needs `logprobs`.
fn logprobs(common: &Common) -> Result<Option<u8>, ApiError> {
    let top = common.top_logprobs.unwrap_or(0);
    if top > u32::from(minfer_engine::MAX_TOP_LOGPROBS) {
        return Err(ApiError::bad_param(
            "top_logprobs",
            "top_logprobs must be between 0 and 20",
        ));
    }
    // At most MAX_TOP_LOGPROBS, so it fits.
    Ok(common.logprobs.unwrap_or(false).then_some(top as u8))
}

/// Renders, tokenizes and configures a chat request.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn prepare_chat(served: &Served, body: &ChatBody, lim: Limits) -> Result<Prepared, ApiError> {
    let opts = Options::parse(body.common.options.as_ref())?;
    let messages = body
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let tools: Option<Vec<Tool>> = match &body.tools {
        Some(t) if !t.is_empty() => Some(
            t.iter()
                .map(|t| Tool {
                    kind: t.kind.clone().unwrap_or_else(|| "function".into()),
                    function: t.function.clone(),
                })
                .collect(),
        ),
        _ => None,
    };
    if tools.is_some() && response_format(body.common.format.as_ref())?.is_some() {
        return Err(ApiError::bad_param(
            "format",
            "format cannot be combined with tools on this server",
        ));
    }
    let req = chat_request(
        served,
        &body.model,
        messages,
        tools,
        &body.common,
        &opts,
        lim.n_ctx,
    )?;
    let mut prep = chat::prepare(served, &req, lim.n_parallel)?;
    let mut cfg = prep.cfgs.swap_remove(0);
    opts.finish(&mut cfg);
    cfg.logprobs = logprobs(&body.common)?;
    Ok(Prepared {
        ids: prep.ids,
        cfg,
        split: prep.split,
    })
}

/// A generate request whose prompt goes to the model as it is (with a
/// suffix: as a fill-in-the-middle prompt).
fn generate_as_is(
    served: &Served,
    body: &GenerateBody,
    opts: &Options,
    lim: Limits,
) -> Result<Prepared, ApiError> {
    let suffix = body.suffix.as_deref().filter(|s| !s.is_empty());
    if body.system.as_deref().is_some_and(|s| !s.is_empty()) {
        let why = if suffix.is_some() {
            "with a suffix"
        } else {
            "for a model without a chat template"
        };
        return Err(ApiError::bad_param(
            "system",
            format!("the prompt is sent as it is {why}, so there is no turn to put `system` in"),
        ));
    }
    think(body.common.think.as_ref())?;
    let mut sampling = opts.sampling(&body.model, lim.n_ctx);
    sampling.response_format = response_format(body.common.format.as_ref())?;
    let req = CompletionRequest {
        prompt: Prompt::Text(body.prompt.clone()),
        echo: false,
        suffix: suffix.map(str::to_string),
        sampling,
    };
    let mut p = completion::prepare(served, &req, lim.n_parallel)?;
    let part = p.parts.swap_remove(0);
    Ok(Prepared {
        ids: part.prompt,
        cfg: part.cfgs.into_iter().next().unwrap_or_default(),
        split: Split::default(),
    })
}

/// Tokenizes and configures a generate request: the prompt as it is
/// (`raw`, a `suffix`, or a model without a chat template), else rendered
/// as one user turn after the `system` message.
///
/// # Errors
/// A 400 naming the field at fault.
pub fn prepare_generate(
    served: &Served,
    body: &GenerateBody,
    lim: Limits,
) -> Result<Prepared, ApiError> {
    check_images(body.images.as_ref(), "images")?;
    if body.template.as_deref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::unsupported(
            "template",
            "a Go template in the request; the model's chat template is used, or send `raw: true` with the prompt written out",
        ));
    }
    if body.context.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(ApiError::unsupported(
            "context",
            "the deprecated conversation context; send the whole conversation to /api/chat",
        ));
    }
    let system = body.system.as_deref().filter(|s| !s.is_empty());
    if body.raw && system.is_some() {
        return Err(ApiError::bad_param(
            "raw",
            "raw mode does not support template, system, or context",
        ));
    }
    let opts = Options::parse(body.common.options.as_ref())?;
    let suffix = body.suffix.as_deref().filter(|s| !s.is_empty());
    let mut prep = if body.raw || suffix.is_some() || served.template.is_none() {
        generate_as_is(served, body, &opts, lim)?
    } else {
        let mut messages = Vec::with_capacity(2);
        if let Some(s) = system {
            messages.push(text_message("system", s));
        }
        messages.push(text_message("user", &body.prompt));
        let req = chat_request(
            served,
            &body.model,
            messages,
            None,
            &body.common,
            &opts,
            lim.n_ctx,
        )?;
        let mut p = chat::prepare(served, &req, lim.n_parallel)?;
        Prepared {
            ids: p.ids,
            cfg: p.cfgs.swap_remove(0),
            split: p.split,
        }
    };
    opts.finish(&mut prep.cfg);
    prep.cfg.logprobs = logprobs(&body.common)?;
    Ok(prep)
}

fn text_message(role: &str, text: &str) -> Message {
    Message {
        role: role.into(),
        content: Some(Content::Text(text.into())),
        tool_calls: None,
        tool_call_id: None,
        name: None,
        reasoning_content: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_think_forms() {
        assert!(response_format(None).unwrap().is_none());
        assert!(response_format(Some(&json!(""))).unwrap().is_none());
        assert_eq!(
            response_format(Some(&json!("json"))).unwrap().unwrap().kind,
            "json_object"
        );
        let f = response_format(Some(&json!({"type": "object"})))
            .unwrap()
            .unwrap();
        assert_eq!(f.kind, "json_schema");
        assert_eq!(
            response_format(Some(&json!("yaml")))
                .unwrap_err()
                .param
                .as_deref(),
            Some("format")
        );
        assert_eq!(think(Some(&json!(true))).unwrap(), Some(true));
        assert_eq!(think(Some(&json!("high"))).unwrap(), Some(true));
        assert_eq!(think(Some(&json!(false))).unwrap(), Some(false));
        assert_eq!(think(None).unwrap(), None);
        assert!(think(Some(&json!("extreme"))).is_err());
    }

    #[test]
    fn messages_carry_calls_with_object_arguments_and_refuse_images() {
        let m: OMessage = serde_json::from_value(json!({
            "role": "Assistant", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ]
        }))
        .unwrap();
        let m = message(3, &m).unwrap();
        assert_eq!(m.role, "assistant");
        let calls = m.tool_calls.unwrap();
        assert_eq!(calls[0]["function"]["arguments"]["city"], "Paris");
        assert_eq!(calls[0]["id"], "call_3_0");
        let m: OMessage =
            serde_json::from_value(json!({"role": "user", "content": "x", "images": ["aGk="]}))
                .unwrap();
        let e = message(1, &m).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[1].images"));
    }
}
