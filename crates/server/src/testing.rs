//! Test support shared by the server's unit tests: a server whose model
//! never finishes loading, and one raw HTTP/1.1 request against a server
//! bound on loopback.

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{ModelConfig, ModelsConfig};
use crate::metrics::Metrics;
use crate::models::{Catalog, Entry, Models, Source};
use crate::state::Shared;
use crate::worker::Cmd;
use crate::ServerConfig;

/// The per-model settings of the tests: one request at a time, one queued.
pub fn model_config() -> ModelConfig {
    ModelConfig {
        n_parallel: 1,
        queue: 1,
        ..ModelConfig::new(minfer_engine::EngineConfig::default())
    }
}

/// A server on loopback whose model never finishes loading, with API key
/// `key`; returns its address and the model thread's end of the commands.
pub async fn loading_server(key: Option<&str>, strict_model: bool) -> (String, Receiver<Cmd>) {
    let cfg = ServerConfig {
        model: Some("m".into()),
        per_model: model_config(),
        // A request waits this long for the model, then gets its 503.
        models: ModelsConfig {
            load_wait: Duration::from_millis(300),
            store: false,
            ..ModelsConfig::default()
        },
        max_body: 1024,
        api_key: key.map(str::to_string),
        drain_timeout: Duration::from_secs(1),
        keep_alive: Duration::from_secs(5),
        strict_model,
        slots: true,
        ui: true,
        cors_origins: Vec::new(),
    };
    let metrics = Arc::new(Metrics::default());
    let store = minfer_engine::Store::new(minfer_engine::StoreConfig::from_env());
    let catalog = Catalog {
        entries: vec![Entry {
            id: "m".into(),
            spec: "m".into(),
            aliases: Vec::new(),
            cfg: model_config(),
            source: Source::Startup,
            load_on_startup: true,
            size: None,
        }],
    };
    let models = Models::new(
        (cfg.models.clone(), cfg.per_model.clone(), strict_model),
        store,
        catalog,
        metrics.clone(),
    );
    let rx = models.never_loading("m");
    let shared = Arc::new(Shared::new(cfg, models, metrics));
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
