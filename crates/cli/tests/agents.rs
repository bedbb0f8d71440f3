//! The coding agents people point at a local server, run as their users
//! run them against `minfer serve` on Qwen2.5-Coder-0.5B: Claude Code
//! (`claude -p`, twice, to see the second session start from the prompt
//! cache), Codex CLI (`codex exec`), Continue's CLI (`cn -p`), aider and
//! llm, each asked to create a file in an empty directory.
//!
//! The clients come from their registries at pinned versions
//! (`scripts/test.sh` installs them into the folder MINFER_AGENTS_DIR
//! names: npm packages under `node_modules`, aider and llm in venvs of
//! their own, `aider/` and `llm/`).
//! Each talks to the server through `scripts/agents/record_proxy.py`, which
//! records every request and whole response; the recordings stay in
//! `target/agent-runs/` for refreshing the replay fixtures.
//!
//! The clients sample as they choose, so a small model's answer varies; what
//! must hold whatever it answers: no request is refused (no 4xx), every run
//! ends within its bound, and whenever the server delivered a call the
//! client carried it out (its next request holds the call's result, and a
//! call writing the file left the file).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::proxy::{records, Proxy};
use common::server::Server;
use serde_json::Value;

const TASK: &str = "Create a file named hello.txt containing the word hi.";
/// The key every client is given (the server asks for none).
const KEY: &str = "sk-local";

/// Where the clients are installed, or a recorded skip.
fn agents_dir() -> Option<PathBuf> {
    match std::env::var_os("MINFER_AGENTS_DIR") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            minfer_testutil::skip(
                "MINFER_AGENTS_DIR (Claude Code, Codex CLI, Continue CLI, aider and llm installed)",
                "scripts/test.sh installs them into target/agents at the pinned versions",
            );
            None
        }
    }
}

/// One client run: how to start it and what it may take.
struct Agent {
    /// Name in the report.
    name: &'static str,
    /// The program and its arguments.
    argv: Vec<String>,
    /// Environment on top of PATH and HOME.
    env: Vec<(String, String)>,
    /// Its bound.
    limit: Duration,
}

/// What one run did.
struct Outcome {
    name: &'static str,
    /// Exit code, `None` when killed at its bound.
    code: Option<i32>,
    secs: f64,
    /// Every request the client made, with the whole response.
    records: Vec<Value>,
    /// Whether the file exists after the run, with what it holds.
    file: Option<String>,
    stdout: String,
    stderr: String,
}

