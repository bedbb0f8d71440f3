//! Test support shared by the server's unit tests: a server whose model
//! never finishes loading, and one raw HTTP/1.1 request against a server
//! bound on loopback.

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::Metrics;
use crate::state::Shared;
use crate::worker::Cmd;
use crate::ServerConfig;

/// A server on loopback whose model never finishes loading, with API key
/// `key`; returns its address and the model thread's end of the commands.
pub async fn loading_server(key: Option<&str>, strict_model: bool) -> (String, Receiver<Cmd>) {
    let cfg = ServerConfig {
        model: "m".into(),
        n_parallel: 1,
        queue: 1,
        max_body: 1024,
        api_key: key.map(str::to_string),
        drain_timeout: Duration::from_secs(1),
        keep_alive: Duration::from_secs(5),
        n_predict: 0,
        alias: None,
        tags: Vec::new(),
        temp: None,
        seed: None,
        strict_model,
        slots: true,
        ui: true,
        cors_origins: Vec::new(),
        chat_template: None,
        engine: minfer_engine::EngineConfig::default(),
        speculation: None,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let shared = Arc::new(Shared::new(cfg, tx, Arc::new(Metrics::default())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app = crate::router::router(shared);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, rx)
}

/// One HTTP/1.1 request over a fresh connection: (status, body).
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .expect("the server answers")
        .unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}
