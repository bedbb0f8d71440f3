//! OpenAI-shaped errors: every failure a client sees is a status code and
//! a body `{"error": {"message", "type", "param", "code"}}`, which the
//! official clients turn into their own exception types.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, …).
    pub kind: &'static str,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// A machine-readable code (`model_not_found`, …), when one applies.
    pub code: Option<&'static str>,
    /// Seconds after which a retry may succeed (`Retry-After`), for a 503
    /// that will pass.
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400: the request is malformed or asks for something invalid.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 naming the field at fault.
    pub fn bad_param(param: &str, message: impl Into<String>) -> ApiError {
        Self::bad_request(message).with_param(param)
    }

    /// 400 for a field the server understands but cannot honour yet.
    pub fn unsupported(param: &str, what: &str) -> ApiError {
        Self::bad_param(
            param,
            format!("`{param}` is not supported by this server yet ({what})"),
        )
        .with_code("unsupported_parameter")
    }

    /// 401: a missing or wrong API key.
    pub fn unauthorized() -> ApiError {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing or invalid API key: send `Authorization: Bearer <key>`",
        )
        .with_code("invalid_api_key")
    }

    /// 404: a model this server does not serve.
    pub fn unknown_model(name: &str, served: &str) -> ApiError {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("the model `{name}` does not exist; this server serves `{served}`"),
        )
        .with_param("model")
        .with_code("model_not_found")
    }

    /// 404: no such endpoint.
    pub fn not_found(path: &str) -> ApiError {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("no endpoint {path}"),
        )
    }

    /// 413: the body is larger than `--max-body`.
    pub fn too_large(limit: usize) -> ApiError {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than the server's limit of {limit} bytes"),
        )
    }

    /// 503: the queue is full, the model is loading, or the server is
    /// shutting down.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
    }

    /// 500: the engine failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The same error naming `param`.
    pub fn with_param(mut self, param: &str) -> ApiError {
        self.param = Some(param.to_string());
        self
    }

    /// The same error with another status.
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }

    /// The same error with a machine-readable code.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// With a `Retry-After` of `secs` seconds.
    pub fn with_retry_after(mut self, secs: u32) -> ApiError {
        self.retry_after = Some(secs);
        self
    }

    /// Adds the `Retry-After` header to `resp` when one is set.
    pub fn decorate(&self, mut resp: Response) -> Response {
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let resp = (self.status, axum::Json(self.body())).into_response();
        self.decorate(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_openai_shape() {
        let e = ApiError::unsupported("logit_bias", "the sampler has no bias stage");
        let b = e.body();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["param"], "logit_bias");
        assert_eq!(b["error"]["code"], "unsupported_parameter");
        assert!(b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("logit_bias"));
        let e = ApiError::bad_request("x");
        assert!(e.body()["error"]["param"].is_null());
        assert!(e.body()["error"]["code"].is_null());
    }
}
