//! The request bodies of the OpenAI API; their sampling fields become the
//! engine's settings in [`sampling`](super::sampling). Fields the engine
//! cannot honour yet are refused with a 400 that names them, never
//! silently ignored; fields that change nothing for one local model
//! (`user`, `metadata`, …) are ignored.

use std::collections::HashMap;

use serde::Deserialize;

use crate::http::ApiError;

/// `stop`: one string or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// A single stop string.
    One(String),
    /// Up to four stop strings.
    Many(Vec<String>),
}

/// A message's `content`: text, or a list of content parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts; only `text` parts are understood.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    /// The part's type; only `text` is supported.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// One chat message.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message text; only an assistant message that calls tools may
    /// go without.
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant message's tool calls (OpenAI's shape).
    #[serde(default)]
    pub tool_calls: Option<serde_json::Value>,
    /// A tool message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The author's name, or a tool message's function name.
    #[serde(default)]
    pub name: Option<String>,
    /// An assistant message's thinking, carried back by some clients.
    #[serde(default)]
    pub reasoning_content: Option<String>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the token counts.
    #[serde(default)]
    pub include_usage: bool,
}

/// `response_format`.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// With `json_schema`: the schema and its name.
    #[serde(default)]
    pub json_schema: Option<JsonSchemaFormat>,
}

/// `response_format.json_schema` (its `name` and `strict` are accepted and
/// ignored: the output always follows the schema).
#[derive(Debug, Clone, Deserialize)]
pub struct JsonSchemaFormat {
    /// The JSON schema the output must follow.
    #[serde(default)]
    pub schema: Option<serde_json::Value>,
}

/// llama-server's sampler fields beyond OpenAI's, with its names.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Extra {
    /// Top-k (0: off).
    pub top_k: Option<usize>,
    /// Min-p (0: off).
    pub min_p: Option<f32>,
    /// Locally typical sampling (1: off).
    pub typical_p: Option<f32>,
    /// Top-n-sigma (<= 0: off).
    pub top_n_sigma: Option<f32>,
    /// Repeat penalty (1: off).
    pub repeat_penalty: Option<f32>,
    /// Window of the repeat, presence and frequency penalties.
    pub repeat_last_n: Option<usize>,
    /// DRY multiplier (0: off).
    pub dry_multiplier: Option<f32>,
    /// DRY base.
    pub dry_base: Option<f32>,
    /// DRY allowed length.
    pub dry_allowed_length: Option<usize>,
    /// DRY window (-1: all).
    pub dry_penalty_last_n: Option<i32>,
    /// DRY sequence breakers.
    pub dry_sequence_breakers: Option<Vec<String>>,
    /// XTC probability (0: off).
    pub xtc_probability: Option<f32>,
    /// XTC threshold.
    pub xtc_threshold: Option<f32>,
    /// Dynamic temperature range (0: off).
    pub dynatemp_range: Option<f32>,
    /// Dynamic temperature exponent.
    pub dynatemp_exponent: Option<f32>,
    /// Mirostat: 0, 1 or 2.
    pub mirostat: Option<u8>,
    /// Mirostat target entropy.
    pub mirostat_tau: Option<f32>,
    /// Mirostat learning rate.
    pub mirostat_eta: Option<f32>,
    /// Stage order: a list of names or one string of names or letters.
    pub samplers: Option<serde_json::Value>,
    /// A GBNF grammar for the output.
    pub grammar: Option<String>,
    /// A JSON schema for the output.
    pub json_schema: Option<serde_json::Value>,
}

