//! Ollama's API beside the OpenAI one, on the same port, so that tools
//! written for Ollama work unchanged: `/api/chat` and `/api/generate`
//! (NDJSON streams by default), `/api/tags`, `/api/show`, `/api/ps` and
//! `/api/version`, with errors as `{"error": "message"}`.
//!
//! Requests are translated into the OpenAI side's (see [`request`]), so
//! templates, tools, constraints and checks behave the same on both.

mod info;
mod options;
mod reply;
mod request;
mod time;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post, MethodRouter};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::api;
use crate::error::ApiError;
use crate::routes::{off_thread, read_body};
use crate::state::{Served, Shared};
use crate::worker::Part;
use reply::{Kind, Reply};
use request::{ChatBody, GenerateBody, Limits, Prepared};

type St = State<Arc<Shared>>;

/// The Ollama endpoints served, each counted under its path in `/metrics`.
pub const PATHS: &[&str] = &[
    "/api/chat",
    "/api/generate",
    "/api/tags",
    "/api/show",
    "/api/ps",
    "/api/version",
];

/// An error in Ollama's shape: the status and `{"error": "message"}`,
/// which Ollama's clients raise as their `ResponseError`.
#[derive(Debug)]
pub struct OllamaError(pub ApiError);

impl From<ApiError> for OllamaError {
    fn from(e: ApiError) -> OllamaError {
        OllamaError(e)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        (self.0.status, Json(json!({"error": self.0.message}))).into_response()
    }
}

/// `e` as the API of `path` shapes errors: Ollama's under `/api/`, else
/// OpenAI's.
pub fn error_response(path: &str, e: ApiError) -> Response {
    if path.starts_with("/api/") {
        OllamaError(e).into_response()
    } else {
        e.into_response()
    }
}

/// Adds the Ollama endpoints to `router`; other paths under `/api/` get
/// an Ollama-shaped 404.
pub fn routes(router: Router<Arc<Shared>>) -> Router<Arc<Shared>> {
    let only = |m: MethodRouter<Arc<Shared>>| m.fallback(wrong_method);
    router
        .route("/api/chat", only(post(chat)))
        .route("/api/generate", only(post(generate)))
        .route("/api/tags", only(get(tags)))
        .route("/api/show", only(post(show)))
        .route("/api/ps", only(get(ps)))
        .route("/api/version", only(get(version)))
        .route("/api/{*rest}", any(unknown))
}

/// Checks a request's model name: required, as in Ollama; any name is the
/// served model unless `--strict-model`, and `name:latest` is `name`
/// (Ollama's default tag, which `/api/tags` lists).
pub(crate) fn check_model(served: &Served, name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::bad_param("model", "model is required"));
    }
    let bare = name.strip_suffix(":latest").unwrap_or(name);
    if served.check_model(name).is_ok() || served.check_model(bare).is_ok() {
        Ok(())
    } else {
        Err(
            ApiError::bad_param("model", format!("model '{name}' not found"))
                .with_status(StatusCode::NOT_FOUND),
        )
    }
}

fn limits(shared: &Shared) -> Limits {
    Limits {
        n_parallel: shared.cfg.n_parallel,
        n_ctx: shared.cfg.engine.n_ctx,
    }
}

/// Hands a prepared request to the model thread and answers it.
async fn run(
    shared: &Arc<Shared>,
    kind: Kind,
    model: &str,
    stream: bool,
    prep: Prepared,
    started: Instant,
) -> Result<Response, OllamaError> {
    let (ticket, rx) = shared.submit(vec![Part {
        prompt: prep.ids,
        cfgs: vec![prep.cfg],
    }])?;
    let times = (started, Instant::now());
    let reply = Reply::new(kind, model, &prep.split, ticket.id(), times);
    Ok(if stream {
        reply::stream(reply, ticket, rx)
    } else {
        reply::collect(reply, ticket, rx).await
    })
}

async fn chat(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let body = read_body(&shared, body).await?;
    let s = shared.clone();
    let (req, prep) = off_thread(move || {
        let req: ChatBody = api::parse(&body)?;
        let served = s.served()?;
        check_model(served, &req.model)?;
        if req.messages.is_empty() {
            return Ok((req, None));
        }
        let prep = request::prepare_chat(served, &req, limits(&s))?;
        Ok((req, Some(prep)))
    })
    .await?;
    let Some(prep) = prep else {
        return Ok(reply::loaded(Kind::Chat, &req.model));
    };
    let stream = req.common.streams();
    run(&shared, Kind::Chat, &req.model, stream, prep, started).await
}

