//! `minfer embed` through the real binary, on the repository's tiny qwen3
//! model: texts from arguments and stdin, the output formats, pooling and
//! normalization flags, and bad input as one-line errors.

mod common;

use common::{assert_one_line_error, minfer, minfer_stdin, stdout};
use serde_json::Value;

fn model() -> String {
    minfer_testutil::repo_model("qwen3-tiny-q8_0.gguf")
        .to_str()
        .unwrap()
        .to_string()
}

/// The model's width.
const N_EMBD: usize = 128;

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

fn vectors(out: &std::process::Output) -> Vec<Vec<f64>> {
    assert!(out.status.success(), "{}", common::stderr(out));
    let v: Value = serde_json::from_str(&stdout(out)).expect("JSON");
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn json_vectors_from_arguments_and_stdin_agree() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let args = ["embed", &m, "--device", "cpu", "--pooling", "mean"];
    let mut with_texts = args.to_vec();
    with_texts.extend(["Hello, world!", "second text"]);
    let a = vectors(&minfer(&with_texts, dir.path()));
    assert_eq!(a.len(), 2);
    for v in &a {
        assert_eq!(v.len(), N_EMBD);
        assert!((norm(v) - 1.0).abs() < 1e-5);
    }
    let b = vectors(&minfer_stdin(
        &args,
        dir.path(),
        "Hello, world!\n\nsecond text\n",
    ));
    assert_eq!(a, b);
    // Raw vectors point the same way, at another length.
    let mut raw = with_texts.clone();
    raw.push("--no-normalize");
    let r = vectors(&minfer(&raw, dir.path()));
    assert!((norm(&r[0]) - 1.0).abs() > 1e-3);
    for (x, y) in r[0].iter().zip(&a[0]) {
        assert!((x / norm(&r[0]) - y).abs() < 1e-5);
    }
}

#[test]
fn text_format_and_per_token_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let out = minfer(
        &[
            "embed",
            &m,
            "--device",
            "cpu",
            "--pooling",
            "last",
            "--format",
            "text",
            "a",
            "b",
        ],
        dir.path(),
    );
    assert!(out.status.success());
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.split(' ').count() == N_EMBD));

    // The model has no pooling type: every token gets its vector, as in
    // llama-embedding.
    let out = minfer(
        &["embed", &m, "--device", "cpu", "Hello, world!"],
        dir.path(),
    );
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = v[0].as_array().unwrap();
    assert_eq!(rows.len(), 4, "4 tokens");
    assert!(rows.iter().all(|r| r.as_array().unwrap().len() == N_EMBD));
}

#[test]
fn bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = model();
    let out = minfer(&["embed", &m, "--pooling", "rank", "x"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let out = minfer_stdin(&["embed", &m], dir.path(), "\n\n");
    assert_one_line_error(&out, 1, &["no text to embed"]);
    let out = minfer(
        &["embed", &m, "--device", "cpu", "-c", "4", "a b c d e f g h"],
        dir.path(),
    );
    assert_one_line_error(
        &out,
        1,
        &["embedding input 0", "more than the context of 4"],
    );
}
