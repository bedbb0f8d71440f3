//! `minfer chat` in a real terminal, driven through tmux: three turns with
//! SmolLM2 at temperature 0, `/stats` after each (every turn keeps the
//! whole cache and prefills only its own tokens), `/regen` (nothing
//! evaluated before the new answer, the same greedy answer), Ctrl-C in the middle of a long
//! answer (stopped, kept, back at the prompt), `/save`, one more turn,
//! `/exit`; then a second process resumes the saved file with `--session`
//! and must answer that last turn identically, prefilling exactly as much.
//! Colours show on the terminal, and not with `NO_COLOR`. Ctrl-C on an
//! empty prompt leaves as `/exit` does, writing the `--trace`.
//!
//! CI installs tmux (`.ci/run`); without it the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use minfer_testutil::{require_model, SMOLLM};

/// A tmux server of our own (its own socket), one pane running a command.
struct Tmux {
    socket: String,
    conf: PathBuf,
}

impl Tmux {
    fn new(dir: &Path, name: &str) -> Tmux {
        let conf = dir.join("tmux.conf");
        std::fs::write(&conf, "set -g history-limit 100000\n").unwrap();
        Tmux {
            socket: format!("minfer-chat-test-{}-{name}", std::process::id()),
            conf,
        }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.conf)
            .args(args)
            .output()
            .expect("tmux runs (CI installs it; locally: apt-get install tmux)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `cmd` (a shell line) in a 200x50 terminal; the pane stays
    /// after it ends and shows its exit code.
    fn start(&self, cmd: &str) {
        let line = format!("{cmd}; echo EXIT=$?; sleep 600");
        self.tmux(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "200",
            "-y",
            "50",
            &line,
        ]);
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types `text` literally, then Enter.
    fn line(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    /// The whole pane with its history, wrapped lines joined; with escape
    /// sequences when `escapes`.
    fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-J", "-S", "-", "-t", "t"];
        if escapes {
            args.push("-e");
        }
        self.tmux(&args)
    }

    /// Waits until `done(screen)` holds; panics with the screen after
    /// `secs` seconds.
    fn wait(&self, what: &str, secs: u64, done: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen(false);
            if done(&s) {
                return s;
            }
            if t0.elapsed() > Duration::from_secs(secs) {
                panic!("timed out waiting for {what}; the terminal shows:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the prompt to come back for the `n`th time.
    fn prompt(&self, n: usize) -> String {
        self.wait(&format!("prompt #{n}"), 300, |s| {
            let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            prompts(s) >= n && last.trim_end() == "you>"
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Prompts shown so far.
fn prompts(screen: &str) -> usize {
    screen.lines().filter(|l| l.starts_with("you>")).count()
}

/// The answer printed after the prompt line `you> {question}` (the lines
/// up to the next prompt or notice), the last occurrence.
fn answer_to(screen: &str, question: &str) -> String {
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .rposition(|l| l.trim_end() == format!("you> {question}"))
        .unwrap_or_else(|| panic!("no prompt line for {question:?} in:\n{screen}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("you>") && !l.starts_with('['))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// The numbers of the last `/stats` output: (tokens in context, prefill,
/// kept).
fn last_stats(screen: &str) -> (usize, usize, usize) {
    let ctx_line = screen
        .lines()
        .rev()
        .find(|l| l.starts_with("context: "))
        .unwrap();
    let turn = screen
        .lines()
        .rev()
        .find(|l| l.starts_with("last turn: "))
        .unwrap();
    let num_after = |s: &str, key: &str| -> usize {
        let i = s
            .find(key)
            .unwrap_or_else(|| panic!("{key:?} not in {s:?}"))
            + key.len();
        s[i..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    (
        num_after(ctx_line, "context: "),
        num_after(turn, "prefill "),
        num_after(turn, "(kept "),
    )
}

/// Sends `/stats` and returns its numbers once the prompt is back.
fn stats(t: &Tmux, n_prompt: &mut usize) -> (usize, usize, usize) {
    t.line("/stats");
    *n_prompt += 1;
    last_stats(&t.prompt(*n_prompt))
}

#[test]
fn chat_in_a_terminal_with_regen_interrupt_save_and_resume() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.session");
    let bin = env!("CARGO_BIN_EXE_minfer");
    let base = format!(
        "env -u NO_COLOR MINFER_HOME={home} TERM=xterm-256color {bin} chat {model} --temp 0 -t 2",
        home = dir.path().display(),
        model = model.display()
    );

    let t = Tmux::new(dir.path(), "a");
    t.start(&base);
    let mut n = 1;
    t.prompt(n);
    assert!(t.screen(true).contains("\x1b["), "no colours on a terminal");
    let (context, third) = three_turns(&t, &mut n);
    regen_the_last_answer(&t, &mut n, context, &third);
    interrupt_a_long_answer(&t, &mut n, context);
    let before = save_then_ask_again(&t, &mut n, &saved);
    t.line("/exit");
    t.wait("the first chat to end", 60, |s| s.contains("EXIT=0"));
    drop(t);
    resume_and_ask_again(dir.path(), &base, &saved, &before);
}

/// The question asked after saving, and again after resuming.
const Q4: &str = "What is the capital of Spain?";

/// The three questions of the first session. The first is worded so that
/// greedy SmolLM2 answers it plainly: asked "What is the capital of
/// France?" it starts "L'Étoile, la Marseillaise…" (llama.cpp's greedy
/// answer too), its first token a near tie.
const QUESTIONS: [&str; 3] = [
    "Name the capital of France.",
    "And of Italy?",
    "What is 2+2?",
];

/// Asks [`QUESTIONS`]; returns the context after them and the third
/// answer.
fn three_turns(t: &Tmux, n: &mut usize) -> (usize, String) {
    // Three turns; each keeps all that the cache held and prefills only its
    // own tokens.
    let questions = QUESTIONS;
    let mut context = 0;
    for (i, q) in questions.iter().enumerate() {
        t.line(q);
        *n += 1;
        let s = t.prompt(*n);
        assert!(!answer_to(&s, q).is_empty(), "no answer to {q:?}");
        let (ctx, prefill, kept) = stats(t, n);
        assert_eq!(kept, context, "turn {i} re-evaluated cached tokens");
        assert!(
            prefill > 0 && prefill < if i == 0 { 80 } else { 40 },
            "turn {i}: prefill {prefill}"
        );
        assert!(
            ctx > kept + prefill,
            "turn {i}: the answer is not in the cache"
        );
        context = ctx;
    }
    let s = t.screen(false);
    assert!(answer_to(&s, questions[0]).contains("Paris"), "{s}");
    let third = answer_to(&s, questions[2]);
    (context, third)
}

/// /regen with `context` tokens cached and `third` the last answer.
fn regen_the_last_answer(t: &Tmux, n: &mut usize, context: usize, third: &str) {
    // /regen: back to the start of the last answer, nothing prefilled (the
    // logits that followed the prompt are kept), the same greedy answer.
    t.line("/regen");
    *n += 1;
    let s = t.prompt(*n);
    assert_eq!(answer_to(&s, "/regen"), third);
    let (ctx, prefill, _) = stats(t, n);
    assert_eq!((ctx, prefill), (context, 0));
}

/// Ctrl-C while answering, with `context` tokens cached before.
fn interrupt_a_long_answer(t: &Tmux, n: &mut usize, context: usize) {
    // Ctrl-C in the middle of a long answer stops it and keeps it.
    let story = "Write a very long story about a dragon, with many chapters.";
    t.line(story);
    t.wait("the story to start", 300, |s| {
        s.find(story)
            .is_some_and(|i| s[i + story.len()..].trim().len() > 200)
    });
    t.keys(&["C-c"]);
    *n += 1;
    let s = t.prompt(*n);
    assert!(s.contains("[interrupted]"), "{s}");
    let (ctx, _, kept) = stats(t, n);
    assert_eq!(kept, context);
    assert!(
        ctx > context + 40,
        "the interrupted answer is not in the cache"
    );
}

/// What the first session held when saved, and how it answered [`Q4`].
struct BeforeResume {
    /// Cached tokens when saved.
    ctx: usize,
    /// The answer to [`Q4`] after saving.
    answer: String,
    /// Its prefill and kept tokens.
    prefill: usize,
    kept: usize,
}

/// /save to `saved`, then one more turn.
fn save_then_ask_again(t: &Tmux, n: &mut usize, saved: &Path) -> BeforeResume {
    // /save, then one more turn (the caller exits).
    t.line(&format!("/save {}", saved.display()));
    *n += 1;
    t.prompt(*n);
    let (saved_ctx, _, _) = stats(t, n);
    t.line(Q4);
    *n += 1;
    let s = t.prompt(*n);
    let a4 = answer_to(&s, Q4);
    let (_, prefill4, kept4) = stats(t, n);
    BeforeResume {
        ctx: saved_ctx,
        answer: a4,
        prefill: prefill4,
        kept: kept4,
    }
}

/// A second chat resumed from `saved`, in `dir`, started as `base` says.
fn resume_and_ask_again(dir: &Path, base: &str, saved: &Path, before: &BeforeResume) {
    // Resume: nothing is recomputed, and the same question gets the same
    // answer with the same prefill.
    let t = Tmux::new(dir, "b");
    t.start(&format!(
        "NO_COLOR=1 {} --session {}",
        base.replace("env -u NO_COLOR ", "env "),
        saved.display()
    ));
    let mut n = 1;
    let s = t.prompt(n);
    assert!(s.contains("resumed"), "{s}");
    assert!(
        !t.screen(true).contains("\x1b[3"),
        "colours despite NO_COLOR"
    );
    let (ctx, _, _) = {
        t.line("/stats");
        n += 1;
        let s = t.prompt(n);
        let ctx_line = s
            .lines()
            .rev()
            .find(|l| l.starts_with("context: "))
            .unwrap()
            .to_string();
        let ctx: usize = ctx_line["context: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        (ctx, 0, 0)
    };
    assert_eq!(
        ctx, before.ctx,
        "the resumed cache differs from the saved one"
    );
    t.line(Q4);
    n += 1;
    let s = t.prompt(n);
    assert_eq!(
        answer_to(&s, Q4),
        before.answer,
        "the resumed session answers differently"
    );
    let (_, prefill, kept) = stats(&t, &mut n);
    assert_eq!((prefill, kept), (before.prefill, before.kept));
    t.keys(&["C-d"]);
    t.wait("the second chat to end", 60, |s| s.contains("EXIT=0"));
}

#[test]
fn ctrl_c_on_an_empty_prompt_leaves_and_writes_the_trace() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("chat.trace.json");
    let t = Tmux::new(dir.path(), "ctrl-c");
    t.start(&format!(
        "env NO_COLOR=1 MINFER_HOME={home} TERM=xterm-256color {bin} chat {model} --temp 0 -t 2 -n 8 --trace {trace}",
        home = dir.path().display(),
        bin = env!("CARGO_BIN_EXE_minfer"),
        model = model.display(),
        trace = trace.display(),
    ));
    t.prompt(1);
    t.line("Hello");
    t.prompt(2);
    t.keys(&["C-c"]);
    let s = t.wait("the chat to end", 60, |s| s.contains("EXIT="));
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(s.contains("trace written to"), "{s}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "sample"),
        "no sample span in the trace"
    );
}
