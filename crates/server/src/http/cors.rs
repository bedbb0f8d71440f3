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
    /// Allows `origins` (`*`: any; `localhost`: any page served from this
    /// machine, as llama-server's keyword: an http or https origin whose
    /// host is `localhost`, `127.0.0.1` or `[::1]`, on any port).
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
        self.origins
            .iter()
            .any(|a| a == o || (a == "localhost" && is_localhost(o)))
            .then(|| origin.clone())
    }

    /// The answer to a preflight request, when `method` and `headers` are
    /// one (`OPTIONS` with `Access-Control-Request-Method`): `200`, as
    /// llama-server answers, with the `Access-Control-*` headers only for
    /// an allowed origin (without them the browser refuses the request).
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        if method != Method::OPTIONS || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return None;
        }
        let mut resp = StatusCode::OK.into_response();
        let Some(origin) = self.allow(headers.get(header::ORIGIN)) else {
            return Some(resp);
        };
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

/// Whether `origin` (`scheme://host[:port]`) is a page of this machine.
fn is_localhost(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    // The host, and what follows it: nothing or `:port`. An IPv6 literal
    // keeps its colons inside the brackets.
    let (host, tail) = match rest.strip_prefix('[') {
        Some(v6) => v6.split_once(']').unwrap_or(("", "?")),
        None => rest.find(':').map_or((rest, ""), |i| rest.split_at(i)),
    };
    let port_ok = match tail.strip_prefix(':') {
        Some(p) => !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
        None => tail.is_empty(),
    };
    port_ok && matches!(host, "localhost" | "127.0.0.1" | "::1")
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
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example"
        );
        let other = headers(&[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "POST"),
        ]);
        let refused = c.preflight(&Method::OPTIONS, &other).unwrap();
        assert_eq!(refused.status(), StatusCode::OK);
        assert!(!refused
            .headers()
            .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
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

    #[test]
    fn the_localhost_keyword_allows_pages_of_this_machine_only() {
        let c = Cors::new(&["localhost".into()]);
        for o in [
            "http://localhost",
            "http://localhost:8080",
            "https://127.0.0.1",
            "http://127.0.0.1:3000",
            "http://[::1]",
            "http://[::1]:3000",
        ] {
            let h = HeaderValue::from_str(o).unwrap();
            assert_eq!(c.allow(Some(&h)), Some(h.clone()), "{o}");
        }
        for o in [
            "http://web.mydomain.fr",
            "http://notlocalhost",
            "http://localhost.evil.com",
            "http://localhost:80.evil.com",
            "http://[::1].evil.com",
            "file://localhost",
        ] {
            let h = HeaderValue::from_str(o).unwrap();
            assert_eq!(c.allow(Some(&h)), None, "{o}");
        }
    }
}
