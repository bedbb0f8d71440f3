//! `minfer serve` as users run it, tested with the official `openai`
//! Python client (crates/server/tests/python), then shut down with SIGTERM
//! while a stream is in flight.
//!
//! The Python interpreter with the official `openai`, `anthropic` and
//! `ollama` clients, `pytest` and `selenium` installed is named by
//! MINFER_TEST_PYTHON (`scripts/test.sh` makes that venv). Without it the test
//! fails, unless MINFER_REQUIRE_MODELS=0 turns that into a recorded skip.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::server::{send, wait_for, Server};

fn python() -> Option<PathBuf> {
    match std::env::var_os("MINFER_TEST_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            minfer_testutil::skip(
                "MINFER_TEST_PYTHON (a Python with openai, anthropic, ollama, pytest and selenium)",
                "scripts/test.sh creates it in target/pyenv with the pinned versions",
            );
            None
        }
    }
}

/// The reasoning fixture: the tiny qwen3 model with Qwen3's chat template
/// and thinking tokens (scripts/make-think-fixture.py, which needs the
/// `gguf` package `scripts/test.sh` installs).
fn think_fixture() -> PathBuf {
    let root = minfer_testutil::workspace_root();
    let out = root.join("target/fixtures/qwen3-think-tiny.gguf");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = Command::new("python3")
        .arg(root.join("scripts/make-think-fixture.py"))
        .arg(&out)
        .status()
        .expect("run python3 scripts/make-think-fixture.py");
    assert!(status.success(), "make-think-fixture.py failed: {status}");
    out
}

#[test]
fn openai_client_against_minfer_serve() {
    let Some(model) = minfer_testutil::require_model(minfer_testutil::SMOLLM) else {
        return;
    };
    let Some(qwen) = minfer_testutil::require_model(minfer_testutil::QWEN) else {
        return;
    };
    // The three-models session of test_models.py uses Gemma 3 too.
    if minfer_testutil::require_model(minfer_testutil::GEMMA3).is_none() {
        return;
    }
    let Some(python) = python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let mut servers = start_servers(&model, &qwen, home.path());
    let soak_summary = home.path().join("soak-summary.json");
    run_pytest(&python, &model, &servers, &soak_summary);
    drain_on_sigterm(&mut servers.open);
    for s in [
        &mut servers.keyed,
        &mut servers.tools,
        &mut servers.thinking,
    ] {
        let status = s.terminate(Duration::from_secs(30));
        assert!(status.success(), "{status}");
    }
}

/// The four servers the Python tests talk to.
struct Servers {
    /// Open to all, four slots, a prompt-cache budget, no speculation.
    open: Server,
    /// Behind an API key, with speculation and a one-request queue.
    keyed: Server,
    /// A model whose template takes tools, with prompt lookup.
    tools: Server,
    /// The reasoning fixture, under an alias, with CORS.
    thinking: Server,
}

fn start_servers(model: &Path, qwen: &Path, home: &Path) -> Servers {
    let open = Server::start(
        model,
        home,
        // The soak test bounds the RSS: the prompt-cache tier gets a
        // budget it counts. Without speculation (on by default): the
        // reference the speculating servers' answers are checked against.
        &[
            "--lookup",
            "0",
            "-np",
            "4",
            "--n-ctx",
            "8192",
            "--drain-timeout",
            "5",
            "--cache-ram",
            "128",
        ],
    );
    let keyed = Server::start(
        model,
        home,
        &[
            "-np",
            "2",
            "--queue",
            "1",
            "--n-ctx",
            "512",
            "--api-key",
            "sesame",
            "--strict-model",
            // Speculation, the model drafting for itself with every guess
            // checked, and prompt lookup: test_speculative.py compares its
            // answers with the open server's.
            "--draft",
            model.to_str().unwrap(),
            "--spec-fixed",
            "--draft-max",
            "4",
            "--lookup",
            "2",
        ],
    );
    // Tools and n > 1 on a model whose template takes tools, with adaptive
    // prompt lookup: those tests run with speculation on. Keep-alive
    // events every second, so that a prompt of a few thousand tokens shows
    // them.
    let tools = Server::start(
        qwen,
        home,
        &[
            "-np",
            "4",
            "--n-ctx",
            "4096",
            "--lookup",
            "3",
            "--sse-keepalive",
            "1",
        ],
    );
    let think = think_fixture();
    let thinking = Server::start(
        &think,
        home,
        &[
            "-np",
            "2",
            "--n-ctx",
            "1024",
            "--alias",
            "thinker",
            "--cors-origins",
            "http://page.example",
        ],
    );
    Servers {
        open,
        keyed,
        tools,
        thinking,
    }
}

