//! Helpers for tests that need the real models or the golden data.
//!
//! Real-model tests call [`require_model`]. Locally, a missing model makes
//! the test print a loud SKIPPED line and return; with
//! `MINFER_REQUIRE_MODELS=1` (set by CI) a missing model fails the test, so
//! CI can never pass without having exercised the real files.

use std::path::PathBuf;

/// File name of the Qwen2.5-Coder-0.5B-Instruct Q4_K_M model in the store.
pub const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// File name of the SmolLM2-135M-Instruct Q4_1 model in the store.
pub const SMOLLM: &str = "smollm2-135m-instruct-q4_1.gguf";

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

/// Whether missing real models must fail tests instead of skipping them.
pub fn models_required() -> bool {
    std::env::var("MINFER_REQUIRE_MODELS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The path of a real model, or `None` (after a loud message) when it is
/// absent and not required. Panics when it is absent and required.
pub fn require_model(file: &str) -> Option<PathBuf> {
    let path = models_dir().join(file);
    if path.is_file() {
        return Some(path);
    }
    if models_required() {
        panic!(
            "MINFER_REQUIRE_MODELS is set but {} is missing; run `minfer pull` first",
            path.display()
        );
    }
    eprintln!(
        "\n*** SKIPPED: real model {} not found (run `minfer pull`); \
         set MINFER_REQUIRE_MODELS=1 to make this a failure ***\n",
        path.display()
    );
    None
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root exists")
}

/// The golden reference data, `../shared/golden` beside the checkout, or
/// `$MINFER_GOLDEN` when set.
pub fn golden_dir() -> PathBuf {
    std::env::var_os("MINFER_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/golden"))
}
