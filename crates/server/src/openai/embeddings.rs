//! Embeddings over HTTP: OpenAI's `/v1/embeddings`, and what Ollama's
//! embedding endpoints share with it. Requests are parsed and tokenized
//! here; the vectors are computed on the model thread between two steps
//! of the running generations ([`Cmd::Embed`]), every input as its own
//! sequence, removed afterwards.
//!
//! The pooling is the model's own (`{arch}.pooling_type`). A plain decoder
//! LLM has none, which in llama.cpp means one vector per token; an API
//! answers one vector per input, so such a model is pooled by its last
//! token, the only one whose state has seen the whole text.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use minfer_engine::{EngineError, Pooling};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::{parse_off_thread, ApiError};
use crate::models::Hold;
use crate::models::Served;
use crate::state::Shared;
use crate::worker::Cmd;

type St = State<Arc<Shared>>;

/// One input: text to tokenize, or token ids as given.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Tokenized as `minfer embed` and llama-server do (special tokens
    /// parsed, the model's BOS/EOS rule applied).
    Text(String),
    /// Token ids, used as they are.
    Tokens(Vec<u32>),
}

/// How the vectors are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON numbers.
    Float,
    /// The little-endian f32 bytes, base64-encoded.
    Base64,
}

/// The body of `POST /v1/embeddings`; `user` and other fields are
/// ignored.
#[derive(Debug, Deserialize)]
pub struct OpenAiRequest {
    /// The model (any name is the served model unless `--strict-model`).
    #[serde(default)]
    pub model: String,
    /// A string, a list of strings, a list of token ids or a list of lists
    /// of token ids.
    pub input: Value,
    /// `float` (the default) or `base64`.
    #[serde(default)]
    pub encoding_format: Option<String>,
    /// The output width: only the model's own is possible.
    #[serde(default)]
    pub dimensions: Option<u64>,
}

const INPUT_SHAPES: &str =
    "`input` must be a string, a list of strings, a list of token ids or a list of lists of token ids";

/// OpenAI's `input`.
///
/// # Errors
/// 400 naming `input` for any other shape, an empty list, or a token id
/// that is not a `u32`.
pub fn parse_input(v: &Value) -> Result<Vec<Input>, ApiError> {
    let bad = || ApiError::bad_param("input", INPUT_SHAPES);
    let ids = |items: &[Value]| -> Result<Vec<u32>, ApiError> {
        items
            .iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(bad)
            })
            .collect()
    };
    match v {
        Value::String(s) => Ok(vec![Input::Text(s.clone())]),
        Value::Array(items) if items.is_empty() => {
            Err(ApiError::bad_param("input", "`input` is an empty list"))
        }
        Value::Array(items) => match &items[0] {
            Value::String(_) => items
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(|s| Input::Text(s.to_string()))
                        .ok_or_else(bad)
                })
                .collect(),
            Value::Number(_) => Ok(vec![Input::Tokens(ids(items)?)]),
            Value::Array(_) => items
                .iter()
                .map(|x| x.as_array().ok_or_else(bad).and_then(|a| ids(a)))
                .map(|r| r.map(Input::Tokens))
                .collect(),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// `encoding_format`.
///
/// # Errors
/// 400 naming it for anything but `float` and `base64`.
pub fn parse_encoding(v: Option<&str>) -> Result<Encoding, ApiError> {
    match v {
        None | Some("float") => Ok(Encoding::Float),
        Some("base64") => Ok(Encoding::Base64),
        Some(other) => Err(ApiError::bad_param(
            "encoding_format",
            format!("`encoding_format` must be `float` or `base64`, not `{other}`"),
        )),
    }
}

/// `dimensions`: accepted only as the model's own width.
///
/// # Errors
/// 400 naming it for any other value.
pub fn check_dimensions(dimensions: Option<u64>, n_embd: usize) -> Result<(), ApiError> {
    match dimensions {
        Some(d) if d != n_embd as u64 => Err(ApiError::bad_param(
            "dimensions",
            format!(
                "`dimensions` {d} is not possible: this model's embeddings have {n_embd} dimensions \
                 and cannot be shortened"
            ),
        )),
        _ => Ok(()),
    }
}

