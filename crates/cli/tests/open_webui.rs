//! Open WebUI, the chat front end people put before a local server,
//! pointed at `minfer serve` and driven in headless Chromium: one chat
//! answered.
//!
//! Open WebUI comes from PyPI at a pinned version (`scripts/test.sh`
//! installs it into `open-webui/` under MINFER_AGENTS_DIR), runs offline
//! with sign-in off and retrieval bypassed (it would fetch an embedding
//! model), and talks to the server through `scripts/agents/record_proxy.py`
//! so that what it sent is kept in `target/agent-runs/open-webui.jsonl`.
//! `scripts/agents/open_webui_chat.py` (Selenium, in the MINFER_TEST_PYTHON
//! venv) types the question and waits for the answer. SmolLM2 answers: the
//! page sends its 36 built-in tools with every chat (some 6k tokens).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::proxy::{free_port, records, wait_listening, Proxy, Stopped};
use common::server::Server;

fn need(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            minfer_testutil::skip(
                &format!("{var} ({what})"),
                "scripts/test.sh installs it at the pinned version",
            );
            None
        }
    }
}

/// Open WebUI on a free port, backed by `upstream` (an OpenAI base URL).
fn open_webui(bin: &Path, data: &Path, upstream: &str, log: &Path) -> (Stopped, u16) {
    let port = free_port();
    let child = Command::new(bin)
        .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
        .current_dir(data)
        .env("DATA_DIR", data)
        .env("WEBUI_AUTH", "False")
        .env("OFFLINE_MODE", "True")
        .env("HF_HUB_OFFLINE", "1")
        .env("ENABLE_OLLAMA_API", "False")
        .env("OPENAI_API_BASE_URL", upstream)
        .env("OPENAI_API_KEY", "sk-local")
        .env("BYPASS_EMBEDDING_AND_RETRIEVAL", "True")
        .env("ENABLE_WEB_SEARCH", "False")
        .env("ENABLE_VERSION_UPDATE_CHECK", "False")
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(log).unwrap()))
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(log).unwrap(),
        ))
        .spawn()
        .expect("start open-webui");
    let child = Stopped(child);
    wait_listening(port, Duration::from_secs(300), "open-webui");
    (child, port)
}

#[test]
fn open_webui_answers_a_chat_against_minfer_serve() {
    let Some(model) = minfer_testutil::require_model(minfer_testutil::SMOLLM) else {
        return;
    };
    let Some(dir) = need("MINFER_AGENTS_DIR", "Open WebUI installed") else {
        return;
    };
    let Some(python) = need("MINFER_TEST_PYTHON", "a Python with selenium") else {
        return;
    };
    common::clients_installed(&dir, Duration::from_secs(45 * 60));
    let root = minfer_testutil::workspace_root();
    let runs = root.join("target/agent-runs");
    std::fs::create_dir_all(&runs).unwrap();
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(&model, home.path(), &["-np", "2", "--n-ctx", "8192"]);

    let record = runs.join("open-webui.jsonl");
    let _ = std::fs::remove_file(&record);
    let proxy = Proxy::start(&server.url(), &record);
    let data = home.path().join("open-webui");
    std::fs::create_dir_all(&data).unwrap();
    let upstream = format!("{}/v1", proxy.url);
    let (ui, port) = open_webui(
        &dir.join("open-webui/bin/open-webui"),
        &data,
        &upstream,
        &runs.join("open-webui.log"),
    );

    let out = Command::new(&python)
        .arg(root.join("scripts/agents/open_webui_chat.py"))
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg("What is the capital of France? Answer in one word.")
        .arg("420")
        .arg("--shot")
        .arg(runs.join("open-webui.png"))
        .output()
        .expect("run scripts/agents/open_webui_chat.py");
    drop(ui);
    drop(proxy);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("open_webui_chat.py: {stdout}");
    let records = records(&record);
    for r in &records {
        eprintln!(
            "   {} {} -> {} in {} s",
            r["method"].as_str().unwrap_or(""),
            r["path"].as_str().unwrap_or(""),
            r["status"],
            r["elapsed_s"]
        );
    }
    assert!(
        out.status.success(),
        "no answer on the page: {stdout}\n{}",
        stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert!(
        !answer["answer"].as_str().unwrap_or("").is_empty(),
        "{answer}"
    );
    // The page's chat went through minfer, and nothing it sent was refused.
    assert!(
        records
            .iter()
            .any(|r| r["path"] == "/v1/chat/completions" && r["status"] == 200),
        "no chat completion went through the proxy"
    );
    // Requests the page's backend still had in flight when the test
    // stopped (it asks for a title and tags after each answer) have no
    // status: they were cut by the test, not refused.
    for r in records.iter().filter(|r| !r["status"].is_null()) {
        let status = r["status"].as_u64().unwrap_or(0);
        assert!(
            (200..400).contains(&status),
            "{} {} answered {status}: {}",
            r["method"],
            r["path"],
            r["response_head"]
        );
    }
}
