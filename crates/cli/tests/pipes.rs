//! A reader that stops early (`minfer … | head`) ends the program quietly
//! with success, as it does for `cat` and `ls`: no panic ("failed printing
//! to stdout"), no "error: Broken pipe".

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Output, Stdio};

use minfer_gguf::{GgmlType, GgufWriter};
use minfer_testutil::{require_model, SMOLLM};

/// Runs `minfer ARGS`, reads `n` bytes of its stdout and closes the pipe,
/// as `head -c N` does; returns how it ended.
fn read_then_close(args: &[&str], home: &Path, n: usize) -> (Vec<u8>, Output) {
    let mut child = common::command(args, home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn minfer");
    let mut stdout = child.stdout.take().unwrap();
    let mut head = vec![0u8; n];
    stdout.read_exact(&mut head).expect("first bytes of stdout");
    drop(stdout);
    let out = child.wait_with_output().expect("wait for minfer");
    (head, out)
}

fn assert_quiet_success(out: &Output) {
    let err = common::stderr(out);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("error"), "{err}");
}

#[test]
fn inspect_into_a_closed_pipe() {
    // Far more than a pipe buffer (64 KiB) of tensor lines, so the
    // program is certainly still writing when the reader goes away.
    let dir = tempfile::tempdir().unwrap();
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    for i in 0..4000 {
        let name = format!("blk.{i}.a_rather_long_tensor_name_to_fill_the_pipe.weight");
        w.add_tensor(name, GgmlType::F32, &[8], vec![0; 32])
            .unwrap();
    }
    let path = dir.path().join("many.gguf");
    w.write_file(&path).unwrap();
    let path = path.to_str().unwrap();

    let (head, out) = read_then_close(&["inspect", path], dir.path(), 16);
    assert!(
        head.starts_with(b"file:"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    assert_quiet_success(&out);
    assert!(out.stderr.is_empty(), "{}", common::stderr(&out));

    let (head, out) = read_then_close(&["inspect", path, "--json"], dir.path(), 16);
    assert!(head.starts_with(b"{"), "{}", String::from_utf8_lossy(&head));
    assert_quiet_success(&out);
    assert!(out.stderr.is_empty(), "{}", common::stderr(&out));
}

#[test]
fn run_into_a_closed_pipe() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        model.to_str().unwrap(),
        "Once upon a time, in a small village by the sea,",
        "--no-template",
        "--temp",
        "0",
        "-n",
        "200",
    ];
    let (_, out) = read_then_close(&args, dir.path(), 20);
    assert_quiet_success(&out);
    // Generation stopped at the closed pipe, long before 200 tokens, and
    // the statistics were left out with the rest of the output.
    let err = common::stderr(&out);
    assert!(!err.contains("prefill:"), "{err}");
}

/// Runs `minfer ARGS` with a stdout pipe whose reader is already gone, so
/// the very first write fails, whatever the command prints.
fn into_closed_pipe(args: &[&str], home: &Path) -> Output {
    let mut child = common::command(args, home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn minfer");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for minfer")
}

#[test]
fn every_command_into_a_pipe_closed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.add_tensor("w", GgmlType::F32, &[8], vec![0; 32]).unwrap();
    let small = dir.path().join("small.gguf");
    w.write_file(&small).unwrap();
    let small = small.to_str().unwrap();
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["inspect", small],
        &["inspect", small, "--json"],
    ] {
        let out = into_closed_pipe(args, dir.path());
        assert_quiet_success(&out);
        assert!(out.stderr.is_empty(), "{args:?}: {}", common::stderr(&out));
    }

    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let model = model.to_str().unwrap();
    for args in [
        &["tokenize", model, "Hello world"][..],
        &["bench", model, "-p", "4", "-n", "2", "-r", "1"],
        &[
            "run",
            model,
            "Hello",
            "--temp",
            "0",
            "-n",
            "4",
            "--no-template",
        ],
    ] {
        let out = into_closed_pipe(args, dir.path());
        assert_quiet_success(&out);
    }
}
