//! The HTTP endpoints: request parsing and checks happen here, in the
//! handler; generation happens on the model thread.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::api::{self, ChatRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest};
use crate::error::ApiError;
use crate::respond::{self, Api, Shape};
use crate::state::{Served, Shared};
use crate::worker::Part;
use crate::{anthropic, chat, completion, embeddings, responses};

type St = State<Arc<Shared>>;

/// The router with every endpoint, authentication, CORS and request
/// counting. Every OpenAI route is served with and without the `/v1`
/// prefix, as llama-server does, for clients configured with a bare base
/// URL.
pub fn router(shared: Arc<Shared>) -> Router {
    let mut r = Router::new();
    for prefix in ["/v1", ""] {
        r = r
            .route(&format!("{prefix}/chat/completions"), post(chat))
            .route(&format!("{prefix}/completions"), post(completions))
            .route(&format!("{prefix}/models"), get(models))
            .route(&format!("{prefix}/models/{{id}}"), get(model))
            .route(&format!("{prefix}/messages"), post(anthropic::messages))
            .route(
                &format!("{prefix}/messages/count_tokens"),
                post(anthropic::count_tokens),
            )
            .route(&format!("{prefix}/responses"), post(responses::responses))
            .route(&format!("{prefix}/embeddings"), post(embeddings::openai));
    }
    r = crate::ollama::routes(r)
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_legacy));
    r.route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .fallback(fallback)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .route("/", get(crate::page::index))
        .with_state(shared)
}

/// The endpoint a path is counted under in `/metrics`.
fn endpoint(path: &str) -> String {
    let p = path.strip_prefix("/v1").unwrap_or(path);
    match p {
        "/chat/completions"
        | "/completions"
        | "/models"
        | "/messages"
        | "/messages/count_tokens"
        | "/responses"
        | "/embeddings" => format!("/v1{p}"),
        "/health" | "/metrics" | "/tokenize" | "/detokenize" if p == path => p.to_string(),
        _ if p == path && crate::ollama::PATHS.contains(&p) => p.to_string(),
        "/api/embed" | "/api/embeddings" if p == path => p.to_string(),
        _ if p.starts_with("/models/") => "/v1/models/{id}".to_string(),
        _ => "other".to_string(),
    }
}

/// Answers CORS preflights (before authentication: browsers send them
/// without credentials), checks the API key (every endpoint but
/// `/health`), adds the CORS headers, and counts the request under its
/// endpoint and status.
async fn guard(State(shared): St, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let endpoint = endpoint(&path);
    let cors = &shared.cors;
    if let Some(resp) = cors.preflight(req.method(), req.headers()) {
        shared.metrics.request(&endpoint, resp.status().as_u16());
        return resp;
    }
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut resp = match &shared.cfg.api_key {
        Some(key) if path != "/health" && !authorized(&req, key) => {
            if anthropic::is_path(&path) {
                anthropic::error_response(ApiError::unauthorized())
            } else {
                crate::ollama::error_response(&path, ApiError::unauthorized())
            }
        }
        _ => next.run(req).await,
    };
    cors.decorate(origin.as_ref(), &mut resp);
    shared.metrics.request(&endpoint, resp.status().as_u16());
    resp
}

/// Whether the request carries `key`: `Authorization: Bearer KEY`, or
/// `x-api-key: KEY` as Anthropic's clients send it.
fn authorized(req: &Request, key: &str) -> bool {
    let h = req.headers();
    let bearer = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let given = match bearer.or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok())) {
        Some(g) => g,
        None => return false,
    };
    // Compared in constant time: the key's bytes do not leak through timing.
    given.len() == key.len()
        && given
            .bytes()
            .zip(key.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

pub(crate) async fn read_body(shared: &Shared, body: Body) -> Result<axum::body::Bytes, ApiError> {
    let limit = shared.cfg.max_body;
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

/// Checks that the prompt leaves room to generate in the context window.
pub(crate) fn check_prompt(ids: &[u32], n_ctx: u32, param: &str) -> Result<(), ApiError> {
    if ids.is_empty() {
        return Err(ApiError::bad_param(param, "the prompt is empty"));
    }
    if ids.len() >= n_ctx as usize {
        return Err(ApiError::bad_param(
            param,
            format!(
                "the prompt has {} tokens, which does not fit in this server's context of {n_ctx} tokens",
                ids.len()
            ),
        )
        .with_code("context_length_exceeded"));
    }
    Ok(())
}

/// Runs CPU-heavy request work (parsing, template rendering, tokenizing a
/// body of up to `--max-body`) off the async workers, so that other
/// connections keep being served meanwhile.
pub(crate) async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::internal("preparing the prompt failed"))?
}

