//! Many models in one `minfer serve`: a `--models-dir` of two real models
//! (SmolLM2 135M and Gemma 3 270M), each loaded when a request names it,
//! the least recently used idle one unloaded to stay under
//! `--models-max`, `keep_alive` and the idle timeout unloading, the
//! load/unload endpoints, Ollama's names and `/api/ps`, presets, and the
//! memory an unloaded model gives back.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::server::{exchange, Server};
use minfer_testutil::{require_model, GEMMA3, SMOLLM};
use serde_json::{json, Value};

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

fn call(addr: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let (status, body) = exchange(addr, method, path, &text);
    (status, json_of(&body))
}

/// A directory with the two models as `smol.gguf` and `gemma.gguf`, or
/// `None` (a recorded skip).
fn models_dir() -> Option<tempfile::TempDir> {
    let smol = require_model(SMOLLM)?;
    let gemma = require_model(GEMMA3)?;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(smol, dir.path().join("smol.gguf")).unwrap();
    std::os::unix::fs::symlink(gemma, dir.path().join("gemma.gguf")).unwrap();
    Some(dir)
}

/// Each model's `status.value` in `GET /v1/models`, by id.
fn states(addr: &str) -> Vec<(String, String)> {
    let (status, body) = call(addr, "GET", "/v1/models", &Value::Null);
    assert_eq!(status, 200, "{body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["id"].as_str().unwrap().to_string();
            (id, m["status"]["value"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

fn state_of(addr: &str, id: &str) -> String {
    states(addr)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("{id} is not listed"))
}

/// Polls until `id` is in `want`, for at most `limit`.
fn wait_state(addr: &str, id: &str, want: &str, limit: Duration) {
    let t = Instant::now();
    while state_of(addr, id) != want {
        assert!(
            t.elapsed() < limit,
            "{id} did not become {want}: {:?}",
            states(addr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The prompt every greedy answer continues (Gemma 3 270M is a base
/// model: no chat template).
const PROMPT: &str = "The three primary colours are";

/// The greedy 12-token completion of `model` (and the model it names).
fn greedy(addr: &str, model: &str) -> (String, String) {
    let req = json!({"model": model, "max_tokens": 12, "temperature": 0, "prompt": PROMPT});
    let (status, body) = call(addr, "POST", "/v1/completions", &req);
    assert_eq!(status, 200, "{body}");
    let text = body["choices"][0]["text"].as_str().unwrap();
    (
        text.to_string(),
        body["model"].as_str().unwrap().to_string(),
    )
}

/// The server's resident memory in KiB.
fn rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn start(dir: &Path, home: &Path, extra: &[&str]) -> Server {
    let d = dir.to_str().unwrap();
    let mut args = vec!["--models-dir", d, "-c", "512", "--np", "1"];
    args.extend_from_slice(extra);
    Server::start_models(home, &args, &[])
}

#[test]
fn models_load_on_request_and_the_least_recently_used_makes_room() {
    let Some(dir) = models_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let server = start(dir.path(), home.path(), &["--models-max", "1"]);
    let addr = &server.addr;
    let idle_kib = rss_kib(&server);
    assert_eq!(
        states(addr),
        [
            ("gemma".to_string(), "unloaded".to_string()),
            ("smol".to_string(), "unloaded".to_string())
        ]
    );
    let (smol_text, named) = greedy(addr, "smol");
    assert_eq!(named, "smol");
    assert_eq!(state_of(addr, "smol"), "loaded");
    let loaded_kib = rss_kib(&server);

    // A second model: the first, idle, is unloaded to make room.
    let (gemma_text, named) = greedy(addr, "gemma");
    assert_eq!(named, "gemma");
    assert_ne!(gemma_text, smol_text, "two models, two answers");
    assert_eq!(state_of(addr, "smol"), "unloaded");
    assert_eq!(state_of(addr, "gemma"), "loaded");

    // Ollama's name for it; the model comes back with the same answer.
    let req = json!({"model": "smol:latest", "stream": false, "raw": true, "prompt": PROMPT,
                     "options": {"temperature": 0, "num_predict": 12}});
    let (status, body) = call(addr, "POST", "/api/generate", &req);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"], smol_text.as_str());
    assert_eq!(greedy(addr, "smol").0, smol_text);

    // An unknown name is a 404, not the default model (there is none).
    let req = json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = call(addr, "POST", "/v1/chat/completions", &req);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found");

    // Unloaded, the memory goes back: all but a tenth of what the model
    // took, and a second load and unload keeps nothing more.
    let unloaded_kib = unload_all(&server);
    greedy(addr, "gemma");
    greedy(addr, "smol");
    let again_kib = unload_all(&server);
    eprintln!(
        "RSS: idle {idle_kib} KiB, SmolLM2 loaded {loaded_kib} KiB, \
         unloaded {unloaded_kib} KiB, unloaded again {again_kib} KiB"
    );
    assert!(
        unloaded_kib - idle_kib <= (loaded_kib - idle_kib) / 10,
        "RSS {unloaded_kib} KiB after the unload, {idle_kib} KiB idle, {loaded_kib} KiB loaded"
    );
    assert!(
        again_kib <= unloaded_kib + unloaded_kib / 10,
        "{again_kib} KiB"
    );
}

/// Unloads every loaded model; the server's resident memory after.
fn unload_all(server: &Server) -> u64 {
    for (id, state) in states(&server.addr) {
        if state == "loaded" {
            let (status, body) = call(
                &server.addr,
                "POST",
                "/models/unload",
                &json!({"model": id}),
            );
            assert_eq!((status, &body["success"]), (200, &json!(true)), "{body}");
        }
    }
    // The model threads end within a step.
    std::thread::sleep(Duration::from_millis(500));
    rss_kib(server)
}

#[test]
fn keep_alive_load_unload_and_ollama_ps() {
    let Some(dir) = models_dir() else { return };
    std::fs::write(dir.path().join("broken.gguf"), b"GGUF but not really").unwrap();
    let home = tempfile::tempdir().unwrap();
    let server = start(dir.path(), home.path(), &["--keep-alive", "1s"]);
    let addr = &server.addr;

    // A model that cannot load is an error naming its file; the others
    // serve on.
    let req = json!({"model": "broken", "max_tokens": 2, "prompt": PROMPT});
    let (status, body) = call(addr, "POST", "/v1/completions", &req);
    assert_eq!(status, 500, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broken.gguf"),
        "{body}"
    );
    assert_eq!(state_of(addr, "broken"), "failed");
    // keep_alive on an OpenAI request: 0 unloads the model once answered.
    let req = json!({"model": "smol", "max_tokens": 2, "prompt": PROMPT, "keep_alive": 0});
    assert_eq!(call(addr, "POST", "/v1/completions", &req).0, 200);
    wait_state(addr, "smol", "unloaded", Duration::from_secs(10));

    let (status, body) = call(addr, "POST", "/models/load", &json!({"model": "gemma"}));
    assert_eq!((status, &body["success"]), (200, &json!(true)), "{body}");
    let (status, _) = call(addr, "POST", "/models/load", &json!({"model": "gemma"}));
    assert_eq!(status, 400, "a model loading or loaded is not loaded twice");
    wait_state(addr, "gemma", "loaded", Duration::from_secs(60));
    let (_, ps) = call(addr, "GET", "/api/ps", &Value::Null);
    assert_eq!(ps["models"][0]["name"], "gemma:latest", "{ps}");
    assert!(
        ps["models"][0]["size"].as_u64().unwrap() > 100_000_000,
        "{ps}"
    );
    // Idle past its keep-alive (1 s), it is unloaded.
    wait_state(addr, "gemma", "unloaded", Duration::from_secs(10));
    let (_, ps) = call(addr, "GET", "/api/ps", &Value::Null);
    assert_eq!(ps["models"], json!([]), "{ps}");

    // A request's keep_alive: -1 keeps the model past the server's.
    let req = json!({"model": "smol", "keep_alive": -1, "stream": false,
                     "messages": [{"role": "user", "content": "hi"}], "options": {"num_predict": 2}});
    assert_eq!(call(addr, "POST", "/api/chat", &req).0, 200);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(state_of(addr, "smol"), "loaded");
    // Ollama's unload: no messages and keep_alive 0.
    let req = json!({"model": "smol", "keep_alive": 0, "messages": []});
    let (status, body) = call(addr, "POST", "/api/chat", &req);
    assert_eq!(
        (status, &body["done_reason"]),
        (200, &json!("unload")),
        "{body}"
    );
    wait_state(addr, "smol", "unloaded", Duration::from_secs(10));
    let (status, _) = call(addr, "POST", "/models/unload", &json!({"model": "smol"}));
    assert_eq!(status, 400, "a model not loaded cannot be unloaded");
}

#[test]
fn presets_and_no_autoload() {
    let Some(dir) = models_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let preset = home.path().join("models.ini");
    let smol = dir.path().join("smol.gguf");
    std::fs::write(
        &preset,
        format!(
            "[*]\nc = 384\n\n[tiny]\nmodel = {}\nc = 256\nload-on-startup = true\nn-gpu-layers = 0\n\n[gemma]\nnp = 2\n",
            smol.display()
        ),
    )
    .unwrap();
    let p = preset.to_str().unwrap();
    let server = start(
        dir.path(),
        home.path(),
        &["--models-preset", p, "--no-models-autoload"],
    );
    let addr = &server.addr;
    // Loaded at start; the preset's context and the directory's model
    // with the global section's.
    wait_state(addr, "tiny", "loaded", Duration::from_secs(60));
    let (_, props) = call(addr, "GET", "/props?model=tiny", &Value::Null);
    assert_eq!(
        props["default_generation_settings"]["n_ctx"], 256,
        "{props}"
    );
    // Not loaded, and not loaded by a request: 400.
    let req = json!({"model": "gemma", "max_tokens": 2, "prompt": PROMPT});
    let (status, body) = call(addr, "POST", "/v1/completions", &req);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not loaded"));
    assert_eq!(
        call(addr, "POST", "/models/load", &json!({"model": "gemma"})).0,
        200
    );
    wait_state(addr, "gemma", "loaded", Duration::from_secs(60));
    let (_, props) = call(addr, "GET", "/props?model=gemma", &Value::Null);
    assert_eq!(
        props["default_generation_settings"]["n_ctx"], 384,
        "{props}"
    );
    assert_eq!(props["total_slots"], 2, "{props}");
    assert_eq!(call(addr, "POST", "/v1/completions", &req).0, 200);
    // Without a model name there is no default to answer.
    let (status, props) = call(addr, "GET", "/props", &Value::Null);
    assert_eq!((status, &props["role"]), (200, &json!("router")), "{props}");
}

#[test]
fn two_models_answer_at_once_as_each_does_alone() {
    let Some(dir) = models_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let server = start(dir.path(), home.path(), &[]);
    let addr = server.addr.clone();
    let alone = (greedy(&addr, "smol").0, greedy(&addr, "gemma").0);
    let together = std::thread::scope(|s| {
        let a = s.spawn(|| greedy(&addr, "smol").0);
        let b = s.spawn(|| greedy(&addr, "gemma").0);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(together, alone);
}

/// A one-file Hugging Face stand-in on loopback: every GET or HEAD gets
/// `file`'s bytes (no redirect, no checksum headers: the store then
/// checks the GGUF structure only). Returns its base URL.
fn file_server(file: std::path::PathBuf) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let bytes = std::fs::read(&file).unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut conn = conn;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = conn.write_all(head.as_bytes());
            if first.starts_with("GET") {
                let _ = conn.write_all(&bytes);
            }
        }
    });
    url
}

#[test]
fn ollama_pull_copy_and_delete() {
    let Some(dir) = models_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let hub = file_server(dir.path().join("smol.gguf"));
    let d = dir.path().to_str().unwrap();
    let args = ["--models-dir", d, "-c", "512", "--np", "1"];
    let server = Server::start_models(home.path(), &args, &[("HF_ENDPOINT", &hub)]);
    let addr = &server.addr;

    // A pull streams Ollama's lines and ends in success.
    let (status, body) = exchange(
        addr,
        "POST",
        "/api/pull",
        r#"{"model": "hf:o/r/smol.gguf"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let lines: Vec<Value> = body
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(json_of)
        .collect();
    assert_eq!(
        lines.first().unwrap()["status"],
        "pulling manifest",
        "{body}"
    );
    assert_eq!(lines.last().unwrap()["status"], "success", "{body}");
    let (_, tags) = call(addr, "GET", "/api/tags", &Value::Null);
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"hf:o/r/smol.gguf"), "{names:?}");
    assert_eq!(greedy(addr, "hf:o/r/smol.gguf").0, greedy(addr, "smol").0);
    // An unknown name: Ollama's error line, not success.
    let (status, body) = exchange(
        addr,
        "POST",
        "/api/pull",
        r#"{"model": "no-such-model", "stream": false}"#,
    );
    assert_eq!(status, 404, "{body}");

    // A copy is a second name of the same file; a delete removes it.
    let copy = json!({"source": "hf:o/r/smol.gguf", "destination": "mine"}).to_string();
    assert_eq!(exchange(addr, "POST", "/api/copy", &copy).0, 200);
    assert_eq!(greedy(addr, "mine:latest").0, greedy(addr, "smol").0);
    let (status, _) = exchange(addr, "DELETE", "/api/delete", r#"{"model": "mine"}"#);
    assert_eq!(status, 200);
    let (_, tags) = call(addr, "GET", "/api/tags", &Value::Null);
    assert!(!tags.to_string().contains("\"mine:latest\""), "{tags}");
    let (status, body) = exchange(addr, "DELETE", "/api/delete", r#"{"model": "mine"}"#);
    assert_eq!(status, 404, "{body}");
    // A model of --models-dir is the user's file: not deleted.
    let (status, body) = exchange(addr, "DELETE", "/api/delete", r#"{"model": "smol"}"#);
    assert_eq!(status, 400, "{body}");
    assert!(dir.path().join("smol.gguf").exists());
}
