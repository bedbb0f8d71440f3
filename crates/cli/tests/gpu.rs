//! The GPU through the real binary: `minfer devices` lists the adapter CI
//! has (Mesa's software Vulkan driver), `--device` is validated, and
//! `minfer run --device gpu` prints llama.cpp's greedy tokens for a prompt
//! whose every step has a top-2 gap far above the spread between builds,
//! and `minfer bench --device gpu` reports no CPU bandwidth share.

mod common;

use std::path::Path;
use std::process::Output;

use common::{minfer, stderr, stdout};
use minfer_testutil::{require_model, QWEN, SMOLLM};

/// Runs `minfer run MODEL --device gpu --temp 0 REST` in a fresh home.
fn greedy_on_gpu(model: &Path, rest: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        model.to_str().unwrap(),
        "--device",
        "gpu",
        "--temp",
        "0",
    ];
    args.extend_from_slice(rest);
    minfer(&args, home.path())
}

#[test]
fn devices_lists_the_software_adapter() {
    let home = tempfile::tempdir().unwrap();
    let out = minfer(&["devices"], home.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("gpu:0"), "{text}");
    assert!(text.contains("[software, Vulkan]"), "{text}");
    assert!(text.contains("largest binding"), "{text}");
}

#[test]
fn an_unknown_device_is_a_usage_error() {
    let home = tempfile::tempdir().unwrap();
    let out = minfer(&["run", "--device", "tpu", "hello"], home.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown device \"tpu\""),
        "{}",
        stderr(&out)
    );
    let out = minfer(&["bench", "--device", "gpu:7", "-ngl", "x"], home.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_missing_adapter_index_is_a_clear_error() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let out = minfer(
        &[
            "run",
            model.to_str().unwrap(),
            "--device",
            "gpu:9",
            "-n",
            "1",
            "hi",
        ],
        home.path(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no adapter at that index"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn run_on_the_gpu_prints_llama_cpp_tokens() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let (prompt, want) = common::golden_capital(&model, 8);
    let out = greedy_on_gpu(&model, &["--no-template", "-n", "8", &prompt]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{want}\n"));
}

#[test]
fn the_default_model_answers_on_the_gpu() {
    let Some(model) = require_model(QWEN) else {
        return;
    };
    let out = greedy_on_gpu(&model, &["-n", "6", "What is the capital of France?"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Paris"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("decode: 6 tokens"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_on_the_gpu_gives_no_share_of_the_cpus_bandwidth() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        model.to_str().unwrap(),
        "--device",
        "gpu",
        "-p",
        "8",
        "-n",
        "4",
        "-r",
        "1",
    ];
    let out = minfer(&args, home.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("| tg4 |"), "{text}");
    // The layers read the GPU's memory: neither the CPU's read probe nor
    // its decode kernels say anything about this run.
    assert!(text.contains("GB/s of weights (on the GPU"), "{text}");
    assert!(!text.contains("read bandwidth"), "{text}");
    assert!(!text.contains("kernel choices"), "{text}");
}
