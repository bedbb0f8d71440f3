//! The router: which path and method each endpoint answers. Every
//! handler lives with its API; this file only wires paths to them.

use std::sync::Arc;

use axum::routing::{any, get, post, MethodRouter};
use axum::Router;

use crate::guard::{fallback, guard, wrong_method};
use crate::state::Shared;
use crate::{anthropic, llama, ollama, openai, responses};

/// The router with every endpoint, authentication, CORS and request
/// counting. Every OpenAI route is served with and without the `/v1`
/// prefix, as llama-server does, for clients configured with a bare base
/// URL, except `/completions`, which is llama-server's native completion
/// there, as in llama-server. Ollama's paths answer a wrong method, and any other path under
/// `/api/`, in Ollama's shape.
pub fn router(shared: Arc<Shared>) -> Router {
    let mut r = Router::new();
    for prefix in ["/v1", ""] {
        r = r
            .route(
                &format!("{prefix}/chat/completions"),
                post(openai::chat::handle),
            )
            .route(&format!("{prefix}/models"), get(openai::models::list))
            .route(&format!("{prefix}/models/{{id}}"), get(openai::models::one))
            .route(&format!("{prefix}/messages"), post(anthropic::messages))
            .route(
                &format!("{prefix}/messages/count_tokens"),
                post(anthropic::count_tokens),
            )
            .route(
                &format!("{prefix}/chat/completions/input_tokens"),
                post(llama::chat_input_tokens),
            )
            .route(&format!("{prefix}/responses"), post(responses::responses))
            .route(
                &format!("{prefix}/embeddings"),
                post(openai::embeddings::handle),
            );
    }
    let only = |m: MethodRouter<Arc<Shared>>| m.fallback(ollama::wrong_method);
    r = r
        .route("/api/chat", only(post(ollama::chat)))
        .route("/api/generate", only(post(ollama::generate)))
        .route("/api/tags", only(get(ollama::tags)))
        .route("/api/show", only(post(ollama::show)))
        .route("/api/ps", only(get(ollama::ps)))
        .route("/api/version", only(get(ollama::version)))
        .route("/api/pull", only(post(ollama::pull)))
        .route("/api/delete", only(axum::routing::delete(ollama::delete)))
        .route("/api/copy", only(post(ollama::copy)))
        .route("/api/{*rest}", any(ollama::unknown))
        .route("/api/embed", post(ollama::embed))
        .route("/api/embeddings", post(ollama::embeddings));
    r = r.route("/v1/completions", post(openai::completion::handle));
    let ui = shared.cfg.ui;
    let r = r
        .route("/health", get(llama::health))
        .route("/metrics", get(llama::metrics))
        .route("/tokenize", post(llama::tokenize))
        .route("/detokenize", post(llama::detokenize))
        .route("/props", get(llama::props))
        .route("/slots", get(llama::slots))
        .route("/slots/{id}", post(llama::slot_action))
        .route("/completion", post(llama::completion))
        .route("/completions", post(llama::completion))
        .route("/infill", post(llama::infill))
        .route("/apply-template", post(llama::apply_template))
        .route("/models/load", post(llama::load_model))
        .route("/models/unload", post(llama::unload_model))
        .fallback(fallback)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard));
    let r = if ui {
        r.route("/", get(llama::index))
    } else {
        r
    };
    r.with_state(shared)
}

#[cfg(test)]
mod tests {
    use crate::testing::{loading_server, request};

    #[tokio::test]
    async fn while_loading_health_is_503_and_requests_get_503() {
        let (addr, _rx) = loading_server(None, true).await;
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
        let (addr, _rx) = loading_server(Some("k3y"), true).await;
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
