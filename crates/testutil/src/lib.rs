//! Helpers for tests that need the real models, Python references or the
//! golden data.
//!
//! A test that cannot run because something it needs is missing fails by
//! default, so a green run always means every test really ran. Setting
//! `MINFER_REQUIRE_MODELS=0` turns those failures into skips for local work
//! without the models: each skip prints a loud `SKIPPED` line (visible with
//! `--nocapture`) and is appended to `target/minfer-skipped.txt`, which
//! `scripts/test-summary.sh` prints at the end of a run.

pub mod counting;

use std::io::Write;
use std::path::PathBuf;

/// File name of the Qwen2.5-Coder-0.5B-Instruct Q4_K_M model in the store.
pub const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// File name of the SmolLM2-135M-Instruct Q4_1 model in the store.
pub const SMOLLM: &str = "smollm2-135m-instruct-q4_1.gguf";
/// File name of the Qwen2.5-Coder-1.5B-Instruct Q4_K_M model in the store.
pub const QWEN_1_5B: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// File name of the Gemma-3-270M Q4_K_M model in the store.
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

/// A small model the repository carries itself (`tests/models/<file>`),
/// such as the random-weight qwen3 model for architecture tests.
pub fn repo_model(file: &str) -> PathBuf {
    workspace_root().join("tests").join("models").join(file)
}

/// The model store directory, following the same rule as the binary:
/// `$MINFER_HOME/models`, by default `~/.cache/minfer/models`.
pub fn models_dir() -> PathBuf {
    let home = std::env::var_os("MINFER_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let h = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
            PathBuf::from(h).join(".cache").join("minfer")
        });
    home.join("models")
}

/// Whether a missing model or reference must fail the test (the default).
/// Only `MINFER_REQUIRE_MODELS=0` (or an empty value) allows skipping.
pub fn models_required() -> bool {
    std::env::var("MINFER_REQUIRE_MODELS").map_or(true, |v| !(v.is_empty() || v == "0"))
}

/// Where skips are recorded so that a run can report them at its end.
pub fn skip_ledger() -> PathBuf {
    workspace_root().join("target").join("minfer-skipped.txt")
}

/// Reports that the calling test cannot run because `what` is missing
/// (`fix` says how to get it). Panics when skipping is not allowed;
/// otherwise prints a loud line, records it in [`skip_ledger`] and returns,
/// so the caller can `return` early.
pub fn skip(what: &str, fix: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string();
    if models_required() {
        panic!(
            "{test}: {what} is missing ({fix}); \
             MINFER_REQUIRE_MODELS=0 turns this into a recorded skip"
        );
    }
    eprintln!("\n*** SKIPPED {test}: {what} is missing ({fix}) ***\n");
    let ledger = skip_ledger();
    if let Some(dir) = ledger.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // One short line per skip: appends of this size from several test
    // processes do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ledger)
    {
        let _ = writeln!(f, "{test}: {what} ({fix})");
    }
}

/// The path of a real model, or `None` when it is absent and skipping is
/// allowed (see [`skip`]). Panics when it is absent and required.
pub fn require_model(file: &str) -> Option<PathBuf> {
    let path = models_dir().join(file);
    if path.is_file() {
        return Some(path);
    }
    skip(
        &format!("real model {}", path.display()),
        "run `minfer pull`",
    );
    None
}

/// Whether tests that download from the network (PyPI) may run: the same
/// switch as the real-model tests, so `MINFER_REQUIRE_MODELS=0` keeps a run
/// offline.
pub fn network_tests_enabled() -> bool {
    if models_required() {
        return true;
    }
    skip(
        "permission to download from PyPI",
        "network tests run unless MINFER_REQUIRE_MODELS=0",
    );
    false
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root exists")
}

/// The golden reference data the tests read: the repository's own copy in
/// `tests/golden`, or `$MINFER_GOLDEN` when set.
pub fn golden_dir() -> PathBuf {
    std::env::var_os("MINFER_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests").join("golden"))
}

/// The upstream folder the repository's copy of the golden data was taken
/// from, named by `$MINFER_GOLDEN_UPSTREAM` (a clone has none; a
/// maintainer who refreshes the copy points it at the new data).
pub fn upstream_golden_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("MINFER_GOLDEN_UPSTREAM")?);
    dir.is_dir().then_some(dir)
}