/// Runs the Python client tests against `s`; they must all pass and the
/// soak test must write its summary to `soak_summary`.
fn run_pytest(python: &Path, model: &Path, s: &Servers, soak_summary: &Path) {
    let tests = minfer_testutil::workspace_root().join("crates/server/tests/python");
    let mut pytest = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
        .arg(&tests)
        .env("MINFER_BASE_URL", s.open.url())
        .env("MINFER_KEYED_URL", s.keyed.url())
        .env("MINFER_KEY", "sesame")
        .env("MINFER_MODEL_ID", &s.open.model)
        .env("MINFER_BIN", env!("CARGO_BIN_EXE_minfer"))
        .env("MINFER_MODEL_PATH", model)
        .env("MINFER_TOOLS_URL", s.tools.url())
        .env("MINFER_TOOLS_MODEL", &s.tools.model)
        .env("MINFER_THINK_URL", s.thinking.url())
        .env("MINFER_THINK_MODEL", &s.thinking.model)
        .env("MINFER_SERVER_PID", s.open.child.id().to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MINFER_SOAK_SUMMARY", soak_summary)
        .env("MINFER_MODELS_DIR", minfer_testutil::models_dir())
        .env(
            "MINFER_MODELS_SUMMARY",
            soak_summary.with_extension("models.json"),
        )
        .stdin(Stdio::null())
        .spawn()
        .expect("run pytest");
    let status = match wait_for(&mut pytest, Duration::from_secs(900)) {
        Some(s) => s,
        None => {
            let _ = pytest.kill();
            panic!("pytest ran past 15 minutes");
        }
    };
    // pytest's 5 (no tests collected) fails here like any other non-zero.
    assert_eq!(status.code(), Some(0), "pytest failed: {status}");
    match std::fs::read_to_string(soak_summary) {
        Ok(s) => eprintln!("soak summary: {s}"),
        Err(e) => panic!("the soak test wrote no summary ({e})"),
    }
    match std::fs::read_to_string(soak_summary.with_extension("models.json")) {
        Ok(s) => eprintln!("three models in one session: {s}"),
        Err(e) => panic!("the models test wrote no summary ({e})"),
    }
}

/// Drain: a stream in flight when SIGTERM arrives still finishes.
fn drain_on_sigterm(open: &mut Server) {
    let body = format!(
        r#"{{"model":"{}","messages":[{{"role":"user","content":"Count to twenty."}}],"max_tokens":48,"temperature":0,"stream":true}}"#,
        open.model
    );
    let mut conn = send(&open.addr, "POST", "/v1/chat/completions", &body);
    let mut first = [0u8; 64];
    let n = conn.read(&mut first).expect("the stream starts");
    assert!(n > 0);
    let status = {
        let pid = open.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let mut rest = String::new();
        let _ = conn.read_to_string(&mut rest);
        assert!(
            rest.contains("data: [DONE]"),
            "the drained stream ends properly: {rest}"
        );
        wait_for(&mut open.child, Duration::from_secs(30)).expect("exits after draining")
    };
    assert!(
        status.success(),
        "minfer serve exits 0 after SIGTERM: {status}"
    );
}

#[test]
fn serve_rejects_bad_options_before_loading() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["serve", "x.gguf", "-np", "0"][..],
        &["serve", "x.gguf", "--max-body", "lots"],
        &["serve", "x.gguf", "--drain-timeout", "soon"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_minfer"))
            .args(args)
            .env("MINFER_HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // A missing model file is an error naming it, not a hang.
    let out = Command::new(env!("CARGO_BIN_EXE_minfer"))
        .args(["serve", "/nonexistent/model.gguf", "--port", "0"])
        .env("MINFER_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("model.gguf"));
}

#[test]
fn serve_refuses_a_chat_template_it_cannot_use() {
    let Some(model) = minfer_testutil::require_model(minfer_testutil::SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let broken = home.path().join("broken.jinja");
    std::fs::write(&broken, "{% for m in messages %}{{ m.content }").unwrap();
    for (flag, value, named) in [
        (
            "--chat-template",
            "alpaca".to_string(),
            "--chat-template alpaca",
        ),
        (
            "--chat-template-file",
            broken.display().to_string(),
            "--chat-template-file",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_minfer"))
            .arg("serve")
            .arg(&model)
            .args(["--port", "0", flag, &value])
            .env("MINFER_HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{flag}: {err}");
    }
}
