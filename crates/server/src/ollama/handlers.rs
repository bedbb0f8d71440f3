//! Ollama's endpoints: `/api/chat` and `/api/generate` (NDJSON streams by
//! default), `/api/tags`, `/api/show`, `/api/ps` and `/api/version`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::error::{ollama_model, ollama_not_found, require_model, OllamaError};
use super::info;
use super::reply::{self, Kind, Reply};
use super::request::{self, ChatBody, GenerateBody, Limits, Prepared};
use crate::http::{admit, parse, parse_off_thread, read_body, Admission, ApiError};
use crate::models::keep;
use crate::models::Served;
use crate::state::Shared;

type St = State<Arc<Shared>>;

/// The Ollama endpoints served, each counted under its path in `/metrics`.
pub const PATHS: &[&str] = &[
    "/api/chat",
    "/api/generate",
    "/api/tags",
    "/api/show",
    "/api/ps",
    "/api/version",
    "/api/pull",
    "/api/delete",
    "/api/copy",
];

fn limits(served: &Served) -> Limits {
    Limits {
        n_parallel: served.cfg.n_parallel,
        n_ctx: served.cfg.engine.n_ctx,
    }
}

/// What `/api/chat` and `/api/generate` differ in.
trait Generation: serde::de::DeserializeOwned + Send + 'static {
    /// Which endpoint answers.
    const KIND: Kind;
    /// The request's model name.
    fn model(&self) -> &str;
    /// The fields chat and generate share.
    fn common(&self) -> &request::Common;
    /// Whether there is nothing to generate: the request only asks for
    /// the model to be loaded.
    fn loads_only(&self) -> bool;
    /// Renders, tokenizes and configures the request.
    fn prepare(&self, served: &Served, lim: Limits) -> Result<Prepared, ApiError>;
    /// Whether the answer streams.
    fn streams(&self) -> bool;
}

impl Generation for ChatBody {
    const KIND: Kind = Kind::Chat;
    fn model(&self) -> &str {
        &self.model
    }
    fn common(&self) -> &request::Common {
        &self.common
    }
    fn loads_only(&self) -> bool {
        self.messages.is_empty()
    }
    fn prepare(&self, served: &Served, lim: Limits) -> Result<Prepared, ApiError> {
        request::prepare_chat(served, self, lim)
    }
    fn streams(&self) -> bool {
        self.common.streams()
    }
}

impl Generation for GenerateBody {
    const KIND: Kind = Kind::Generate;
    fn model(&self) -> &str {
        &self.model
    }
    fn common(&self) -> &request::Common {
        &self.common
    }
    fn loads_only(&self) -> bool {
        self.prompt.is_empty() && self.suffix.as_deref().unwrap_or("").is_empty()
    }
    fn prepare(&self, served: &Served, lim: Limits) -> Result<Prepared, ApiError> {
        request::prepare_generate(served, self, lim)
    }
    fn streams(&self) -> bool {
        self.common.streams()
    }
}

/// Prepares a generation request off the async workers, admits it and
/// answers it (streamed as NDJSON unless `stream: false`).
async fn generation<R: Generation>(
    shared: Arc<Shared>,
    body: Body,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let (req, model, prep) = parse_off_thread(&shared, body, move |s, req: R| {
        require_model(req.model())?;
        let keep = keep::parse(req.common().keep_alive.as_ref())?;
        if req.loads_only() && keep == Some(Some(Duration::ZERO)) {
            // Ollama's way to unload a model: nothing to load first.
            s.models.unload(req.model())?;
            return Ok((req, None, None));
        }
        let model = ollama_model(s, req.model())?;
        if let Some(k) = keep {
            model.keep_for(k);
        }
        if req.loads_only() {
            return Ok((req, Some(model), None));
        }
        let served = model.served()?;
        let prep = req.prepare(served, limits(served))?;
        Ok((req, Some(model), Some(prep)))
    })
    .await?;
    let kind = R::KIND;
    let unloaded = model.is_none();
    let (Some(model), Some(prep)) = (model, prep) else {
        return Ok(reply::loaded(kind, req.model(), unloaded));
    };
    let param = match kind {
        Kind::Chat => "messages",
        Kind::Generate => "prompt",
    };
    let (ticket, rx) = admit(
        &shared,
        Admission::one(model, prep.ids, vec![prep.cfg], param),
    )?;
    let times = (started, Instant::now());
    let reply = Reply::new(kind, req.model(), &prep.split, ticket.id(), times);
    Ok(if req.streams() {
        reply::stream(reply, ticket, rx)
    } else {
        reply::collect(reply, ticket, rx).await
    })
}

/// `POST /api/chat`.
pub async fn chat(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    generation::<ChatBody>(shared, body).await
}

/// `POST /api/generate`.
pub async fn generate(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    generation::<GenerateBody>(shared, body).await
}

/// `GET /api/tags`: every model the server can load, loaded or not.
pub async fn tags(State(shared): St) -> Result<Response, OllamaError> {
    if shared.models.single() {
        shared.current("")?;
    }
    let listed = shared.models.list();
    Ok(Json(info::tags(&listed)).into_response())
}

/// `GET /api/ps`: the models loaded now.
pub async fn ps(State(shared): St) -> Result<Response, OllamaError> {
    let live = shared.models.live();
    Ok(Json(info::ps(&live)).into_response())
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

/// `POST /api/show`.
pub async fn show(State(shared): St, body: Body) -> Result<Response, OllamaError> {
    let body = read_body(&shared, body).await?;
    let req: ShowBody = parse(&body)?;
    let name = if req.model.is_empty() {
        &req.name
    } else {
        &req.model
    };
    require_model(name)?;
    let model = shared.current(name).map_err(ollama_not_found(name))?;
    let served = model.served()?;
    let n_ctx = served.cfg.engine.n_ctx;
    Ok(Json(info::show(served, req.verbose, n_ctx)).into_response())
}

/// `GET /api/version`: minfer's version (Ollama's clients ask for one).
pub async fn version() -> Response {
    Json(json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}

/// Any other path under `/api/`: an Ollama-shaped 404.
pub async fn unknown(req: Request) -> OllamaError {
    OllamaError(
        ApiError::bad_request(format!(
            "minfer serve has no {}: of Ollama's API it serves {}",
            req.uri().path(),
            PATHS.join(", ")
        ))
        .with_status(StatusCode::NOT_FOUND),
    )
}

/// A known path with the wrong method: an Ollama-shaped 405.
pub async fn wrong_method(req: Request) -> OllamaError {
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
    use crate::testing::loading_server;

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
        // The receiver is dropped: nothing is ever submitted here.
        let (addr, _) = loading_server(Some("k"), false).await;
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
            ("POST", "/api/pull", "{}", 400),
            ("POST", "/api/create", "{}", 404),
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
