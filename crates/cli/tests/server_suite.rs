//! llama.cpp's own server test suite (`tools/server/tests` of the
//! llama-cpp-python==0.3.36 sdist, which `scripts/test.sh` installs beside
//! the live clients) run against `minfer serve` through
//! `scripts/server-suite/shim.py`, which maps llama-server's flags to
//! minfer's and every model the suite names to SmolLM2-135M.
//!
//! The suite is the judge of llama-server compatibility; what it must
//! show here: every test listed in `scripts/server-suite/expected-minfer.txt`
//! (the ones minfer passed when the list was last written) still passes.
//! A newly passing test is added to the list with `run.py
//! --write-expected`; one that stops passing fails this test by name.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use minfer_testutil::{require_model, workspace_root, SMOLLM};

const TESTS: &str = "llama_cpp_python-0.3.36/vendor/llama.cpp/tools/server/tests";

/// The suite's folder and the venv's Python, or a recorded skip.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let Some(dir) = std::env::var_os("MINFER_AGENTS_DIR").filter(|d| !d.is_empty()) else {
        minfer_testutil::skip(
            "MINFER_AGENTS_DIR (llama.cpp's server test suite installed)",
            "scripts/test.sh installs it into target/agents/llama-suite",
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    common::clients_installed(&dir, Duration::from_secs(40 * 60));
    let root = dir.join("llama-suite");
    Some((root.join(TESTS), root.join("venv/bin/python")))
}

#[test]
fn llama_cpp_server_tests_that_passed_still_pass() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let Some((tests, python)) = suite() else {
        return;
    };
    let root = workspace_root();
    let expected = root.join("scripts/server-suite/expected-minfer.txt");
    let list = std::fs::read_to_string(&expected).unwrap();
    // Only the files with an expected pass: the others would only cost time.
    let mut files: Vec<&str> = list
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split("::").next())
        .collect();
    files.dedup();
    assert!(!files.is_empty(), "{} lists no test", expected.display());
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(root.join("scripts/server-suite/run.py"))
        .args(["--engine", "minfer", "--bin", env!("CARGO_BIN_EXE_minfer")])
        .arg("--suite")
        .arg(&tests)
        .arg("--model")
        .arg(&model)
        .arg("--out")
        .arg(out_dir.path())
        .args(["--timeout", "60", "--port"])
        .arg(common::proxy::free_port().to_string())
        .arg("--expect")
        .arg(&expected)
        .arg("--files")
        .args(&files)
        .env_remove("MINFER_API_KEY")
        .output()
        .expect("run scripts/server-suite/run.py");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "tests of llama.cpp's server suite that passed no longer do (logs in {}):\n{text}",
        out_dir.keep().display()
    );
}
