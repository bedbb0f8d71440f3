//! `minfer serve --trace`: the trace is written when the server shuts down
//! (SIGTERM) and gives every request its own track.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use minfer_testutil::{require_model, SMOLLM};
use serde_json::Value;

/// One completion request over a fresh connection; returns the response.
fn complete(addr: &str, model: &str, prompt: &str) -> String {
    let body = format!("{{\"model\":\"{model}\",\"prompt\":\"{prompt}\",\"max_tokens\":4}}");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_writes_a_trace_with_one_track_per_request() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("serve.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_minfer"))
        .arg("serve")
        .arg(&model)
        .args(["--host", "127.0.0.1", "--port", "0", "-t", "2", "-c", "512"])
        .arg("--trace")
        .arg(&trace)
        .env("MINFER_HOME", dir.path())
        .env("MINFER_PYTHON", "/nonexistent/python-for-minfer-tests")
        .env_remove("MINFER_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn minfer serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("ready line");
    // "minfer serve: listening on http://127.0.0.1:PORT with model ID"
    let rest = line.split("http://").nth(1).expect("an address");
    let addr = rest.split_whitespace().next().unwrap().to_string();
    let id = rest.split_whitespace().last().unwrap().to_string();
    let clients: Vec<_> = ["Hello", "Name a colour"]
        .into_iter()
        .map(|p| {
            let (addr, id) = (addr.clone(), id.clone());
            std::thread::spawn(move || complete(&addr, &id, p))
        })
        .collect();
    for c in clients {
        let answer = c.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "minfer serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let tracks: Vec<u64> = events
        .iter()
        .filter(|e| {
            e["name"] == "thread_name"
                && e["args"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("request "))
        })
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(tracks.len(), 2, "one track per request");
    for tid in tracks {
        let spans: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"].as_u64() == Some(tid))
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert!(
            spans.contains(&"request") && spans.contains(&"prefill"),
            "{spans:?}"
        );
    }
    assert!(
        events.iter().any(|e| e["cat"] == "op"),
        "the model thread's graph ops are in the trace too"
    );
}