/// Runs `agent` in `work` behind a fresh proxy to `upstream`, with the
/// config files in `cfg` pointed at the proxy.
fn run(
    agent: &Agent,
    upstream: &str,
    work: &Path,
    home: &Path,
    runs: &Path,
    cfg: &Path,
) -> Outcome {
    let record = runs.join(format!("{}.jsonl", agent.name));
    let _ = std::fs::remove_file(&record);
    let proxy = Proxy::start(upstream, &record);
    point_configs(cfg, &proxy.url);
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10"])
        .arg(agent.limit.as_secs().to_string())
        .args(agent.argv.iter().map(|a| a.replace("{URL}", &proxy.url)))
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null());
    for (k, v) in &agent.env {
        cmd.env(k, v.replace("{URL}", &proxy.url));
    }
    let t = Instant::now();
    let out = cmd.output().expect("start the client");
    let secs = t.elapsed().as_secs_f64();
    drop(proxy);
    let records = records(&record);
    Outcome {
        name: agent.name,
        code: out.status.code().filter(|&c| c != 124 && c != 137),
        secs,
        records,
        file: std::fs::read_to_string(work.join("hello.txt")).ok(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Prints what a run did: its requests, the server's lines for them, the
/// calls delivered, the file, the client's last words.
fn report(o: &Outcome, server_lines: &[String]) {
    eprintln!(
        "== {}: exit {:?} after {:.1} s, {} requests, hello.txt {:?}",
        o.name,
        o.code,
        o.secs,
        o.records.len(),
        o.file
    );
    for r in &o.records {
        let calls: Vec<String> = delivered(r).into_iter().map(|c| c.text).collect();
        eprintln!(
            "   {} {} -> {} in {} s; calls {calls:?}",
            r["method"].as_str().unwrap_or(""),
            r["path"].as_str().unwrap_or(""),
            r["status"],
            r["elapsed_s"]
        );
    }
    for l in server_lines {
        eprintln!("   server: {}", l.split(" INFO ").last().unwrap_or(l));
    }
    let tail = |s: &str| -> String {
        let s = s.trim();
        let start = s.len().saturating_sub(600);
        let start = (start..=s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        s[start..].to_string()
    };
    eprintln!("   stdout: {}", tail(&o.stdout));
    eprintln!("   stderr: {}", tail(&o.stderr));
}

/// A tool call the server delivered: its id and everything about it.
struct Delivered {
    id: String,
    text: String,
}

/// The calls in one recorded response, whatever the API.
fn delivered(record: &Value) -> Vec<Delivered> {
    let body = record["response_head"].as_str().unwrap_or("");
    // A streamed call shows up more than once (Responses announces the
    // item before its arguments): the last sight of each id is the whole.
    let mut found: Vec<Delivered> = Vec::new();
    // OpenAI's chunks name a call once and then send its arguments in
    // pieces under its index: put them back together.
    let mut pieces: Vec<(String, String, String)> = Vec::new();
    for v in events(body) {
        for tc in v["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = tc["index"].as_u64().unwrap_or(0) as usize;
            if pieces.len() <= i {
                pieces.resize(i + 1, Default::default());
            }
            if let Some(id) = tc["id"].as_str() {
                pieces[i].0 = id.to_string();
            }
            if let Some(n) = tc["function"]["name"].as_str() {
                pieces[i].1 = n.to_string();
            }
            pieces[i].2 += tc["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    for (id, name, args) in pieces.into_iter().filter(|p| !p.0.is_empty()) {
        let whole = serde_json::json!({"id": id, "function": {"name": name, "arguments": args}});
        found.push(Delivered {
            id,
            text: whole.to_string(),
        });
    }
    for v in events(body) {
        if v["choices"].is_array() {
            continue;
        }
        for call in calls_in(&v) {
            match found.iter_mut().find(|c| c.id == call.id) {
                Some(c) => *c = call,
                None => found.push(call),
            }
        }
    }
    found
}

/// The JSON values of a response: each SSE `data:` line, each NDJSON
/// line, or the one body.
fn events(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("data:").unwrap_or(l).trim();
            serde_json::from_str(l).ok()
        })
        .collect()
}

/// Calls in one event: Anthropic `tool_use` blocks, OpenAI `tool_calls`
/// (the chunk that names the call), Responses `function_call` items.
fn calls_in(v: &Value) -> Vec<Delivered> {
    let mut out = Vec::new();
    let mut visit = |item: &Value| {
        let kind = item["type"].as_str().unwrap_or("");
        let id = if kind == "tool_use" {
            item["id"].as_str()
        } else if kind == "function_call" {
            item["call_id"].as_str()
        } else if kind == "function" && item["function"]["name"].is_string() {
            item["id"].as_str()
        } else {
            None
        };
        if let Some(id) = id {
            out.push(Delivered {
                id: id.to_string(),
                text: item.to_string(),
            });
        }
    };
    walk(v, &mut visit);
    out
}

fn walk(v: &Value, f: &mut impl FnMut(&Value)) {
    match v {
        Value::Object(o) => {
            f(v);
            o.values().for_each(|x| walk(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

/// Whether a request carries the result of call `id` (a `tool_result`, a
/// `tool` message, a `function_call_output`).
fn answers(request: &Value, id: &str) -> bool {
    let mut hit = false;
    walk(&request["body"], &mut |item| {
        let r = item["tool_use_id"]
            .as_str()
            .or(item["tool_call_id"].as_str());
        let r = r.or_else(|| {
            (item["type"].as_str() == Some("function_call_output"))
                .then(|| item["call_id"].as_str())
                .flatten()
        });
        hit |= r == Some(id);
    });
    hit
}

/// Whether the result of call `id` in `request` is marked an error.
fn refused(request: &Value, id: &str) -> bool {
    let mut hit = false;
    walk(&request["body"], &mut |item| {
        hit |= item["tool_use_id"].as_str() == Some(id) && item["is_error"] == Value::Bool(true);
    });
    hit
}

/// Whether the client ran call `id` and answered that the system would not
/// write where the call said: the model named an absolute path outside the
/// run's folder (`/home/user/hello.txt`), and the client's answer is the OS
/// error for that path. The call reached the client whole and ran; the
/// model, not the server, chose where.
fn failed_elsewhere(request: &Value, id: &str, call: &str) -> bool {
    let Some(path) = absolute_target(call) else {
        return false;
    };
    let mut hit = false;
    walk(&request["body"], &mut |item| {
        let mine = item["tool_call_id"].as_str() == Some(id)
            || item["tool_use_id"].as_str() == Some(id)
            || item["call_id"].as_str() == Some(id) && item["type"] == "function_call_output";
        if mine {
            let answer = match &item["content"] {
                Value::String(s) => s.clone(),
                Value::Null => item["output"].to_string(),
                other => other.to_string(),
            };
            hit |= os_error_for(&answer, &path);
        }
    });
    hit
}

/// Whether `text` gives an OS error for writing `path`.
fn os_error_for(text: &str, path: &str) -> bool {
    let errors = [
        "No such file or directory",
        "Permission denied",
        "Read-only",
    ];
    text.contains(path) && errors.iter().any(|e| text.contains(e))
}

/// The absolute path ending in `hello.txt` that a call's text names, if any
/// (the arguments may be escaped once or twice inside the call).
fn absolute_target(call: &str) -> Option<String> {
    let plain = call.replace('\\', "");
    let end = plain.find("hello.txt")? + "hello.txt".len();
    let start = plain[..end].rfind('"')? + 1;
    let path = &plain[start..end];
    path.starts_with('/').then(|| path.to_string())
}

/// The call `id` as a later request gives it back in its history (whole,
/// where a stream sent its arguments in pieces).
fn echoed(request: &Value, id: &str) -> Option<String> {
    let mut found = None;
    walk(&request["body"], &mut |item| {
        let kind = item["type"].as_str().unwrap_or("");
        let this = match kind {
            "tool_use" => item["id"].as_str(),
            "function_call" => item["call_id"].as_str(),
            _ if item["function"]["name"].is_string() => item["id"].as_str(),
            _ => None,
        };
        if this == Some(id) {
            found = Some(item.to_string());
        }
    });
    found
}

/// Whether a call writes the file: it names hello.txt with the word, in a
/// tool that is not only for reading.
fn writes_the_file(text: &str) -> bool {
    let t = text.to_lowercase();
    let reads = ["\"read", "\"view", "\"glob", "\"grep", "\"ls\""]
        .iter()
        .any(|r| t.contains(&format!("\"name\":{r}")));
    t.contains("hello.txt") && t.contains("hi") && !reads
}

/// The server's log lines for finished requests.
fn request_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" request ") && l.contains("first token after"))
        .map(str::to_string)
        .collect()
}

/// What is wrong with one run; empty when nothing is.
fn problems(o: &Outcome) -> Vec<String> {
    let mut bad = Vec::new();
    if o.code.is_none() {
        bad.push(format!("killed at its bound after {:.0} s", o.secs));
    }
    if o.records.is_empty() {
        bad.push("made no request".into());
    }
    for (i, r) in o.records.iter().enumerate() {
        let status = r["status"].as_u64().unwrap_or(0);
        if !(200..400).contains(&status) {
            let head: String = r["response_head"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect();
            bad.push(format!(
                "request {i} ({} {}) answered {status}: {head}",
                r["method"], r["path"]
            ));
        }
    }
    for (i, r) in o.records.iter().enumerate() {
        for call in delivered(r) {
            // A client that went on ran every call it was given.
            let next = o.records[i + 1..].iter().find(|r| answers(r, &call.id));
            let last = i + 1 == o.records.len();
            match next {
                // The client's last request may end its run (a turn or
                // chain limit) with calls it ran and did not report.
                None if last
                    && writes_the_file(&call.text)
                    && o.file.is_none()
                    && !ran_elsewhere(o, &call.text) =>
                {
                    bad.push(format!("the call was not carried out: {}", call.text));
                }
                None if last => {}
                None if o.code.is_some() => {
                    bad.push(format!(
                        "call {} was never answered: {}",
                        call.id, call.text
                    ));
                }
                Some(next) => {
                    let whole = echoed(next, &call.id).unwrap_or(call.text);
                    // A client may refuse a call by its own policy (Claude
                    // Code asks before writing, and `-p` cannot ask): it
                    // then answers with an error, which is carrying it out.
                    if writes_the_file(&whole)
                        && o.file.is_none()
                        && !refused(next, &call.id)
                        && !failed_elsewhere(next, &call.id, &whole)
                    {
                        bad.push(format!("the call ran but no hello.txt: {whole}"));
                    }
                }
                None => {}
            }
        }
    }
    bad
}

/// Whether the client's own output shows it ran a call to an absolute path
/// and got the OS error for it (a last call, whose answer no later request
/// carries).
fn ran_elsewhere(o: &Outcome, call: &str) -> bool {
    absolute_target(call)
        .is_some_and(|p| os_error_for(&o.stderr, &p) || os_error_for(&o.stdout, &p))
}

fn agents(dir: &Path, cfg: &Path, model: &str) -> Vec<Agent> {
    let bin = |p: &str| dir.join(p).to_string_lossy().into_owned();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let e = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(k, x)| (k.to_string(), x.to_string()))
            .collect::<Vec<_>>()
    };
    let claude_env = e(&[
        ("ANTHROPIC_BASE_URL", "{URL}"),
        ("ANTHROPIC_API_KEY", KEY),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CONFIG_DIR", &cfg.join("claude").to_string_lossy()),
    ]);
    let claude = |name| Agent {
        name,
        argv: vec![bin("node_modules/.bin/claude"), "-p".into(), TASK.into()],
        env: claude_env.clone(),
        limit: Duration::from_secs(900),
    };
    // The quick ones first; Claude Code's 18k-token first prompt last.
    vec![
        Agent {
            name: "codex",
            argv: {
                let mut v = vec![bin("node_modules/.bin/codex")];
                v.extend(s(&["exec", "--skip-git-repo-check", TASK]));
                v
            },
            env: e(&[
                ("CODEX_HOME", &cfg.join("codex").to_string_lossy()),
                ("MINFER_API_KEY", KEY),
            ]),
            limit: Duration::from_secs(600),
        },
        Agent {
            name: "continue",
            argv: vec![
                bin("node_modules/.bin/cn"),
                "--config".into(),
                cfg.join("continue.yaml").to_string_lossy().into_owned(),
                "-p".into(),
                TASK.into(),
            ],
            env: e(&[
                (
                    "CONTINUE_GLOBAL_DIR",
                    &cfg.join("continue").to_string_lossy(),
                ),
                ("CONTINUE_CLI_ENABLE_TELEMETRY", "0"),
            ]),
            limit: Duration::from_secs(400),
        },
        Agent {
            name: "aider",
            argv: {
                let mut v = vec![bin("aider/bin/aider")];
                v.extend(s(&[
                    "--openai-api-base",
                    "{URL}/v1",
                    "--openai-api-key",
                    KEY,
                    "--model",
                    &format!("openai/{model}"),
                    "--yes-always",
                    "--no-git",
                    "--no-check-update",
                    "--no-show-model-warnings",
                    "--no-analytics",
                    "--message",
                    TASK,
                    "hello.txt",
                ]));
                v
            },
            env: Vec::new(),
            limit: Duration::from_secs(300),
        },
        Agent {
            name: "llm",
            argv: {
                let mut v = vec![bin("llm/bin/llm")];
                v.extend(s(&[
                    "-m",
                    "minfer",
                    "--functions",
                    WRITE_FILE,
                    "--td",
                    TASK,
                ]));
                v
            },
            env: e(&[("LLM_USER_PATH", &cfg.join("llm").to_string_lossy())]),
            limit: Duration::from_secs(300),
        },
        claude("claude-code-first"),
        claude("claude-code-second"),
    ]
}

/// The tool llm's users give it for this task: a Python function.
const WRITE_FILE: &str = "def write_file(path: str, content: str) -> str:\n    \"Write content to the file at path.\"\n    open(path, 'w').write(content)\n    return 'written'\n";

/// The clients' own configuration files: Codex's provider, Continue's
/// model, llm's extra model. `{URL}` is the proxy's, filled in per run.
fn write_configs(cfg: &Path, model: &str) {
    for d in ["claude", "codex", "continue", "llm"] {
        std::fs::create_dir_all(cfg.join(d)).unwrap();
    }
    std::fs::write(
        cfg.join("codex/config.toml"),
        format!(
            "model = \"{model}\"\nmodel_provider = \"minfer\"\n\n[model_providers.minfer]\n\
             name = \"minfer\"\nbase_url = \"{{URL}}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"MINFER_API_KEY\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        cfg.join("continue.yaml"),
        format!(
            "name: minfer-local\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: minfer\n    \
             provider: openai\n    model: {model}\n    apiBase: {{URL}}/v1\n    apiKey: {KEY}\n    \
             roles: [chat, edit, apply]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        cfg.join("llm/extra-openai-models.yaml"),
        format!(
            "- model_id: minfer\n  model_name: {model}\n  api_base: \"{{URL}}/v1\"\n  \
             supports_tools: true\n  supports_schema: true\n"
        ),
    )
    .unwrap();
}

/// Fills `{URL}` in the config files for one run.
fn point_configs(cfg: &Path, url: &str) {
    for f in [
        "codex/config.toml",
        "continue.yaml",
        "llm/extra-openai-models.yaml",
    ] {
        let tpl = cfg.join(format!("{f}.tpl"));
        let file = cfg.join(f);
        if !tpl.exists() {
            std::fs::rename(&file, &tpl).unwrap();
        }
        let text = std::fs::read_to_string(&tpl).unwrap();
        std::fs::write(&file, text.replace("{URL}", url)).unwrap();
    }
}

#[test]
fn coding_agents_complete_their_runs_against_minfer_serve() {
    let Some(model) = minfer_testutil::require_model(minfer_testutil::QWEN) else {
        return;
    };
    let Some(dir) = agents_dir() else {
        return;
    };
    common::clients_installed(&dir, Duration::from_secs(45 * 60));
    let root = minfer_testutil::workspace_root();
    let runs = root.join("target/agent-runs");
    std::fs::create_dir_all(&runs).unwrap();
    let log = runs.join("server.log");
    let home = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &model,
        home.path(),
        2,
        // Clients that send no `max_tokens` (Continue, aider) get 2048
        // tokens at most, as llama-server's `-n` gives: the 0.5B model
        // sometimes loops, and would then write until the context is full
        // (16k tokens, longer than any client's patience).
        &[
            "-np",
            "2",
            "--n-ctx",
            "32768",
            "--cache-ram",
            "1024",
            "-n",
            "2048",
            "-v",
        ],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let upstream = server.url();
    let cfg = home.path().join("config");
    write_configs(&cfg, &server.model);
    let user_home = home.path().join("home");
    std::fs::create_dir_all(&user_home).unwrap();

    let mut outcomes = Vec::new();
    let claude_work = home.path().join("claude-project");
    for agent in agents(&dir, &cfg, &server.model) {
        // Both Claude Code sessions work in one project, as a user's two
        // sessions would: the second starts from the first one's cache.
        let work = if agent.name.starts_with("claude") {
            claude_work.clone()
        } else {
            home.path().join(agent.name)
        };
        std::fs::create_dir_all(&work).unwrap();
        let _ = std::fs::remove_file(work.join("hello.txt"));
        let before = request_lines(&log).len();
        let o = run(&agent, &upstream, &work, &user_home, &runs, &cfg);
        let lines = request_lines(&log);
        report(&o, &lines[before.min(lines.len())..]);
        outcomes.push(o);
    }
    drop(server);

    let mut failures = Vec::new();
    for o in &outcomes {
        for p in problems(o) {
            failures.push(format!("{}: {p}", o.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The checks on a recorded live run (llm 0.36 given a `write_file`
/// function, five calls delivered and run until its chain limit): they
/// pass with the file there, and fail without it.
#[test]
fn the_checks_hold_a_recorded_run_to_its_calls() {
    let records = recorded_llm_run(|t| t.to_string());
    let calls: usize = records.iter().map(|r| delivered(r).len()).sum();
    assert_eq!(calls, 5);
    let mut o = llm_outcome(records);
    assert!(problems(&o).is_empty(), "{:?}", problems(&o));
    o.file = None;
    let bad = problems(&o);
    assert_eq!(bad.len(), 5, "{bad:?}");
    // A run cut at its bound is a failure whatever it did.
    o.file = Some("hi".into());
    o.code = None;
    assert_eq!(problems(&o).len(), 1);
}

/// The run CI once saw: the model sent every call to `/home/user/hello.txt`,
/// which llm ran and the OS refused. Those calls were carried out; without
/// the client's word that it ran them (its answers, its output for the last
/// one), they are not.
#[test]
fn a_call_the_os_refused_was_carried_out() {
    const REFUSED: &str = "Error: [Errno 2] No such file or directory: '/home/user/hello.txt'";
    let elsewhere = |t: &str| t.replace("hello.txt", "/home/user/hello.txt");
    let mut o = llm_outcome(recorded_llm_run(|t| {
        elsewhere(t).replace(
            "\"content\": \"written\"",
            &format!("\"content\": \"{REFUSED}\""),
        )
    }));
    o.file = None;
    o.stderr = format!("Tool call: write_file(...)\n  {REFUSED}\n");
    assert!(problems(&o).is_empty(), "{:?}", problems(&o));
    // No sign that the last call ran.
    o.stderr.clear();
    assert_eq!(problems(&o).len(), 1, "{:?}", problems(&o));
    // Answers that claim a write that did not happen.
    let mut o = llm_outcome(recorded_llm_run(elsewhere));
    o.file = None;
    assert_eq!(problems(&o).len(), 5, "{:?}", problems(&o));
}

/// The recorded live llm run, its text edited by `edit` first.
fn recorded_llm_run(edit: impl Fn(&str) -> String) -> Vec<Value> {
    let path = minfer_testutil::workspace_root()
        .join("crates/server/tests/fixtures/clients/llm-0.36-live-write-file.jsonl");
    edit(&std::fs::read_to_string(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// llm's outcome for `records`: it stopped at its chain limit with the file
/// written.
fn llm_outcome(records: Vec<Value>) -> Outcome {
    Outcome {
        name: "llm",
        code: Some(1),
        secs: 13.0,
        records,
        file: Some("hi".into()),
        stdout: String::new(),
        stderr: String::new(),
    }
}
