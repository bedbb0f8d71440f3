//! `--trace`, `--dump-graph` and `minfer viz` through the real binary with
//! SmolLM2-135M: the trace is well-formed Chrome JSON whose spans nest per
//! thread, the dumped decode graph is the one the engine runs (same node
//! count as its census) and renders with Graphviz, and the viewer page
//! loads in headless Chromium without console errors.
//!
//! Graphviz and Chromium are installed by `scripts/test.sh`; a missing one
//! fails its test unless MINFER_REQUIRE_MODELS=0 (then it is a recorded
//! skip).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_one_line_error, minfer, stderr};
use minfer_testutil::{require_model, skip, workspace_root, SMOLLM};
use serde_json::Value;

/// Runs a short greedy generation with a trace and returns the trace.
fn traced_run(dir: &Path, model: &Path) -> (PathBuf, Value) {
    let path = dir.join("trace.json");
    let out = minfer(
        &[
            "run",
            model.to_str().unwrap(),
            "Name three colours.",
            "-n",
            "8",
            "--temp",
            "0",
            "-t",
            "2",
            "-c",
            "256",
            "--trace",
            path.to_str().unwrap(),
        ],
        dir,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, v)
}

/// (tid, name, cat, start µs, end µs) of every complete event.
fn spans(v: &Value) -> Vec<(u64, String, String, f64, f64)> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (
                e["tid"].as_u64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
                e["cat"].as_str().unwrap_or("").to_string(),
                ts,
                ts + e["dur"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Timestamps are ns printed as µs, so ends computed from them may differ
/// in the last bits.
const EPS: f64 = 1e-3;

#[test]
fn the_trace_is_chrome_json_with_spans_nested_per_thread() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (path, v) = traced_run(dir.path(), &model);
    // Streaming readers (Perfetto's JSON tokenizer) stop at a top-level key
    // they do not know, so the events come first and our own key last.
    let text = std::fs::read_to_string(&path).unwrap();
    let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap();
    assert_eq!(at("displayTimeUnit"), 1);
    assert!(at("traceEvents") < at("otherData") && at("otherData") < at("minfer"));
    let all = spans(&v);
    let mut tids: Vec<u64> = all.iter().map(|s| s.0).collect();
    tids.sort_unstable();
    tids.dedup();
    assert!(
        tids.len() >= 2,
        "a track for the caller and the worker: {tids:?}"
    );
    let named =
        |tid: u64| {
            v["traceEvents"].as_array().unwrap().iter().any(|e| {
                e["ph"] == "M" && e["name"] == "thread_name" && e["tid"].as_u64() == Some(tid)
            })
        };
    assert!(tids.iter().all(|&t| named(t)), "every track is named");
    for name in ["tokenize", "prefill", "decode", "sample", "detokenize"] {
        assert!(all.iter().any(|s| s.1 == name), "no {name} span");
    }
    for counter in ["tokens_per_s", "kv_cells_used"] {
        assert!(
            v["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["ph"] == "C" && e["name"] == counter),
            "no {counter} counter"
        );
    }
    // Per thread, sorted by start (longer first on ties), every span ends
    // inside the spans still open when it starts.
    for &tid in &tids {
        let mut mine: Vec<_> = all.iter().filter(|s| s.0 == tid).collect();
        mine.sort_by(|a, b| a.3.total_cmp(&b.3).then(b.4.total_cmp(&a.4)));
        let mut open: Vec<&(u64, String, String, f64, f64)> = Vec::new();
        for s in mine {
            while open.last().is_some_and(|o| o.4 <= s.3 + EPS) {
                open.pop();
            }
            if let Some(o) = open.last() {
                assert!(
                    s.4 <= o.4 + EPS,
                    "track {tid}: {} [{}, {}] overlaps {} [{}, {}]",
                    s.1,
                    s.3,
                    s.4,
                    o.1,
                    o.3,
                    o.4
                );
            }
            open.push(s);
        }
    }
    // Each decode step's ops run inside it, on its thread.
    let steps: Vec<_> = all
        .iter()
        .filter(|s| s.2 == "engine" && s.1 == "decode")
        .collect();
    assert!(!steps.is_empty());
    for st in steps {
        let ops: Vec<_> = all
            .iter()
            .filter(|o| o.2 == "op" && o.0 == st.0 && o.3 >= st.3 - EPS && o.4 <= st.4 + EPS)
            .collect();
        assert!(!ops.is_empty(), "a decode step without ops");
        let sum: f64 = ops.iter().map(|o| o.4 - o.3).sum();
        assert!(
            sum <= st.4 - st.3 + EPS,
            "ops {sum} µs in a step of {} µs",
            st.4 - st.3
        );
    }
    let graphs = v["minfer"]["graphs"].as_array().unwrap();
    assert!(graphs.iter().any(|g| g["kind"] == "decode"));
}

#[test]
fn the_dumped_decode_graph_is_the_engines_and_renders_with_graphviz() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("g.json");
    let dot_path = dir.path().join("g.dot");
    for p in [&json_path, &dot_path] {
        let out = minfer(
            &[
                "run",
                model.to_str().unwrap(),
                "hello",
                "-c",
                "256",
                "--dump-graph",
                p.to_str().unwrap(),
            ],
            dir.path(),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "a dump generates nothing");
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let graphs = v["graphs"].as_array().unwrap();
    let kinds: Vec<&str> = graphs.iter().map(|g| g["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["prefill", "decode"]);
    let decode = &graphs[1];

    let loaded = minfer_engine::LoadedModel::open(&model).unwrap();
    let cfg = minfer_engine::EngineConfig {
        n_ctx: 256,
        n_threads: 1,
        ..Default::default()
    };
    let mut rt = loaded.runtime(cfg).unwrap();
    let census = rt.decode_census().unwrap();
    let engine_nodes: usize = census.iter().map(|c| c.1).sum();
    let nodes = decode["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), engine_nodes, "dump vs the engine's census");
    for (op, n) in &census {
        assert_eq!(decode["census"][op].as_u64(), Some(*n as u64), "{op}");
    }
    for n in nodes {
        for key in ["name", "op", "shape", "dtype", "buffer"] {
            assert!(!n[key].is_null(), "node without {key}: {n}");
        }
    }
    assert!(
        !decode["fused_away"].as_array().unwrap().is_empty(),
        "fusion is on by default, so some nodes were fused away"
    );

    let svg = dir.path().join("g.svg");
    let out = match Command::new("dot")
        .args([
            "-Tsvg",
            "-o",
            svg.to_str().unwrap(),
            dot_path.to_str().unwrap(),
        ])
        .output()
    {
        Ok(out) => out,
        Err(_) => {
            skip(
                "graphviz (dot)",
                "apt-get install graphviz; scripts/test.sh does",
            );
            return;
        }
    };
    assert!(
        out.status.success(),
        "dot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("blk.0"),
        "rendered svg"
    );
}

/// Chromium's binary name on Debian, or another common one.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Fraction of pixels of a PNG that differ from its first pixel.
fn busy_fraction(png_path: &Path) -> f64 {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let first = &data[..px];
    let n = data.len() / px;
    let differ = data.chunks(px).filter(|p| *p != first).count();
    differ as f64 / n as f64
}

#[test]
fn the_viewer_page_loads_in_headless_chromium() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = traced_run(dir.path(), &model);
    let page = dir.path().join("page.html");
    let out = minfer(
        &["viz", trace.to_str().unwrap(), "-o", page.to_str().unwrap()],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    for bad in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!html.contains(bad), "the page fetches something: {bad}");
    }
    let Some(browser) = chromium() else {
        skip("chromium", "apt-get install chromium; scripts/test.sh does");
        return;
    };
    let url = format!("file://{}", page.display());
    let profile = dir.path().join("profile");
    let base = |extra: &[String]| {
        let mut c = Command::new(browser);
        c.args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
        ]);
        c.args(extra);
        c.arg(&url);
        c.output().expect("run chromium")
    };
    let dom = base(&["--dump-dom".to_string()]);
    assert!(dom.status.success());
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom_text.contains("id=\"graph-prefill\""),
        "prefill panel in the DOM"
    );
    assert!(
        dom_text.contains("id=\"graph-decode\""),
        "decode panel in the DOM"
    );
    assert!(dom_text.contains("id=\"filter\""), "the page's script ran");
    let console = String::from_utf8_lossy(&dom.stderr);
    // At --v=0 Chromium prints every console message of the page as a
    // CONSOLE line without its level; the page logs nothing itself, so any
    // such line is an error (an uncaught exception, a failed load).
    for line in console.lines() {
        assert!(!line.contains(":CONSOLE"), "console message: {line}");
    }
    let shot = workspace_root().join("target").join("viz-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let out = base(&[
        format!("--screenshot={}", shot.display()),
        "--window-size=1400,1000".to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let busy = busy_fraction(&shot);
    println!(
        "viewer screenshot: {} ({:.1} % non-background pixels)",
        shot.display(),
        busy * 100.0
    );
    eprintln!("viewer screenshot: {}", shot.display());
    assert!(busy > 0.02, "the screenshot is blank ({busy})");
}

#[test]
fn bad_trace_and_dump_paths_are_one_line_errors_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("t.json");
    let out = minfer(
        &[
            "run",
            "/nonexistent/model.gguf",
            "hi",
            "--trace",
            missing.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_one_line_error(&out, 1, &["trace file", "no-such-dir"]);
    assert!(!missing.exists());
    let out = minfer(&["run", "hi", "--dump-graph", "graph.png"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(".dot or .json"), "{err}");
    let out = minfer(
        &["viz", dir.path().join("nothing.json").to_str().unwrap()],
        dir.path(),
    );
    assert_one_line_error(&out, 1, &["cannot read"]);
    let not_ours = dir.path().join("other.json");
    std::fs::write(&not_ours, "{\"a\": 1}").unwrap();
    let out = minfer(&["viz", not_ours.to_str().unwrap()], dir.path());
    assert_one_line_error(&out, 1, &["neither a minfer trace"]);
    assert!(!dir.path().join("other.html").exists());
    let out = common::command(&["list"], dir.path())
        .env("MINFER_LOG", "minfer=[")
        .output()
        .unwrap();
    assert_one_line_error(&out, 1, &["MINFER_LOG", "not a valid log filter"]);
}
