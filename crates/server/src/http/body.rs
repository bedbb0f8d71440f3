//! Reading a request body (within `--max-body`), parsing it as JSON, and
//! running the CPU-heavy work on it off the async workers.

use std::sync::Arc;

use axum::body::{Body, Bytes};

use super::error::ApiError;
use crate::state::{preparing, Preparing, Shared};

/// The body, at most `--max-body` bytes.
///
/// # Errors
/// 413 for a larger body.
pub async fn read_body(shared: &Shared, body: Body) -> Result<Bytes, ApiError> {
    let limit = shared.cfg.max_body;
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

/// Parses a JSON body into `T`; a syntax error, a wrong type or a missing
/// field is a 400 whose message is serde's (it names the field and where).
///
/// # Errors
/// The 400.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                "the body is not valid JSON"
            }
            _ => "the body does not match the expected schema",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

/// Runs CPU-heavy request work (parsing, template rendering, tokenizing a
/// body of up to `--max-body`) off the async workers, so that other
/// connections keep being served meanwhile.
///
/// # Errors
/// The work's error; a 500 when it panicked.
async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::internal("preparing the prompt failed"))?
}

/// Reads the body, then off the async workers parses it as `T` and runs
/// `f` on it: what every handler that renders or tokenizes a prompt does
/// first.
///
/// # Errors
/// 413 for a body over `--max-body`, the 400 of [`parse`], and `f`'s.
pub async fn parse_off_thread<T, U>(
    shared: &Arc<Shared>,
    body: Body,
    f: impl FnOnce(&Preparing, T) -> Result<U, ApiError> + Send + 'static,
) -> Result<U, ApiError>
where
    T: serde::de::DeserializeOwned,
    U: Send + 'static,
{
    let bytes = read_body(shared, body).await?;
    // Dropped with this future when the client goes away, which ends a
    // wait for the model there.
    let (c, _guard) = preparing(shared);
    off_thread(move || f(&c, parse(&bytes)?)).await
}