async fn chat(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let body = read_body(&shared, body).await?;
    let s = shared.clone();
    let (req, prep) = off_thread(move || {
        let req: ChatRequest = api::parse(&body)?;
        let served = s.served()?;
        served.check_model(&req.sampling.model)?;
        let prep = chat::prepare(served, &req, s.cfg.n_parallel)?;
        check_prompt(&prep.ids, s.cfg.engine.n_ctx, "messages")?;
        Ok((req, prep))
    })
    .await?;
    let served = shared.served()?;
    let logprobs = prep.cfgs[0].logprobs.is_some();
    let n = prep.cfgs.len();
    let prompt_tokens = prep.ids.len();
    let (ticket, rx) = shared.submit(vec![Part {
        prompt: prep.ids,
        cfgs: prep.cfgs,
    }])?;
    let shape = Shape::new(
        Api::Chat,
        ticket.id(),
        &served.id,
        req.sampling.include_usage(),
    )
    .with_logprobs(logprobs)
    .with_choices(n, prompt_tokens)
    .with_split(prep.split);
    Ok(if req.sampling.stream {
        respond::stream(shape, (ticket, rx), shared.cfg.keep_alive)
    } else {
        respond::collect(shape, ticket, rx).await
    })
}

async fn completions(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let body = read_body(&shared, body).await?;
    let s = shared.clone();
    let (req, prep) = off_thread(move || {
        let req: CompletionRequest = api::parse(&body)?;
        let served = s.served()?;
        served.check_model(&req.sampling.model)?;
        let prep = completion::prepare(served, &req, s.cfg.n_parallel, s.cfg.engine.n_ctx)?;
        Ok((req, prep))
    })
    .await?;
    let served = shared.served()?;
    let n: usize = prep.parts.iter().map(|p| p.cfgs.len()).sum();
    let prompt_tokens = prep.parts.iter().map(|p| p.prompt.len()).sum();
    let (ticket, rx) = shared.submit_scored(prep.parts, prep.score)?;
    let shape = Shape::new(
        Api::Text,
        ticket.id(),
        &served.id,
        req.sampling.include_usage(),
    )
    .with_logprobs(prep.logprobs)
    .with_choices(n, prompt_tokens)
    .with_echo(prep.echo);
    Ok(if req.sampling.stream {
        respond::stream(shape, (ticket, rx), shared.cfg.keep_alive)
    } else {
        respond::collect(shape, ticket, rx).await
    })
}

fn model_object(served: &Served) -> serde_json::Value {
    json!({
        "id": served.id,
        "object": "model",
        "created": 0,
        "owned_by": "minfer",
    })
}

async fn models(State(shared): St) -> Result<Response, ApiError> {
    let served = shared.served()?;
    Ok(Json(json!({"object": "list", "data": [model_object(served)]})).into_response())
}

async fn model(State(shared): St, Path(id): Path<String>) -> Result<Response, ApiError> {
    let served = shared.served()?;
    served.check_model(&id)?;
    Ok(Json(model_object(served)).into_response())
}

/// 200 once the model is loaded; 503 while it loads and from the start of
/// a shutdown on, so that a router's health check takes the replica out
/// while it drains.
async fn health(State(shared): St) -> Response {
    let status = if shared.served.get().is_none() {
        "loading"
    } else if shared.draining.load(std::sync::atomic::Ordering::Relaxed) {
        "draining"
    } else {
        return Json(json!({"status": "ok"})).into_response();
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": status })),
    )
        .into_response()
}

async fn metrics(State(shared): St) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        shared.metrics.render(),
    )
        .into_response()
}

