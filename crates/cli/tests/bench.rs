//! `minfer bench` through the real binary: llama-bench's tests, with a
//! context depth, in its output formats.

mod common;

use common::minfer;
use minfer_testutil::{require_model, SMOLLM};

#[test]
fn bench_reports_pp_and_tg_at_a_depth() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = model.to_str().unwrap();
    let out = minfer(
        &[
            "bench", model, "-p", "8", "-n", "4", "-d", "16", "-r", "2", "-t", "2", "-o", "json",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let rows = rows.as_array().unwrap();
    let tests: Vec<&str> = rows.iter().map(|r| r["test"].as_str().unwrap()).collect();
    assert_eq!(tests, ["pp8 @ d16", "tg4 @ d16"]);
    for r in rows {
        assert_eq!(r["threads"], 2);
        assert_eq!(r["samples_ts"].as_array().unwrap().len(), 2);
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0, "{r}");
    }
    // Without a depth the names are llama-bench's plain ones.
    let out = minfer(
        &["bench", model, "-p", "8", "-n", "0", "-r", "1", "-o", "csv"],
        dir.path(),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().nth(1).is_some_and(|l| l.contains(",pp8,")),
        "{text}"
    );
}
