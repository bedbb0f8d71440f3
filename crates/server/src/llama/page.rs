//! The chat page served at `/`: one self-contained HTML file (its CSS and
//! script inline, no fonts, images or scripts from anywhere) that talks to
//! this server's own `/v1/models` and streamed `/v1/chat/completions`.
//!
//! The route sits outside the API-key guard: a browser cannot send a
//! bearer token when it navigates, and the page holds nothing secret. The
//! key, when the server has one, is typed into the page's settings and sent
//! with every API request it makes.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page, compiled into the binary.
const INDEX: &str = include_str!("page/index.html");

/// What the page may load, as a second line of defence behind its own
/// script: nothing but inline code and requests to this origin, so that a
/// model's answer, rendered as Markdown, can never make the browser fetch
/// from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; connect-src 'self'; img-src data:; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the chat page.
pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Revalidated on every load, so a new build's page is picked up.
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        INDEX,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_the_page_as_uncached_html() {
        let resp = index().await;
        assert_eq!(resp.status(), 200);
        let h = resp.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert!(h.contains_key(header::CONTENT_SECURITY_POLICY));
    }

    #[test]
    fn the_page_fetches_nothing_from_outside() {
        assert!(INDEX.starts_with("<!doctype html>"));
        for bad in ["http://", "https://", "<script src", "@import", "url("] {
            assert!(!INDEX.contains(bad), "the page contains {bad:?}");
        }
    }
}