/// The pooling the server uses for `served`: the model's own, its last
/// token when it has none.
///
/// # Errors
/// 400 for a reranker (rank pooling has no vector to return); 500 when
/// the file's pooling type is unreadable.
pub fn pooling(served: &Served) -> Result<Pooling, ApiError> {
    match served.loaded.pooling() {
        Ok(Pooling::None) => Ok(Pooling::Last),
        Ok(Pooling::Rank) => Err(ApiError::bad_request(
            "this model is a reranker (rank pooling): it scores pairs and has no embeddings",
        )),
        Ok(p) => Ok(p),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}

/// Token ids of every input.
pub fn tokenize(served: &Served, inputs: &[Input]) -> Vec<Vec<u32>> {
    inputs
        .iter()
        .map(|i| match i {
            Input::Text(t) => served.loaded.tokenize(t),
            Input::Tokens(ids) => ids.clone(),
        })
        .collect()
}

/// The engine's refusal of an embedding as the API's error.
pub fn engine_error(e: EngineError) -> ApiError {
    match e {
        EngineError::EmptyInput { index } => {
            ApiError::bad_param("input", format!("input {index} has no tokens"))
        }
        EngineError::InputTooLong {
            index,
            tokens,
            n_ctx,
        } => ApiError::bad_param(
            "input",
            format!(
                "input {index} has {tokens} tokens, more than this server's context of {n_ctx} tokens"
            ),
        )
        .with_code("context_length_exceeded"),
        EngineError::TokenOutOfRange { .. } | EngineError::InvalidArgument(_) => {
            ApiError::bad_param("input", e.to_string())
        }
        EngineError::CacheFull { .. } | EngineError::TooManySequences { .. } => {
            ApiError::unavailable(format!("the server is busy: {e}; retry later"))
        }
        other => ApiError::internal(format!("the engine failed: {other}")),
    }
}

/// Computes the embeddings on the model thread, scaled to unit length
/// when `normalize`.
///
/// # Errors
/// 503 while shutting down or when the running generations leave no room;
/// the errors of [`engine_error`].
pub async fn embed(
    shared: &Shared,
    model: Hold,
    inputs: Vec<Vec<u32>>,
    pooling: Pooling,
    normalize: bool,
) -> Result<Vec<Vec<f32>>, ApiError> {
    if shared.draining.load(Relaxed) {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    let (reply, rx) = tokio::sync::oneshot::channel();
    model.model().send(Cmd::Embed {
        inputs,
        pooling,
        normalize,
        reply,
    });
    match rx.await {
        Ok(r) => r.map_err(engine_error),
        Err(_) => Err(ApiError::unavailable("the model thread has stopped")),
    }
}

/// Base64 (RFC 4648, padded) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One vector of OpenAI's response.
#[derive(Debug, Serialize)]
pub struct OpenAiEmbedding<'a> {
    object: &'static str,
    index: usize,
    embedding: Encoded<'a>,
}

/// A vector as numbers or as base64 text.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Encoded<'a> {
    /// JSON numbers (f32's shortest round-trip text).
    Float(&'a [f32]),
    /// Base64 of the little-endian f32 bytes.
    Base64(String),
}

/// OpenAI's token counts.
#[derive(Debug, Serialize)]
pub struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

/// OpenAI's response body. Serialized from the f32 values themselves, so
/// each prints as the shortest text that reads back as the same f32.
#[derive(Debug, Serialize)]
pub struct OpenAiResponse<'a> {
    object: &'static str,
    data: Vec<OpenAiEmbedding<'a>>,
    model: &'a str,
    usage: Usage,
}

