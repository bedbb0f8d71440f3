//! Seeing inside a run: the trace recorder's events written as Chrome
//! trace-event JSON (Perfetto, chrome://tracing), and the same events
//! summed into the time split that `--timings` prints.
//!
//! Recording itself is the bottom crate `minfer-trace` (re-exported here
//! as [`rec`]), so that the thread pool, the graph cache and the backends
//! record into it without the engine knowing them; this module only reads
//! what was recorded, after the run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

pub use minfer_graph::dump::dumps_to_dot;
/// The trace recorder (its own crate, which the kernels, the graph and the
/// backends record into); front ends reach it through this one path.
pub use minfer_trace as rec;
use rec::{Event, Recording, What};

use crate::error::{EngineError, Result};

/// Turns recording on for the rest of the process with room for
/// `lane_capacity` events per thread, reserved on each thread's first
/// event, and by pool workers when they start: start recording before
/// building an engine to keep every lane's allocation out of its steps.
/// Returns `false` when it already was.
pub fn start_recording(lane_capacity: usize) -> bool {
    rec::install(lane_capacity)
}

/// Records a finished forward of `n` rows that started at `start`, with
/// the counters that follow it: rows per second and KV cells in use.
pub(crate) fn forward_done(start: Option<u64>, kind: &'static str, n: usize, cells_used: usize) {
    let Some(t) = start else { return };
    let dur = rec::now_ns().saturating_sub(t);
    rec::span("engine", kind, t, n as u64);
    if dur > 0 {
        rec::counter("tokens_per_s", n as f64 * 1e9 / dur as f64);
    }
    rec::counter("kv_cells_used", cells_used as f64);
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The name, category and arguments of a recorded event, resolved against
/// the recording's graphs.
fn describe(r: &Recording, ev: &Event) -> (String, &'static str, Value) {
    let node = |graph: u32, node: u32| {
        r.graphs
            .get(graph as usize)
            .and_then(|g| g.nodes.get(node as usize).map(|n| (g, n)))
    };
    match ev.what {
        What::Span { cat, name, arg } => (name.to_string(), cat, json!({ "n": arg })),
        What::Track { name, arg, .. } => (name.to_string(), "request", json!({ "n": arg })),
        What::Op { graph, node: i } | What::Work { graph, node: i } => match node(graph, i) {
            Some((g, n)) => (
                n.name.clone(),
                if matches!(ev.what, What::Op { .. }) {
                    "op"
                } else {
                    "work"
                },
                json!({
                    "op": n.op, "shape": n.shape, "dtype": n.dtype,
                    "weight_bytes": n.weight_bytes, "graph": g.kind, "node": i,
                }),
            ),
            None => ("work".into(), "work", json!({})),
        },
        What::Counter { name, value } => (name.to_string(), "counter", json!({ name: value })),
    }
}

/// The recording as a Chrome trace-event JSON object: one track per
/// recording thread (named after it), one per virtual track, complete
/// ("X") events for spans and ops, "C" events for counters. `extra` is
/// stored under the top-level key `minfer` (graph dumps, for the viewer).
pub fn chrome_json(r: &Recording, extra: Value) -> Value {
    let pid = 1;
    let mut events = Vec::new();
    events.push(json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": "minfer"}}));
    for (tid, name, lane) in &r.lanes {
        events.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}));
        events.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}));
        for ev in lane {
            let (name, cat, args) = describe(r, ev);
            let ts = us(ev.start_ns);
            let e = match ev.what {
                What::Counter { .. } => {
                    json!({"ph": "C", "pid": pid, "name": name, "ts": ts, "args": args})
                }
                What::Track { track, .. } => json!({
                    "ph": "X", "pid": pid, "tid": track_tid(track), "name": name, "cat": cat,
                    "ts": ts, "dur": us(ev.dur_ns), "args": args,
                }),
                _ => json!({
                    "ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat,
                    "ts": ts, "dur": us(ev.dur_ns), "args": args,
                }),
            };
            events.push(e);
        }
    }
    for (track, name) in &r.tracks {
        let tid = track_tid(*track);
        events.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}));
        events.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"dropped_events": r.dropped},
        "minfer": extra,
    })
}

