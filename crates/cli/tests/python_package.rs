//! The Python package as a user gets it: `pip install ./crates/python`
//! into a fresh virtual environment (maturin comes from PyPI, the Rust
//! build from this workspace), then its pytest suite (crates/python/tests)
//! on the real models: the native API against the CLI, streaming, threads,
//! errors, Ctrl-C, and llama-cpp-python's README examples with only the
//! import changed.
//!
//! Needs MINFER_TEST_PYTHON (any Python 3.9+ with `venv`; scripts/test.sh
//! makes one); without it the test fails, unless MINFER_REQUIRE_MODELS=0
//! turns that into a recorded skip.

use std::process::Command;

use minfer_testutil::{require_model, workspace_root, QWEN, SMOLLM};

#[test]
fn pip_installs_the_package_and_its_tests_pass() {
    let (Some(_), Some(_)) = (require_model(SMOLLM), require_model(QWEN)) else {
        return;
    };
    let python = match std::env::var_os("MINFER_TEST_PYTHON") {
        Some(p) if !p.is_empty() => p,
        _ => {
            minfer_testutil::skip(
                "MINFER_TEST_PYTHON (a Python 3.9+ with venv)",
                "scripts/test.sh creates it in target/pyenv",
            );
            return;
        }
    };
    let root = workspace_root();
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let ok = |c: &mut Command, what: &str| {
        let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(
        Command::new(&python).args(["-m", "venv"]).arg(&venv),
        "venv",
    );
    let pip = venv.join("bin/pip");
    let t = std::time::Instant::now();
    ok(
        Command::new(&pip)
            .args(["install", "-q"])
            .arg(root.join("crates/python"))
            .arg("pytest==8.3.4")
            .current_dir(&root),
        "pip install ./crates/python",
    );
    println!(
        "pip install ./crates/python: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let out = ok(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-v", "-p", "no:cacheprovider"])
            .arg(root.join("crates/python/tests"))
            .env("MINFER_BIN", env!("CARGO_BIN_EXE_minfer"))
            .env("MINFER_MODELS_DIR", minfer_testutil::models_dir())
            .current_dir(dir.path()),
        "pytest crates/python/tests",
    );
    println!("{out}");
    assert!(out.contains(" passed"), "{out}");
    assert!(!out.contains("skipped"), "every test must run: {out}");
}
