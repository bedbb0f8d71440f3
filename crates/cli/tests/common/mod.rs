//! Running the real `minfer` binary the way a user does, for the CLI tests.

#![allow(dead_code)]

pub mod proxy;
pub mod server;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// A `minfer` command with its store in `home` (so nothing is pulled into
/// the user's store) and without a terminal anywhere.
pub fn command(args: &[&str], home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_minfer"));
    c.args(args)
        .env("MINFER_HOME", home)
        // A test must never download a model behind the test's back.
        .env("MINFER_PYTHON", "/nonexistent/python-for-minfer-tests")
        .env_remove("MINFER_SIMD")
        .stdin(Stdio::null());
    c
}

/// Runs `minfer ARGS` with an empty stdin.
pub fn minfer(args: &[&str], home: &Path) -> Output {
    command(args, home).output().expect("run minfer")
}

/// Starts `minfer ARGS` with stdin, stdout and stderr all piped, for a
/// test that talks to it while it runs.
pub fn spawn_piped(args: &[&str], home: &Path) -> Child {
    command(args, home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn minfer")
}

/// Runs `minfer ARGS` with `input` on stdin.
pub fn minfer_stdin(args: &[&str], home: &Path, input: &str) -> Output {
    let mut child = spawn_piped(args, home);
    let mut stdin = child.stdin.take().unwrap();
    // A command that fails before reading its input (a missing model, say)
    // may have exited already: a closed pipe here is its answer, not an
    // error of the test.
    if let Err(e) = stdin.write_all(input.as_bytes()) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing stdin: {e}"
        );
    }
    drop(stdin);
    child.wait_with_output().expect("wait for minfer")
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a failure the way a user should see it: exit code `code`,
/// nothing on stdout, exactly one line on stderr that starts with
/// "error: " and contains every one of `needles`, and no panic.
pub fn assert_one_line_error(out: &Output, code: i32, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "exit status; stderr: {err}");
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(out));
    assert!(err.ends_with('\n'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// The golden `chat-capital` prompt of SmolLM2 (raw ChatML) and the text
/// of llama.cpp's first `max` greedy tokens for it, the end-of-generation
/// token excluded (see `run.rs` for why this prompt).
#[allow(dead_code)]
pub fn golden_capital(model: &Path, max: usize) -> (String, String) {
    let dir = minfer_testutil::golden_dir();
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap()
    };
    let prompts = read("prompts.json");
    let prompt = prompts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "chat-capital")
        .unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    let golden = read("greedy-smollm2.json");
    let case = golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "chat-capital")
        .unwrap();
    let file = minfer_gguf::GgufFile::open(model).unwrap();
    let tok = minfer_engine::Tokenizer::from_gguf(file.metadata()).unwrap();
    let text: Vec<u8> = case["greedy_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .take_while(|&id| !tok.is_eog(id))
        .take(max)
        .flat_map(|id| tok.decode_token(id).to_vec())
        .collect();
    (prompt, String::from_utf8(text).unwrap())
}

/// Waits for `scripts/test.sh`'s background install of the live clients
/// into `dir` (it writes `installed`, holding the install's exit status,
/// when done; where there is no `install.log` they were installed by
/// hand). Panics with the log's end when the install failed or outlasted
/// `limit`.
pub fn clients_installed(dir: &Path, limit: std::time::Duration) {
    let done = dir.join("installed");
    let log = dir.join("install.log");
    let deadline = std::time::Instant::now() + limit;
    while !done.exists() && log.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the clients' install into {} did not finish within {limit:?}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let status = std::fs::read_to_string(&done).unwrap_or_else(|_| "0".into());
    if status.trim() != "0" {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        panic!(
            "installing the clients failed (exit {}): {}",
            status.trim(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}
