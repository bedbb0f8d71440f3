//! `minfer viz`: a trace or a graph dump as one self-contained HTML page
//! (inline CSS, SVG and a few lines of script; nothing is fetched when the
//! page is viewed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::viz_svg::{bars_svg, esc, graph_svg, op_color, strip_svg};

/// Arguments of `minfer viz`.
#[derive(clap::Args)]
pub struct Args {
    /// A trace written by --trace, or a graph dump written by
    /// --dump-graph FILE.json.
    #[arg(value_name = "TRACE_OR_GRAPH")]
    input: PathBuf,
    /// The page to write (default: the input's name with .html).
    #[arg(short = 'o', long = "output", value_name = "PAGE")]
    output: Option<PathBuf>,
}

/// `minfer viz`.
pub fn run(args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    let v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", args.input.display()))?;
    let title = args
        .input
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let page = page(&v, &title)?;
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.input.with_extension("html"));
    minfer_engine::trace::write_atomically(&out, |w| w.write_all(page.as_bytes()))?;
    println!("{}", out.display());
    Ok(())
}

/// The page for a parsed trace or graph dump.
pub fn page(v: &Value, title: &str) -> Result<String> {
    let (graphs, events) = if let Some(ev) = v["traceEvents"].as_array() {
        (v["minfer"]["graphs"].as_array(), Some(ev))
    } else if v["graphs"].is_array() {
        (v["graphs"].as_array(), None)
    } else {
        bail!("this is neither a minfer trace (--trace) nor a graph dump (--dump-graph FILE.json)");
    };
    let empty = Vec::new();
    let graphs = graphs.unwrap_or(&empty);
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>minfer: {}</title><style>{CSS}</style></head><body>",
        esc(title)
    );
    let _ = write!(html, "<h1>minfer — {}</h1>", esc(title));
    html.push_str("<div class=\"graphs\">");
    for kind in ["prefill", "decode"] {
        let g = graphs.iter().find(|g| g["kind"] == kind);
        html.push_str(&graph_panel(kind, g));
    }
    html.push_str("</div>");
    if let Some(events) = events {
        html.push_str(&trace_section(events));
    }
    let _ = writeln!(html, "<script>{SCRIPT}</script></body></html>");
    Ok(html)
}

fn graph_panel(kind: &str, g: Option<&Value>) -> String {
    let mut s =
        format!("<section class=\"panel graph-panel\" id=\"graph-{kind}\"><h2>{kind} graph</h2>");
    let Some(g) = g else {
        let _ = write!(s, "<p>no {kind} graph in this file</p></section>");
        return s;
    };
    let n_nodes = g["nodes"].as_array().map_or(0, Vec::len);
    // A trace knows the graphs as they run; only a dump lists what the
    // fusion pass removed.
    let fused = match g["fused_away"].as_array() {
        Some(f) => format!("{} fused away (dashed, on the right)", f.len()),
        None => "fused-away nodes: see a --dump-graph FILE.json".to_string(),
    };
    let _ = write!(
        s,
        "<p>{} tokens · {n_nodes} nodes · {fused}</p><table class=\"census\"><tr><th>op</th><th>nodes</th></tr>",
        g["n_tokens"]
    );
    if let Some(c) = g["census"].as_object() {
        for (op, n) in c {
            let _ = write!(
                s,
                "<tr><td><span class=\"sw\" style=\"background:{}\"></span>{}</td><td>{n}</td></tr>",
                op_color(op),
                esc(op)
            );
        }
    }
    s.push_str("</table><div class=\"svgbox\">");
    s.push_str(&graph_svg(g));
    s.push_str("</div></section>");
    s
}

/// An "X" event's fields: (name, cat, tid, ts µs, dur µs, args).
fn complete(e: &Value) -> Option<(&str, &str, u64, f64, f64, &Value)> {
    if e["ph"] != "X" {
        return None;
    }
    Some((
        e["name"].as_str()?,
        e["cat"].as_str().unwrap_or(""),
        e["tid"].as_u64().unwrap_or(0),
        e["ts"].as_f64()?,
        e["dur"].as_f64().unwrap_or(0.0),
        &e["args"],
    ))
}

