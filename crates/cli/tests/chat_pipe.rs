//! `minfer chat` with piped stdin: one message per line, answers (only)
//! on stdout, commands' output and notices on stderr, no colours, and a
//! refused `--session` file ends the program with one line and is left as
//! it was; Ctrl-C while it waits for a line ends it with status 130 after
//! writing the trace and the session.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Command;

use common::{assert_one_line_error, minfer_stdin, stderr, stdout};
use minfer_testutil::{require_model, SMOLLM};

#[test]
fn piped_lines_are_turns_and_stdout_holds_only_the_answers() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("pipe.session");
    let m = model.to_str().unwrap();
    let s = session.to_str().unwrap();
    let args = [
        "chat",
        m,
        "--temp",
        "0",
        "-t",
        "2",
        "-n",
        "48",
        "--session",
        s,
    ];
    let out = minfer_stdin(
        &args,
        home.path(),
        "Name the capital of France.\n\n/stats\n/frobnicate\nAnd of Italy?\n/stats\n",
    );
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "stderr: {e}");
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines.len(), 2, "stdout: {o}");
    assert!(lines[0].contains("Paris"), "{o}");
    assert!(lines[1].contains("Rome"), "{o}");
    assert!(
        !o.contains("you>") && !o.contains('\x1b') && !e.contains('\x1b'),
        "{o}{e}"
    );
    assert!(e.contains("unknown command /frobnicate"), "{e}");
    // The second turn kept everything the first left in the cache.
    let stats: Vec<&str> = e.lines().filter(|l| l.starts_with("context: ")).collect();
    let first_ctx: usize = stats[0]
        .trim_start_matches("context: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(e.contains(&format!("(kept {first_ctx})")), "{e}");

    // The session file was written after each turn; resuming it and
    // asking again continues the conversation.
    let saved = std::fs::read(&session).unwrap();
    let out = minfer_stdin(&args, home.path(), "/stats\n");
    assert!(out.status.success());
    assert!(stderr(&out).contains("messages: 4"), "{}", stderr(&out));

    // A corrupted file is refused at start-up and left untouched.
    let mut bad = saved.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    std::fs::write(&session, &bad).unwrap();
    let out = minfer_stdin(&args, home.path(), "Hello\n");
    assert_one_line_error(&out, 1, &["corrupted"]);
    assert_eq!(std::fs::read(&session).unwrap(), bad);
}

/// SIGINT while the chat waits for its next piped line (no answer being
/// written): the chat ends the way `/exit` does, so the `--trace` and the
/// `--session` file are written, and the status is the shell's 130.
#[test]
fn ctrl_c_while_waiting_for_a_line_writes_trace_and_session_and_exits_130() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("int.session");
    let trace = home.path().join("int.trace.json");
    let args = [
        "chat",
        model.to_str().unwrap(),
        "--temp",
        "0",
        "-t",
        "2",
        "-n",
        "16",
        "--session",
        session.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ];
    let mut child = common::spawn_piped(&args, home.path());
    // stdin stays open: after the answer the chat waits for a line.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"Name the capital of France.\n").unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("Paris"), "{answer:?}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "stderr: {err}");
    assert!(err.contains("trace written to"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["name"] == "sample"),
        "no sample span in the trace"
    );
    // The session holds the exchange: resuming it shows both messages.
    let out = minfer_stdin(&args[..10], home.path(), "/stats\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("messages: 2"), "{}", stderr(&out));
}