async fn tokenize(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let body = read_body(&shared, body).await?;
    let req: TokenizeRequest = api::parse(&body)?;
    let served = shared.served()?;
    let ids = served
        .loaded
        .tokenizer()
        .encode(&req.content, req.add_special, true);
    Ok(Json(json!({"tokens": ids})).into_response())
}

async fn detokenize(State(shared): St, body: Body) -> Result<Response, ApiError> {
    let body = read_body(&shared, body).await?;
    let req: DetokenizeRequest = api::parse(&body)?;
    let served = shared.served()?;
    let tok = served.loaded.tokenizer();
    let n_vocab = tok.n_vocab();
    if let Some(bad) = req.tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token id {bad} is outside the vocabulary of {n_vocab} tokens"),
        ));
    }
    let bytes = tok.decode(&req.tokens, true);
    Ok(Json(json!({"content": String::from_utf8_lossy(&bytes)})).into_response())
}

async fn wrong_method(req: Request) -> ApiError {
    ApiError::bad_request(format!(
        "{} does not accept {}",
        req.uri().path(),
        req.method()
    ))
    .with_status(StatusCode::METHOD_NOT_ALLOWED)
}

async fn fallback(req: Request) -> ApiError {
    ApiError::not_found(req.uri().path())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::metrics::Metrics;
    use crate::testing::request;
    use crate::ServerConfig;

    /// A server whose model never finishes loading.
    async fn loading_server(
        key: Option<&str>,
    ) -> (String, std::sync::mpsc::Receiver<crate::worker::Cmd>) {
        let cfg = ServerConfig {
            model: "m".into(),
            n_parallel: 1,
            queue: 1,
            max_body: 1024,
            api_key: key.map(str::to_string),
            drain_timeout: Duration::from_secs(1),
            keep_alive: Duration::from_secs(5),
            alias: None,
            strict_model: true,
            cors_origins: Vec::new(),
            chat_template: None,
            engine: minfer_engine::EngineConfig::default(),
            speculation: None,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared::new(cfg, tx, Arc::new(Metrics::default())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, router(shared)).await });
        (addr, rx)
    }

    #[tokio::test]
    async fn while_loading_health_is_503_and_requests_get_503() {
        let (addr, _rx) = loading_server(None).await;
        let (status, body) = request(&addr, "GET", "/health", None, "").await;
        assert_eq!((status, body.as_str()), (503, r#"{"status":"loading"}"#));
        let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let (status, body) = request(&addr, "POST", "/v1/chat/completions", None, chat).await;
        assert_eq!(status, 503);
        assert!(
            body.contains("loading") && body.contains("server_error"),
            "{body}"
        );
        // Checks that need no model still answer.
        let (status, _) = request(&addr, "POST", "/v1/chat/completions", None, "{").await;
        assert_eq!(status, 400);
        let (status, body) =
            request(&addr, "POST", "/v1/completions", None, &"x".repeat(2000)).await;
        assert_eq!(status, 413, "{body}");
        let (status, body) = request(&addr, "GET", "/metrics", None, "").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("minfer_requests_total{endpoint=\"/health\",status=\"503\"} 1"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn api_key_guards_everything_but_health() {
        let (addr, _rx) = loading_server(Some("k3y")).await;
        assert_eq!(request(&addr, "GET", "/health", None, "").await.0, 503);
        for (method, path) in [
            ("GET", "/v1/models"),
            ("GET", "/metrics"),
            ("POST", "/v1/chat/completions"),
            ("POST", "/tokenize"),
            ("GET", "/nowhere"),
        ] {
            let (status, body) = request(&addr, method, path, None, "").await;
            assert_eq!(status, 401, "{path}");
            assert!(body.contains("authentication_error"), "{body}");
            assert_eq!(
                request(&addr, method, path, Some("k3y-not"), "").await.0,
                401
            );
        }
        assert_eq!(
            request(&addr, "GET", "/metrics", Some("k3y"), "").await.0,
            200
        );
        assert_eq!(
            request(&addr, "GET", "/v1/models", Some("k3y"), "").await.0,
            503
        );
    }
}
