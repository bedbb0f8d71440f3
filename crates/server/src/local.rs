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

    /// Sends one request (`body` JSON or empty) and returns at once; the
    /// status and the body follow through [`Reply`].
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
        let task = self.rt.spawn(async move {
            let res = app
                .oneshot(req)
                .await
                .unwrap_or_else(|never| match never {});
            let stream = res
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream") || v.contains("ndjson"));
            (res.status().as_u16(), stream, res.into_body())
        });
        Ok(Reply {
            state: State::Head(task),
            status: None,
            stream: false,
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

/// Where a reply stands.
enum State {
    /// The handler still runs: a non-streamed answer is whole before its
    /// status is known.
    Head(tokio::task::JoinHandle<(u16, bool, Body)>),
    /// The status is known; the body comes.
    Body(Body),
    /// Over, or closed.
    Done,
}

/// An answer read as it comes: first its status ([`Reply::head`]), then its
/// body ([`Reply::next`]), each wait bounded so that a caller can look at
/// its own interrupts between waits. Dropping it before the end cancels
/// the generation behind it, as a client that goes away does.
pub struct Reply {
    state: State,
    status: Option<u16>,
    stream: bool,
    rt: tokio::runtime::Handle,
}

impl Reply {
    /// The HTTP status, waiting at most `wait` for it; `None` while the
    /// handler still runs.
    pub fn head(&mut self, wait: Duration) -> Option<u16> {
        if let State::Head(task) = &mut self.state {
            let got = self
                .rt
                .block_on(async { tokio::time::timeout(wait, task).await });
            match got {
                Err(_) => return None,
                Ok(Ok((status, stream, body))) => {
                    self.status = Some(status);
                    self.stream = stream;
                    self.state = State::Body(body);
                }
                Ok(Err(_)) => {
                    self.status = Some(500);
                    self.state = State::Done;
                }
            }
        }
        self.status
    }

    /// Whether the body is a stream of events (SSE or NDJSON); known once
    /// [`head`](Reply::head) has the status.
    pub fn stream(&self) -> bool {
        self.stream
    }

    /// The next piece of the body, waiting at most `wait` (for the status
    /// first, when it is not known yet).
    pub fn next(&mut self, wait: Duration) -> Piece {
        if self.head(wait).is_none() {
            return Piece::Pending;
        }
        let State::Body(body) = &mut self.state else {
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
                self.state = State::Done;
                Piece::End
            }
        }
    }

    /// Ends the reply now: a handler still running is stopped, and the
    /// generation behind it cancelled.
    pub fn close(&mut self) {
        if let State::Head(task) = &self.state {
            task.abort();
        }
        self.state = State::Done;
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.close();
    }
}
