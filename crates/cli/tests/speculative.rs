//! Speculative decoding through the binary: `run --lookup` and `run
//! --draft` print exactly llama.cpp's greedy tokens for the golden prompt,
//! the counts are reported, bad settings are refused before any work,
//! `bench --lookup` prints its table with the answers checked equal, and
//! `serve` looks up by default with the answers of no lookup.

mod common;

use std::io::Read;

use common::server::{exchange, send, Server};
use common::{assert_one_line_error, minfer, minfer_stdin, stderr, stdout};
use minfer_testutil::{require_model, QWEN, SMOLLM};

#[test]
fn run_with_lookup_or_a_draft_prints_the_golden_tokens() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let (prompt, want) = common::golden_capital(&model, usize::MAX);
    let home = tempfile::tempdir().unwrap();
    let m = model.to_str().unwrap();
    for extra in [
        &["--lookup"][..],
        &["--lookup", "1", "--spec-fixed", "--draft-max", "6"][..],
        &["--draft", m][..],
        &["--draft", m, "--spec-fixed", "--draft-max", "5", "-t", "1"][..],
    ] {
        let mut args = vec!["run", m, "--temp", "0", "--no-template", &prompt];
        args.extend_from_slice(extra);
        let out = minfer(&args, home.path());
        let err = stderr(&out);
        assert!(out.status.success(), "{extra:?}: {err}");
        assert_eq!(stdout(&out), format!("{want}\n"), "{extra:?}");
        let line = err
            .lines()
            .find(|l| l.starts_with("speculation: "))
            .unwrap_or_else(|| panic!("no speculation line: {err}"));
        assert!(
            line.contains("drafted ") && line.contains("accepted "),
            "{line}"
        );
        if extra.contains(&"--draft") && extra.contains(&"--spec-fixed") {
            // The model drafting for itself greedily is always right.
            assert!(!line.contains("accepted 0 "), "{line}");
        }
    }
}

#[test]
fn bad_speculation_settings_are_refused_before_loading() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let m = model.to_str().unwrap();
    let out = minfer(
        &["run", m, "hi", "--lookup", "--draft-max", "0"],
        home.path(),
    );
    assert_one_line_error(&out, 1, &["draft-max", "1 to 32"]);
    let out = minfer(
        &[
            "run",
            m,
            "hi",
            "--lookup",
            "--draft-min",
            "5",
            "--draft-max",
            "4",
        ],
        home.path(),
    );
    assert_one_line_error(&out, 1, &["draft-min"]);
    let Some(qwen) = require_model(QWEN) else {
        return;
    };
    let q = qwen.to_str().unwrap();
    let out = minfer(&["run", m, "hi", "--draft", q], home.path());
    assert_one_line_error(&out, 1, &["cannot draft for this model", "vocabulary"]);
}

#[test]
fn chat_stats_show_the_speculation_counts() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let m = model.to_str().unwrap();
    let args = ["chat", m, "--temp", "0", "-n", "32", "--draft", m];
    let out = minfer_stdin(&args, home.path(), "Count from one to ten.\n/stats\n");
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    let line = e
        .lines()
        .find(|l| l.starts_with("speculation: "))
        .unwrap_or_else(|| panic!("no speculation line in /stats: {e}"));
    assert!(line.contains("| last turn: drafted "), "{line}");
}

#[test]
fn bench_lookup_prints_a_row_per_prompt_and_method() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let m = model.to_str().unwrap();
    let out = minfer(
        // Fixed, so that the guesses lookup finds are always checked (the
        // adaptive rule may rightly check none in so short a run).
        &[
            "bench",
            m,
            "--lookup",
            "--spec-fixed",
            "-n",
            "24",
            "-r",
            "1",
            "-o",
            "json",
        ],
        home.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let prompts: Vec<&str> = rows.iter().map(|r| r["prompt"].as_str().unwrap()).collect();
    assert_eq!(prompts, ["code-complete", "code-edit", "prose"]);
    for r in rows {
        assert_eq!(r["method"], "lookup 3");
        assert!(r["plain_ts"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["spec_ts"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["accepted"].as_u64() <= r["drafted"].as_u64(), "{r}");
    }
    // The edit repeats its prompt: lookup finds guesses there.
    assert!(rows[1]["drafted"].as_u64().unwrap() > 0, "{}", rows[1]);
    let md = minfer(
        &["bench", m, "--lookup", "2", "-n", "8", "-r", "1"],
        home.path(),
    );
    assert!(md.status.success(), "{}", stderr(&md));
    let text = stdout(&md);
    assert!(
        text.starts_with("| model | threads | prompt | method |"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains("| lookup 2 |")).count(),
        3,
        "{text}"
    );
}

/// A server's answer to a greedy completion of a prompt that repeats
/// itself, whether `/slots` says it speculates, and how many guessed
/// tokens its metrics say it checked.
fn serve_repeating(args: &[&str]) -> (String, bool, f64) {
    let model = require_model(SMOLLM).expect("the SmolLM2 model");
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(&model, home.path(), args);
    let addr = &server.addr;
    let (status, slots) = exchange(addr, "GET", "/slots", "");
    assert_eq!(status, 200, "{slots}");
    let slots: serde_json::Value = serde_json::from_str(&slots).unwrap();
    let line = "The quick brown fox jumps over the lazy dog by the river bank.";
    let req = serde_json::json!({"prompt": format!("{line}\n{line}\n{line}\n"),
                                 "n_predict": 32, "temperature": 0});
    let (status, body) = exchange(addr, "POST", "/completion", &req.to_string());
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut conn = send(addr, "GET", "/metrics", "");
    let mut metrics = String::new();
    conn.read_to_string(&mut metrics).unwrap();
    let drafted: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("minfer:spec_decode_num_draft_tokens_total "))
        .map_or(0.0, |v| v.parse().unwrap());
    let text = body["content"].as_str().unwrap().to_string();
    (text, slots[0]["speculative"] == true, drafted)
}

/// `serve` checks prompt-lookup guesses without a flag (each generation's
/// only while they pay; with `--spec-fixed` always, so a prompt that
/// repeats itself gets guesses checked), the answers are those of
/// `--lookup 0`, which turns it off.
#[test]
fn serve_looks_up_by_default_with_the_same_answers() {
    if require_model(SMOLLM).is_none() {
        return;
    }
    let (plain, on, drafted) = serve_repeating(&["--lookup", "0"]);
    assert!(!on, "--lookup 0 turns speculation off");
    assert_eq!(drafted, 0.0);
    let (default, on, _) = serve_repeating(&[]);
    assert!(on, "serve speculates by default");
    assert_eq!(default, plain);
    let (fixed, on, drafted) = serve_repeating(&["--spec-fixed"]);
    assert!(on);
    assert!(drafted > 0.0, "a repeating prompt gives lookup guesses");
    assert_eq!(fixed, plain);
}
