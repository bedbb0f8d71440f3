//! `minfer serve --trace`: the trace is written when the server shuts down
//! (SIGTERM) and gives every request its own track.

mod common;

use std::io::Read;
use std::time::Duration;

use common::server::{send, Server};
use minfer_testutil::{require_model, SMOLLM};
use serde_json::Value;

/// One completion request over a fresh connection; returns the response.
fn complete(addr: &str, model: &str, prompt: &str) -> String {
    let body = format!("{{\"model\":\"{model}\",\"prompt\":\"{prompt}\",\"max_tokens\":4}}");
    let mut s = send(addr, "POST", "/v1/completions", &body);
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
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
    let trace_arg = trace.to_str().expect("a UTF-8 temporary path");
    let mut server = Server::start(&model, dir.path(), &["-c", "512", "--trace", trace_arg]);
    let (addr, id) = (server.addr.clone(), server.model.clone());
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
    let status = server.terminate(Duration::from_secs(60));
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
