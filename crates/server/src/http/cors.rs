//! Cross-origin requests: with `--cors-origins`, a page on another origin
//! may call the server. Preflight `OPTIONS` requests are answered before
//! authentication (browsers send them without credentials), and every
//! response to an allowed origin carries the `Access-Control-*` headers.

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// The allowed origins.
#[derive(Debug, Clone, Default)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    /// Allows `origins` (`*`: any).
    pub fn new(origins: &[String]) -> Cors {
        Cors {
            origins: origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_string())
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    /// The `Access-Control-Allow-Origin` value for a request's `Origin`.
    fn allow(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        let origin = origin?;
        if self.origins.iter().any(|o| o == "*") {
            return Some(HeaderValue::from_static("*"));
        }
        let o = origin.to_str().ok()?;
        self.origins.iter().any(|a| a == o).then(|| origin.clone())
    }

    /// The answer to a preflight request, when `method` and `headers` are
    /// one (`OPTIONS` with `Access-Control-Request-Method`).
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        if method != Method::OPTIONS || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return None;
        }
        let Some(origin) = self.allow(headers.get(header::ORIGIN)) else {
            return Some(StatusCode::FORBIDDEN.into_response());
        };
        let mut resp = StatusCode::NO_CONTENT.into_response();
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        let asked = headers
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("authorization, content-type"));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        Some(resp)
    }

    /// Adds the headers the response to a request from `origin` carries
    /// when that origin is allowed.
    pub fn decorate(&self, origin: Option<&HeaderValue>, resp: &mut Response) {
        if let Some(origin) = self.allow(origin) {
            let h = resp.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            h.insert(header::VARY, HeaderValue::from_static("Origin"));
            h.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("content-type"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn preflight_and_decoration_follow_the_list() {
        let c = Cors::new(&["https://app.example/".into()]);
        let pre = headers(&[
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
        ]);
        let r = c.preflight(&Method::OPTIONS, &pre).unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example"
        );
        let other = headers(&[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "POST"),
        ]);
        assert_eq!(
            c.preflight(&Method::OPTIONS, &other).unwrap().status(),
            StatusCode::FORBIDDEN
        );
        assert!(c.preflight(&Method::GET, &pre).is_none());
        let mut resp = StatusCode::OK.into_response();
        c.decorate(
            Some(&HeaderValue::from_static("https://evil.example")),
            &mut resp,
        );
        assert!(!resp
            .headers()
            .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
        let any = Cors::new(&["*".into()]);
        let mut resp = StatusCode::OK.into_response();
        any.decorate(Some(&HeaderValue::from_static("http://x")), &mut resp);
        assert_eq!(resp.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    }
}
