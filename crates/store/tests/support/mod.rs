//! Test helpers: a minimal Hugging Face look-alike over HTTP/1.1 and a
//! small valid GGUF file.
//!
//! The server answers `/{owner}/{repo}/resolve/main/{file}` with a 302 to
//! `/blob/{owner}/{repo}/{file}` carrying `X-Linked-Etag` / `X-Linked-Size`,
//! like the hub does for LFS files, and serves the bytes there with `Range`
//! support. Every request is logged so tests can assert what was asked.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use minfer_gguf::{GgmlType, GgufWriter};
use sha2::{Digest, Sha256};

/// How the server behaves.
#[derive(Clone, Default)]
pub struct ServerConfig {
    /// Served files: ("owner/repo/path/in/repo", bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// Overrides the `X-Linked-Etag` (default: the real sha256).
    pub linked_etag: Option<String>,
    /// Overrides the `X-Linked-Size` (default: the real size).
    pub linked_size: Option<u64>,
    /// On the first body-carrying GET, send only this many body bytes
    /// (after announcing the full length) and close the connection.
    pub drop_after: Option<usize>,
    /// Answer every resolve request with this status instead.
    pub resolve_status: Option<u16>,
    /// Host for an absolute redirect `Location` (`None`: a relative one).
    pub redirect_host: Option<String>,
}

/// One request as the server saw it, and the status it answered.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
    pub status: u16,
}

/// A running server; it lives until the test process ends.
pub struct Server {
    /// `http://127.0.0.1:PORT`, to be used as `hf_endpoint`.
    pub endpoint: String,
    log: Arc<Mutex<Vec<Logged>>>,
}

impl Server {
    /// Starts a server on a free loopback port.
    pub fn start(cfg: ServerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            cfg,
            port,
            dropped: AtomicBool::new(false),
            log: log.clone(),
        });
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || shared.handle(stream));
            }
        });
        Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }

    /// Requests whose path starts with `/blob/`.
    pub fn blob_requests(&self) -> Vec<Logged> {
        self.log()
            .into_iter()
            .filter(|l| l.path.starts_with("/blob/"))
            .collect()
    }
}

struct Shared {
    cfg: ServerConfig,
    port: u16,
    dropped: AtomicBool,
    log: Arc<Mutex<Vec<Logged>>>,
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Content-Length to announce (defaults to the body length).
    announce: Option<usize>,
}

impl Reply {
    fn new(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            announce: None,
        }
    }

    fn header(mut self, k: &str, v: impl ToString) -> Self {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }
}

impl Shared {
    fn handle(&self, stream: TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let (mut range, mut authorization) = (None, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "range" => range = Some(v.trim().to_string()),
                    "authorization" => authorization = Some(v.trim().to_string()),
                    _ => {}
                }
            }
        }
        let (reply, cut) = self.route(&method, &path, range.as_deref());
        self.log.lock().unwrap().push(Logged {
            method: method.clone(),
            path,
            range,
            authorization,
            status: reply.status,
        });
        let _ = write_reply(stream, &method, reply, cut);
    }

    fn find(&self, key: &str) -> Option<&Vec<u8>> {
        self.cfg
            .files
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The reply, and how many body bytes to send before hanging up.
    fn route(&self, method: &str, path: &str, range: Option<&str>) -> (Reply, Option<usize>) {
        if let Some(key) = path.strip_prefix("/blob/") {
            let Some(bytes) = self.find(key) else {
                return (Reply::new(404), None);
            };
            return self.serve_blob(method, bytes, range);
        }
        let segments: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
        if let [owner, repo, "resolve", "main", file] = segments.as_slice() {
            if let Some(status) = self.cfg.resolve_status {
                return (Reply::new(status), None);
            }
            let key = format!("{owner}/{repo}/{file}");
            let Some(bytes) = self.find(&key) else {
                return (
                    Reply::new(404).header("X-Error-Code", "EntryNotFound"),
                    None,
                );
            };
            let sha = hex(&Sha256::digest(bytes));
            let location = match &self.cfg.redirect_host {
                Some(host) => format!("http://{host}:{}/blob/{key}", self.port),
                None => format!("/blob/{key}"),
            };
            let etag = self.cfg.linked_etag.clone().unwrap_or(sha);
            let size = self.cfg.linked_size.unwrap_or(bytes.len() as u64);
            let reply = Reply::new(302)
                .header("Location", location)
                .header("X-Linked-Etag", format!("\"{etag}\""))
                .header("X-Linked-Size", size)
                .header("ETag", "\"0123456789abcdef0123456789abcdef01234567\"");
            return (reply, None);
        }
        (Reply::new(404), None)
    }

    fn serve_blob(
        &self,
        method: &str,
        bytes: &[u8],
        range: Option<&str>,
    ) -> (Reply, Option<usize>) {
        let len = bytes.len();
        let start = range
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|s| s.parse::<usize>().ok());
        let mut reply = match start {
            Some(s) if s >= len => {
                return (
                    Reply::new(416).header("Content-Range", format!("bytes */{len}")),
                    None,
                )
            }
            Some(s) => {
                let mut r =
                    Reply::new(206).header("Content-Range", format!("bytes {s}-{}/{len}", len - 1));
                r.body = bytes[s..].to_vec();
                r
            }
            None => {
                let mut r = Reply::new(200);
                r.body = bytes.to_vec();
                r
            }
        };
        reply = reply
            .header("Accept-Ranges", "bytes")
            .header("Content-Type", "application/octet-stream")
            .header("ETag", "\"cdn-etag\"");
        let mut cut = None;
        if method == "GET" {
            if let Some(k) = self.cfg.drop_after {
                if !self.dropped.swap(true, Ordering::SeqCst) {
                    cut = Some(k.min(reply.body.len()));
                }
            }
        }
        reply.announce = Some(reply.body.len());
        (reply, cut)
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Other",
    }
}

fn write_reply(
    mut stream: TcpStream,
    method: &str,
    reply: Reply,
    cut: Option<usize>,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let announce = reply.announce.unwrap_or(reply.body.len());
    head.push_str(&format!(
        "Content-Length: {announce}\r\nConnection: close\r\n\r\n"
    ));
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        let n = cut.unwrap_or(reply.body.len());
        stream.write_all(&reply.body[..n])?;
    }
    stream.flush()?;
    // A graceful close: the client reads everything sent, then EOF.
    stream.shutdown(Shutdown::Write)
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A valid GGUF file of a few hundred kB with non-repeating tensor bytes.
pub fn small_gguf() -> Vec<u8> {
    let (cols, rows) = (256u64, 300u64);
    let n = (cols * rows * 4) as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.add_tensor("t", GgmlType::F32, &[cols, rows], data)
        .unwrap();
    w.to_bytes()
}

/// A store config pointing at `home` and `endpoint`, no progress bars.
pub fn config(home: &std::path::Path, endpoint: &str) -> minfer_store::StoreConfig {
    minfer_store::StoreConfig {
        home: home.to_path_buf(),
        hf_endpoint: endpoint.to_string(),
        hf_token: None,
        python: "python3".to_string(),
        progress: false,
    }
}