fn trace_section(events: &[Value]) -> String {
    let mut steps: Vec<(&str, u64, f64, f64)> = Vec::new();
    let mut ops: Vec<(u64, f64, f64, String, String, String)> = Vec::new();
    for e in events {
        let Some((name, cat, tid, ts, dur, args)) = complete(e) else {
            continue;
        };
        match (cat, name) {
            ("engine", "decode" | "prefill") => steps.push((name, tid, ts, dur)),
            ("op", _) => ops.push((
                tid,
                ts,
                dur,
                args["op"].as_str().unwrap_or("?").to_string(),
                args["graph"].as_str().unwrap_or("?").to_string(),
                name.to_string(),
            )),
            _ => {}
        }
    }
    steps.sort_by(|a, b| a.2.total_cmp(&b.2));
    let mut s = String::from(
        "<section class=\"panel\" id=\"timeline\"><h2>Timeline: one bar per forward</h2>",
    );
    let bars: Vec<(String, f64, &'static str)> = steps
        .iter()
        .enumerate()
        .map(|(k, (name, _, _, dur))| {
            let color = if *name == "decode" {
                "#3182bd"
            } else {
                "#e6550d"
            };
            (format!("{name} #{k}"), dur / 1000.0, color)
        })
        .collect();
    let n_decode = steps.iter().filter(|s| s.0 == "decode").count();
    let _ = write!(
        s,
        "<p>{} forwards ({n_decode} decode steps, blue; prefill, orange)</p>",
        steps.len()
    );
    s.push_str(&bars_svg(&bars, "ms", "forward, in order"));
    let mut decode: Vec<&(&str, u64, f64, f64)> =
        steps.iter().filter(|s| s.0 == "decode").collect();
    decode.sort_by(|a, b| a.3.total_cmp(&b.3));
    if let Some(&&(_, tid, ts, dur)) = decode.get(decode.len() / 2) {
        let inside: Vec<(f64, f64, String, String)> = ops
            .iter()
            .filter(|o| o.0 == tid && o.1 >= ts && o.1 + o.2 <= ts + dur)
            .map(|o| (o.1, o.2, o.3.clone(), o.5.clone()))
            .collect();
        let _ = write!(
            s,
            "<h3>The median decode step: {:.3} ms, {} ops</h3>",
            dur / 1000.0,
            inside.len()
        );
        s.push_str(&strip_svg(&inside));
    }
    s.push_str("</section>");
    s.push_str(&op_table(&ops, &steps));
    s
}

fn op_table(
    ops: &[(u64, f64, f64, String, String, String)],
    steps: &[(&str, u64, f64, f64)],
) -> String {
    let mut s = String::from("<section class=\"panel\" id=\"op-types\"><h2>Time per op type</h2>");
    for kind in ["decode", "prefill"] {
        let mut by: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
        for o in ops.iter().filter(|o| o.4 == kind) {
            let e = by.entry(o.3.as_str()).or_default();
            e.0 += o.2;
            e.1 += 1;
        }
        if by.is_empty() {
            continue;
        }
        let total: f64 = by.values().map(|v| v.0).sum();
        let forwards = steps.iter().filter(|st| st.0 == kind).count().max(1);
        let mut rows: Vec<(&str, (f64, u64))> = by.into_iter().collect();
        rows.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        let _ = write!(
            s,
            "<h3>{kind} ({forwards} forwards)</h3><table class=\"ops\"><tr><th>op</th><th>total ms</th><th>share</th><th>count</th><th>µs per forward</th></tr>"
        );
        for (op, (t, c)) in rows {
            let share = if total > 0.0 { 100.0 * t / total } else { 0.0 };
            let _ = write!(
                s,
                "<tr><td><span class=\"sw\" style=\"background:{}\"></span>{}</td><td>{:.2}</td><td><span class=\"bar\" style=\"width:{:.0}px\"></span>{share:.1} %</td><td>{c}</td><td>{:.1}</td></tr>",
                op_color(op),
                esc(op),
                t / 1000.0,
                share * 1.5,
                t / forwards as f64
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>");
    s
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}\
h1{font-size:20px}h2{font-size:16px;margin:4px 0}h3{font-size:14px}\
.graphs{display:flex;gap:12px;align-items:flex-start}\
.panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px;margin-bottom:12px}\
.graph-panel{flex:1 1 0;min-width:0}\
.svgbox{max-height:75vh;overflow:auto;border-top:1px solid #eee;margin-top:6px}\
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee}\
.sw{display:inline-block;width:10px;height:10px;margin-right:6px;border:1px solid #999}\
.bar{display:inline-block;height:8px;background:#3182bd;margin-right:6px}\
.node.hit rect{stroke:#d62728;stroke-width:3}\
#filter{margin:6px 0 10px;padding:4px;width:320px}";

/// Highlights the nodes whose name contains the filter text.
const SCRIPT: &str = "(function(){\
var box=document.createElement('input');box.id='filter';box.placeholder='highlight nodes by name (e.g. blk.3.)';\
var g=document.querySelector('.graphs');if(!g){return;}g.parentNode.insertBefore(box,g);\
box.addEventListener('input',function(){var q=box.value;\
document.querySelectorAll('.node').forEach(function(n){var m=q.length>0&&(n.getAttribute('data-name')||'').indexOf(q)>=0;\
n.classList.toggle('hit',m);});});})();";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_dump_gives_both_panels() {
        let g = |kind: &str| {
            serde_json::json!({
                "kind": kind, "n_tokens": 1, "census": {"input": 1, "rms_norm": 1},
                "nodes": [
                    {"id": 0, "name": "tokens", "op": "input", "shape": [1, 1], "srcs": []},
                    {"id": 1, "name": "norm<x>", "op": "rms_norm", "shape": [8, 1], "srcs": [0]},
                ],
                "fused_away": [{"name": "a", "op": "silu", "fused_into": "norm<x>"}],
            })
        };
        let v = serde_json::json!({"graphs": [g("prefill"), g("decode")]});
        let p = page(&v, "t").unwrap();
        assert!(p.contains("id=\"graph-prefill\"") && p.contains("id=\"graph-decode\""));
        assert!(p.contains("norm&lt;x&gt;"));
        assert!(page(&serde_json::json!({"x": 1}), "t").is_err());
    }
}