/// OpenAI's response for `vectors`.
pub fn openai_response<'a>(
    model: &'a str,
    vectors: &'a [Vec<f32>],
    encoding: Encoding,
    prompt_tokens: usize,
) -> OpenAiResponse<'a> {
    let data = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| OpenAiEmbedding {
            object: "embedding",
            index,
            embedding: match encoding {
                Encoding::Float => Encoded::Float(v),
                Encoding::Base64 => {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    Encoded::Base64(base64(&bytes))
                }
            },
        })
        .collect();
    OpenAiResponse {
        object: "list",
        data,
        model,
        usage: Usage {
            prompt_tokens,
            total_tokens: prompt_tokens,
        },
    }
}

/// `POST /v1/embeddings`.
pub async fn handle(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let (encoding, model, ids, pooling) =
        parse_off_thread(&shared, body, move |s, req: OpenAiRequest| {
            let model = s.model(&req.model)?.hold();
            let served = model.model().served()?;
            let encoding = parse_encoding(req.encoding_format.as_deref())?;
            check_dimensions(req.dimensions, served.loaded.model().hparams.n_embd)?;
            let inputs = parse_input(&req.input)?;
            let (ids, pooling) = (tokenize(served, &inputs), pooling(served)?);
            Ok((encoding, model, ids, pooling))
        })
        .await?;
    let prompt_tokens = ids.iter().map(Vec::len).sum();
    let id = model.model().served()?.id.clone();
    let vectors = embed(&shared, model, ids, pooling, true).await?;
    let body = openai_response(&id, &vectors, encoding, prompt_tokens);
    Ok(Json(body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inputs_of_every_shape() {
        assert_eq!(
            parse_input(&json!("hi")).unwrap(),
            [Input::Text("hi".into())]
        );
        assert_eq!(
            parse_input(&json!(["a", "b"])).unwrap(),
            [Input::Text("a".into()), Input::Text("b".into())]
        );
        assert_eq!(
            parse_input(&json!([1, 2, 3])).unwrap(),
            [Input::Tokens(vec![1, 2, 3])]
        );
        assert_eq!(
            parse_input(&json!([[1], [2, 3]])).unwrap(),
            [Input::Tokens(vec![1]), Input::Tokens(vec![2, 3])]
        );
        for bad in [
            json!([]),
            json!(["a", 1]),
            json!([1, -1]),
            json!([1.5]),
            json!([[1], "a"]),
            json!({"a": 1}),
            json!(null),
            json!([5_000_000_000u64]),
        ] {
            let e = parse_input(&bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("input"), "{bad}");
        }
    }

    #[test]
    fn encoding_and_dimensions() {
        assert_eq!(parse_encoding(None).unwrap(), Encoding::Float);
        assert_eq!(parse_encoding(Some("base64")).unwrap(), Encoding::Base64);
        let e = parse_encoding(Some("int8")).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("encoding_format"));
        assert!(check_dimensions(None, 64).is_ok());
        assert!(check_dimensions(Some(64), 64).is_ok());
        let e = check_dimensions(Some(32), 64).unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        assert_eq!(e.param.as_deref(), Some("dimensions"));
        assert!(e.message.contains("dimensions"));
    }

    #[test]
    fn base64_matches_rfc_4648() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), enc);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn openai_shape() {
        let vectors = [vec![1.0, 0.0]];
        let v = serde_json::to_value(openai_response("m", &vectors, Encoding::Base64, 3)).unwrap();
        assert_eq!(v["object"], "list");
        assert_eq!(v["data"][0]["object"], "embedding");
        assert_eq!(v["data"][0]["index"], 0);
        assert_eq!(v["data"][0]["embedding"], "AACAPwAAAAA=");
        assert_eq!(v["usage"]["prompt_tokens"], 3);
        assert_eq!(v["usage"]["total_tokens"], 3);
        let vectors = [vec![0.1f32]];
        let r = openai_response("m", &vectors, Encoding::Float, 1);
        // f32 text, not the f64 widening of it.
        assert!(serde_json::to_string(&r).unwrap().contains("[0.1]"));
    }
}
