//! Test support shared by the server's unit tests: one raw HTTP/1.1
//! request against a server bound on loopback.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