/// Writes a trace made by [`chrome_json`] with its top-level keys in the
/// order trace viewers stream them: `displayTimeUnit` first (Perfetto
/// reads it only at the start), then `traceEvents`, `otherData`, and our
/// own `minfer` key last, because a streaming reader may stop at a key it
/// does not know.
///
/// # Errors
/// As [`write_atomically`].
pub fn write_chrome_trace(path: &Path, trace: &Value) -> Result<()> {
    write_atomically(path, |w| {
        let ser = |w: &mut dyn Write, v: &Value| {
            serde_json::to_writer(&mut *w, v).map_err(std::io::Error::other)
        };
        w.write_all(b"{\"displayTimeUnit\":")?;
        ser(w, &trace["displayTimeUnit"])?;
        w.write_all(b",\n\"traceEvents\":[\n")?;
        let empty = Vec::new();
        for (i, e) in trace["traceEvents"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .enumerate()
        {
            if i > 0 {
                w.write_all(b",\n")?;
            }
            ser(w, e)?;
        }
        w.write_all(b"],\n\"otherData\":")?;
        ser(w, &trace["otherData"])?;
        w.write_all(b",\n\"minfer\":")?;
        ser(w, &trace["minfer"])?;
        w.write_all(b"}\n")
    })
}

/// Virtual tracks get tids far above any thread's.
fn track_tid(track: u32) -> u64 {
    1_000_000 + u64::from(track)
}

/// Writes `value` to `path` through a temporary file in the same folder
/// that is renamed over `path` at the end, so that a failed write never
/// leaves a half-written file behind.
///
/// # Errors
/// [`EngineError::Io`]-style errors naming the path.
pub fn write_json_atomically(path: &Path, value: &Value) -> Result<()> {
    write_atomically(path, |w| {
        serde_json::to_writer(&mut *w, value).map_err(std::io::Error::other)
    })
}

/// Writes what `fill` writes to `path` by way of a temporary file that is
/// renamed at the end.
///
/// # Errors
/// [`EngineError::Output`] naming the path and the cause.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let fail = |e: std::io::Error| EngineError::Output {
        path: path.to_path_buf(),
        msg: e.to_string(),
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| std::ffi::OsString::from("out"), |n| n.to_os_string());
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let f = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(f);
        fill(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

/// Time and count of one kind of thing (a phase, an op type).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Total nanoseconds.
    pub ns: u64,
    /// How many.
    pub count: u64,
}

/// Where a run's time went, summed from a recording.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Engine phases by span name: tokenize, prefill, decode, sample,
    /// detokenize, step, graph_build.
    pub phases: BTreeMap<&'static str, Tally>,
    /// Op time by graph kind ("prefill", "decode") and op type.
    pub ops: BTreeMap<(&'static str, &'static str), Tally>,
    /// Graph builds (misses) and reuses.
    pub graph_builds: u64,
    /// Graph reuses (the last reuse counter value).
    pub graph_reuses: u64,
    /// Events lost to full lanes.
    pub dropped: u64,
    /// Speculative decoding: guessed tokens checked, and accepted (the
    /// last counter values).
    pub spec_drafted: u64,
    /// See `spec_drafted`.
    pub spec_accepted: u64,
}

impl Summary {
    /// Sums the spans and op events of `r`.
    pub fn of(r: &Recording) -> Summary {
        let mut s = Summary {
            dropped: r.dropped,
            ..Summary::default()
        };
        for (_, _, lane) in &r.lanes {
            for ev in lane {
                match ev.what {
                    What::Span { name, .. } => {
                        let t = s.phases.entry(name).or_default();
                        t.ns += ev.dur_ns;
                        t.count += 1;
                        if name == "graph_build" {
                            s.graph_builds += 1;
                        }
                    }
                    What::Op { graph, node } => {
                        let Some(g) = r.graphs.get(graph as usize) else {
                            continue;
                        };
                        let Some(n) = g.nodes.get(node as usize) else {
                            continue;
                        };
                        let t = s.ops.entry((g.kind, n.op)).or_default();
                        t.ns += ev.dur_ns;
                        t.count += 1;
                    }
                    What::Counter {
                        name: "graph_reuses",
                        value,
                    } => s.graph_reuses = s.graph_reuses.max(value as u64),
                    What::Counter {
                        name: "spec_drafted",
                        value,
                    } => s.spec_drafted = s.spec_drafted.max(value as u64),
                    What::Counter {
                        name: "spec_accepted",
                        value,
                    } => s.spec_accepted = s.spec_accepted.max(value as u64),
                    _ => {}
                }
            }
        }
        s
    }