/// The sampling fields shared by chat and text completions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Sampling {
    /// The model to use: one the server lists; with one model served,
    /// any name (or none) means it unless `--strict-model`.
    #[serde(default)]
    pub model: String,
    /// How long the model stays loaded after this request (Ollama's
    /// `keep_alive`, as an extension: seconds or `"5m"`; 0 unloads it
    /// once answered, negative keeps it).
    #[serde(default)]
    pub keep_alive: Option<serde_json::Value>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Most tokens to generate (legacy name).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most tokens to generate.
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Softmax temperature, 0 to 2; 0 is greedy.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass, (0, 1].
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Stop strings.
    #[serde(default)]
    pub stop: Option<Stop>,
    /// Seed of the sampler's random generator.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Number of choices, each sampled with its own generator (seed +
    /// choice index); the prompt is prefilled once for all of them.
    #[serde(default)]
    pub n: Option<u32>,
    /// Presence penalty, -2 to 2: subtracted once from the logit of every
    /// token among the last 64 of the sequence.
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// Frequency penalty, -2 to 2: subtracted from a token's logit once per
    /// occurrence among the last 64 tokens of the sequence.
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Token id (a decimal string) → bias in [-100, 100], added to that
    /// token's logit before everything else.
    #[serde(default)]
    pub logit_bias: Option<HashMap<String, f32>>,
    /// Return the log probability of every generated token (chat: `true`;
    /// the text completions' numeric form is refused).
    #[serde(default)]
    pub logprobs: Option<serde_json::Value>,
    /// How many alternatives per token, 0 to 20; needs `logprobs`.
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    /// Output format: `text`, `json_object` or `json_schema`.
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    /// Timings with every streamed piece of text (llama-server's).
    #[serde(default)]
    pub timings_per_token: bool,
    /// Progress reports while a streamed prompt is evaluated
    /// (llama-server's).
    #[serde(default)]
    pub return_progress: bool,
    /// llama-server's extra sampler fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Sampling {
    /// What the request wants reported while it streams.
    pub fn report(&self) -> crate::events::Report {
        crate::events::Report::streamed(self.stream, self.return_progress, self.timings_per_token)
    }
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// Functions the model may call.
    #[serde(default)]
    pub tools: Option<Vec<crate::tools::Tool>>,
    /// `none`, `auto`, `required` or a named function.
    #[serde(default)]
    pub tool_choice: Option<serde_json::Value>,
    /// Whether one answer may hold several calls (default true).
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// `none` keeps thinking in the content; `deepseek` or `auto` (the
    /// default) moves it to `reasoning_content`.
    #[serde(default)]
    pub reasoning_format: Option<String>,
    /// Extra chat template variables (e.g. `enable_thinking`).
    #[serde(default)]
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Whether the prompt ends with the assistant's opening (default:
    /// yes); `false` with a last assistant message continues it.
    #[serde(default)]
    pub add_generation_prompt: Option<bool>,
    /// vLLM's and transformers' name for continuing a last assistant
    /// message (which minfer does anyway, as llama-server does).
    #[serde(default)]
    pub continue_final_message: Option<bool>,
    /// Fields this server does not serve, refused by name.
    #[serde(flatten)]
    pub refused: Refused,
    /// Everything else.
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// Request fields that would change the answer and that this server does
/// not serve: refused with a 400 naming them, never ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Refused {
    /// The legacy form of `tools`.
    pub functions: Option<serde_json::Value>,
    /// The legacy form of `tool_choice`.
    pub function_call: Option<serde_json::Value>,
    /// Audio output.
    pub audio: Option<serde_json::Value>,
    /// Output modalities; only `["text"]` is served.
    pub modalities: Option<serde_json::Value>,
    /// Predicted outputs.
    pub prediction: Option<serde_json::Value>,
    /// Web search.
    pub web_search_options: Option<serde_json::Value>,
}

impl Refused {
    /// The first refused field that is set.
    ///
    /// # Errors
    /// A 400 naming it, with `unsupported_parameter`.
    pub fn check(&self) -> Result<(), ApiError> {
        let set = |v: &Option<serde_json::Value>| v.as_ref().is_some_and(|v| !v.is_null());
        if set(&self.functions) {
            return Err(ApiError::unsupported("functions", "send `tools` instead"));
        }
        if set(&self.function_call) {
            return Err(ApiError::unsupported(
                "function_call",
                "send `tool_choice` instead",
            ));
        }
        if set(&self.audio) {
            return Err(ApiError::unsupported("audio", "text output only"));
        }
        if let Some(m) = self.modalities.as_ref().filter(|v| !v.is_null()) {
            if m != &serde_json::json!(["text"]) {
                return Err(ApiError::unsupported("modalities", "only [\"text\"]"));
            }
        }
        if set(&self.prediction) {
            return Err(ApiError::unsupported("prediction", "no predicted outputs"));
        }
        if set(&self.web_search_options) {
            return Err(ApiError::unsupported("web_search_options", "no web search"));
        }
        Ok(())
    }
}

/// `prompt` of a text completion: a string, a list of strings, token ids
/// or a list of lists of token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// The prompt.
    Text(String),
    /// A batch of prompts, one choice (or `n`) each.
    Batch(Vec<String>),
    /// One prompt as token ids.
    Tokens(Vec<u32>),
    /// Several prompts as token ids.
    TokenBatch(Vec<Vec<u32>>),
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// The prompt, sent to the model as it is.
    pub prompt: Prompt,
    /// Echo the prompt before the completion.
    #[serde(default)]
    pub echo: bool,
    /// Text after the completion: the prompt becomes a fill-in-the-middle
    /// one where the model has the tokens for it.
    #[serde(default)]
    pub suffix: Option<String>,
    /// Everything else.
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// Concatenated text of a message.
pub fn message_text(m: &Message) -> Result<String, ApiError> {
    match &m.content {
        None => Ok(String::new()),
        Some(Content::Text(t)) => Ok(t.clone()),
        Some(Content::Parts(parts)) => {
            let mut s = String::new();
            for p in parts {
                if p.kind != "text" {
                    return Err(ApiError::unsupported(
                        "messages",
                        &format!("content parts of type `{}`; only `text`", p.kind),
                    ));
                }
                s.push_str(p.text.as_deref().unwrap_or(""));
            }
            Ok(s)
        }
    }
}