async fn generate(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let body = read_body(&shared, body).await?;
    let s = shared.clone();
    let (req, prep) = off_thread(move || {
        let req: GenerateBody = api::parse(&body)?;
        let served = s.served()?;
        check_model(served, &req.model)?;
        if req.prompt.is_empty() && req.suffix.as_deref().unwrap_or("").is_empty() {
            return Ok((req, None));
        }
        let prep = request::prepare_generate(served, &req, limits(&s))?;
        Ok((req, Some(prep)))
    })
    .await?;
    let Some(prep) = prep else {
        return Ok(reply::loaded(Kind::Generate, &req.model));
    };
    let stream = req.common.streams();
    run(&shared, Kind::Generate, &req.model, stream, prep, started).await
}

async fn tags(State(shared): St) -> Result<Response, OllamaError> {
    Ok(Json(info::tags(shared.served()?)).into_response())
}

async fn ps(State(shared): St) -> Result<Response, OllamaError> {
    let n_ctx = shared.cfg.engine.n_ctx;
    Ok(Json(info::ps(shared.served()?, n_ctx)).into_response())
}

/// `POST /api/show`'s body (`name` is the older spelling of `model`).
#[derive(Debug, Deserialize)]
struct ShowBody {
    #[serde(default)]
    model: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    verbose: bool,
}

async fn show(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let body = read_body(&shared, body).await?;
    let req: ShowBody = api::parse(&body)?;
    let served = shared.served()?;
    let name = if req.model.is_empty() {
        &req.name
    } else {
        &req.model
    };
    check_model(served, name)?;
    let n_ctx = shared.cfg.engine.n_ctx;
    Ok(Json(info::show(served, req.verbose, n_ctx)).into_response())
}

/// `GET /api/version`: minfer's version (Ollama's clients ask for one).
async fn version() -> Response {
    Json(json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}

async fn unknown(req: Request) -> OllamaError {
    OllamaError(
        ApiError::bad_request(format!(
        "minfer serve has no {}: it serves one model, loaded at start, and of Ollama's API only {}",
        req.uri().path(),
        PATHS.join(", ")
    ))
        .with_status(StatusCode::NOT_FOUND),
    )
}

async fn wrong_method(req: Request) -> OllamaError {
    OllamaError(
        ApiError::bad_request(format!(
            "{} does not accept {}",
            req.uri().path(),
            req.method()
        ))
        .with_status(StatusCode::METHOD_NOT_ALLOWED),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::Metrics;
    use crate::ServerConfig;

    /// A server whose model never finishes loading, with an API key.
    async fn loading_server() -> String {
        let cfg = ServerConfig {
            model: "m".into(),
            n_parallel: 1,
            queue: 1,
            max_body: 1024,
            api_key: Some("k".into()),
            drain_timeout: Duration::from_secs(1),
            keep_alive: Duration::from_secs(5),
            alias: None,
            strict_model: false,
            cors_origins: Vec::new(),
            chat_template: None,
            engine: minfer_engine::EngineConfig::default(),
            speculation: None,
        };
        let (tx, _rx) = std::sync::mpsc::channel();
        // The receiver is dropped: nothing is ever submitted here.
        let shared = Arc::new(Shared::new(cfg, tx, Arc::new(Metrics::default())));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let app = crate::routes::router(shared);
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    /// (status, body) of one request, with the test key when `key`.
    async fn request(addr: &str, method: &str, path: &str, key: bool, body: &str) -> (u16, String) {
        crate::testing::request(addr, method, path, key.then_some("k"), body).await
    }

    fn error_of(body: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("not Ollama-shaped: {body}"))
            .to_string()
    }

    #[tokio::test]
    async fn errors_are_ollama_shaped_on_every_path_under_api() {
        let addr = loading_server().await;
        let (status, body) = request(&addr, "GET", "/api/tags", false, "").await;
        assert_eq!(status, 401);
        assert!(error_of(&body).contains("API key"), "{body}");
        // OpenAI's paths keep OpenAI's shape.
        let (status, body) = request(&addr, "GET", "/v1/models", false, "").await;
        assert_eq!(status, 401);
        assert!(body.contains("authentication_error"), "{body}");
        let (status, body) = request(&addr, "GET", "/api/version", true, "").await;
        assert_eq!(status, 200);
        assert!(body.contains(env!("CARGO_PKG_VERSION")), "{body}");
        for (method, path, body, want) in [
            ("GET", "/api/tags", "", 503),
            ("POST", "/api/chat", r#"{"model":"m","messages":[]}"#, 503),
            ("POST", "/api/chat", "{", 400),
            ("POST", "/api/generate", &"x".repeat(2000), 413),
            ("GET", "/api/chat", "", 405),
            ("POST", "/api/pull", "{}", 404),
        ] {
            let (status, got) = request(&addr, method, path, true, body).await;
            assert_eq!(status, want, "{method} {path}: {got}");
            error_of(&got);
        }
        let (_, metrics) = request(&addr, "GET", "/metrics", true, "").await;
        assert!(
            metrics.contains("minfer_requests_total{endpoint=\"/api/chat\",status=\"503\"} 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains("minfer_requests_total{endpoint=\"other\",status=\"404\"} 1"),
            "{metrics}"
        );
    }
}
