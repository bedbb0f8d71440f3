//! The server in process, without a socket: an embedder (the Python
//! package) sends the requests `minfer serve` answers, through the same
//! router, handlers and model threads, and reads the same answers. Calls
//! block the calling thread; calls from many threads at once are batched
//! by the model threads as concurrent HTTP requests are.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use minfer_engine::Store;
use tower::ServiceExt;

use crate::config::ServerConfig;
use crate::error::ServeError;
use crate::router;
use crate::start::{assemble, reap, wait_loaded};
use crate::state::Shared;

/// A server answering in process.
pub struct Local {
    rt: tokio::runtime::Runtime,
    app: Router,
    shared: Arc<Shared>,
    /// The model loaded at start, by id.
    model: Option<String>,
}

impl Local {
    /// Makes the server of `cfg` and waits until the model given at start
    /// (if any) is loaded.
    ///
    /// # Errors
    /// [`ServeError`] for a bad setting or a model that cannot be loaded.
    pub fn start(store: Store, cfg: ServerConfig) -> Result<Local, ServeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("minfer-local")
            .enable_all()
            .build()?;
        let (shared, default, _) = assemble(store, &cfg)?;
        let model = match default {
            None => None,
            Some(entry) => {
                let entry = entry.map_err(|e| ServeError::Config(e.message))?;
                let loaded = rt.block_on(wait_loaded(&shared, &entry.id));
                if loaded.is_err() {
                    shared.models.stop_all();
                }
                Some(loaded?)
            }
        };
        rt.spawn(reap(shared.clone()));
        let app = router::router(shared.clone());
        Ok(Local {
            rt,
            app,
            shared,
            model,
        })
    }

    /// The id of the model loaded at start.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Sends one request (`body` JSON or empty) and returns its answer
    /// once its status is known; the body follows through [`Reply`].
    ///
    /// # Errors
    /// A message when `method` or `path` is not a valid request line.
    pub fn call(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Reply, String> {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .map_err(|e| e.to_string())?;
        let app = self.app.clone();
        let res = self
            .rt
            .block_on(app.oneshot(req))
            .unwrap_or_else(|never| match never {});
        let status = res.status().as_u16();
        let stream = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream") || v.contains("ndjson"));
        Ok(Reply {
            status,
            stream,
            body: Some(res.into_body()),
            rt: self.rt.handle().clone(),
        })
    }
}

impl Drop for Local {
    /// Cancels what still runs and ends the model threads.
    fn drop(&mut self) {
        self.shared.models.cancel_all();
        self.shared.models.stop_all();
    }
}

/// What comes of one piece of a reply's body.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// More bytes.
    Data(Vec<u8>),
    /// Nothing within the wait; ask again.
    Pending,
    /// The body is over.
    End,
}

/// An answer whose body is read as it comes. Dropping it before the end
/// cancels the generation behind it, as a client that goes away does.
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Whether the body is a stream of events (SSE or NDJSON).
    pub stream: bool,
    body: Option<Body>,
    rt: tokio::runtime::Handle,
}

impl Reply {
    /// The next piece of the body, waiting at most `wait` (so that a
    /// caller can look at its own interrupts between waits).
    pub fn next(&mut self, wait: Duration) -> Piece {
        let Some(body) = self.body.as_mut() else {
            return Piece::End;
        };
        let got = self
            .rt
            .block_on(async { tokio::time::timeout(wait, body.frame()).await });
        match got {
            Err(_) => Piece::Pending,
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(bytes) => Piece::Data(bytes.to_vec()),
                Err(_) => Piece::Pending,
            },
            Ok(Some(Err(_)) | None) => {
                self.body = None;
                Piece::End
            }
        }
    }

    /// Drops the body: the generation behind it is cancelled.
    pub fn close(&mut self) {
        self.body = None;
    }
}