    /// The report `--timings` prints: the phase split, graph builds and
    /// reuses, and per graph kind a table of op types (time, share, count,
    /// and time per forward).
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let ms = |ns: u64| ns as f64 / 1e6;
        let _ = writeln!(out, "timings:");
        for name in [
            "tokenize",
            "prefill",
            "decode",
            "sample",
            "detokenize",
            "graph_build",
        ] {
            let t = self.phases.get(name).copied().unwrap_or_default();
            let label = match name {
                "decode" => "forward (decode)",
                "prefill" => "forward (prefill)",
                "sample" => "sampling",
                other => other,
            };
            let _ = writeln!(
                out,
                "  {label:<18} {:>10.2} ms  {:>6} calls",
                ms(t.ns),
                t.count
            );
        }
        if let Some(t) = self.phases.get("draft") {
            let _ = writeln!(
                out,
                "  {:<18} {:>10.2} ms  {:>6} calls",
                "drafting",
                ms(t.ns),
                t.count
            );
        }
        if self.spec_drafted > 0 {
            let _ = writeln!(
                out,
                "  speculation: {} guesses checked, {} accepted ({:.1}%)",
                self.spec_drafted,
                self.spec_accepted,
                100.0 * self.spec_accepted as f64 / self.spec_drafted as f64
            );
        }
        let _ = writeln!(
            out,
            "  graphs: {} built, {} reused",
            self.graph_builds, self.graph_reuses
        );
        for kind in ["prefill", "decode"] {
            let rows: Vec<(&str, Tally)> = self
                .ops
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|((_, op), t)| (*op, *t))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let total: u64 = rows.iter().map(|(_, t)| t.ns).sum();
            let forwards = self.phases.get(kind).map_or(1, |t| t.count.max(1));
            let mut rows = rows;
            rows.sort_by_key(|r| std::cmp::Reverse(r.1.ns));
            let _ = writeln!(
                out,
                "  {kind} ops ({forwards} forwards, {:.2} ms of ops per forward):",
                ms(total) / forwards as f64
            );
            let _ = writeln!(
                out,
                "    {:<14} {:>10} {:>7} {:>8} {:>12}",
                "op", "ms", "share", "count", "us/forward"
            );
            for (op, t) in rows {
                let share = if total > 0 {
                    100.0 * t.ns as f64 / total as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    out,
                    "    {op:<14} {:>10.2} {:>6.1}% {:>8} {:>12.1}",
                    ms(t.ns),
                    share,
                    t.count,
                    t.ns as f64 / 1e3 / forwards as f64
                );
            }
        }
        if self.dropped > 0 {
            let _ = writeln!(
                out,
                "  ({} events dropped: trace buffers full)",
                self.dropped
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use rec::{GraphMeta, NodeMeta};

    fn recording() -> Recording {
        let node = |name: &str, op: &'static str| NodeMeta {
            name: name.into(),
            op,
            shape: [4, 1],
            dtype: "f32",
            weight_bytes: 0,
            srcs: vec![],
        };
        let span = |start_ns, dur_ns, name| Event {
            start_ns,
            dur_ns,
            what: What::Span {
                cat: "engine",
                name,
                arg: 1,
            },
        };
        let op = |start_ns, dur_ns, node| Event {
            start_ns,
            dur_ns,
            what: What::Op { graph: 0, node },
        };
        Recording {
            lanes: vec![(
                1,
                "main".into(),
                vec![
                    op(1000, 3000, 0),
                    op(5000, 1000, 1),
                    span(0, 8000, "decode"),
                ],
            )],
            graphs: vec![Arc::new(GraphMeta {
                kind: "decode",
                n_tokens: 1,
                nodes: vec![node("blk.0.q", "mat_mul"), node("blk.0.attn", "attention")],
            })],
            tracks: vec![(7, "request 7".into())],
            dropped: 0,
        }
    }

    #[test]
    fn chrome_json_names_ops_and_tracks() {
        let v = chrome_json(&recording(), json!({}));
        let ev = v["traceEvents"].as_array().unwrap();
        let op = ev.iter().find(|e| e["name"] == "blk.0.q").unwrap();
        assert_eq!(op["ph"], "X");
        assert_eq!(op["args"]["op"], "mat_mul");
        assert_eq!(op["ts"], 1.0);
        assert_eq!(op["dur"], 3.0);
        assert!(ev
            .iter()
            .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "request 7"));
    }

    #[test]
    fn the_summary_splits_op_time_by_type() {
        let s = Summary::of(&recording());
        assert_eq!(s.ops[&("decode", "mat_mul")].ns, 3000);
        assert_eq!(s.ops[&("decode", "attention")].count, 1);
        assert_eq!(s.phases["decode"].count, 1);
        let text = s.render();
        assert!(text.contains("decode ops (1 forwards"), "{text}");
        assert!(text.contains("75.0%"), "{text}");
    }

    #[test]
    fn a_write_that_fails_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        let err = write_atomically(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("disk full"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
