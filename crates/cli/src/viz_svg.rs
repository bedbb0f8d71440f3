//! The SVG pictures of the viewer page, drawn here rather than in the
//! browser so that the page needs no script to show them: a graph in
//! layers (a node one row below its deepest source) and bar charts.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

const BOX_W: usize = 190;
const BOX_H: usize = 34;
const GAP_X: usize = 16;
const GAP_Y: usize = 18;

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A fill colour per op type, stable across pages.
pub fn op_color(op: &str) -> &'static str {
    match op {
        "mat_mul" => "#9ecae1",
        "attention" => "#fdae6b",
        "rms_norm" => "#a1d99b",
        "add" | "mul" | "scale" => "#dadaeb",
        "swiglu" | "silu" => "#fdd0a2",
        "rope" | "rope_kv_store" | "kv_store" => "#c7e9c0",
        "get_rows" => "#fcbba1",
        "input" => "#f0f0f0",
        "softmax" => "#bcbddc",
        _ => "#e0e0e0",
    }
}

fn shape_text(v: &Value) -> String {
    match v.as_array().map(|a| a.as_slice()) {
        Some([a, b]) => format!("[{a}, {b}]"),
        _ => String::new(),
    }
}

/// Where each drawn node goes: its row (one below its deepest drawn
/// source) and its box's top-left corner.
struct Layout {
    rank: Vec<usize>,
    n_rows: usize,
    pos: HashMap<usize, (usize, usize)>,
    width: usize,
}

fn layout(nodes: &[Value]) -> Layout {
    let empty = Vec::new();
    let is_weight = |i: usize| nodes.get(i).is_some_and(|n| n["op"] == "weight");
    let mut rank = vec![0usize; nodes.len()];
    let mut rows: Vec<Vec<usize>> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if is_weight(i) {
            continue;
        }
        let r = n["srcs"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(Value::as_u64)
            .map(|s| s as usize)
            .filter(|&s| s < i && !is_weight(s))
            .map(|s| rank[s] + 1)
            .max()
            .unwrap_or(0);
        rank[i] = r;
        if rows.len() <= r {
            rows.resize(r + 1, Vec::new());
        }
        rows[r].push(i);
    }
    let mut pos: HashMap<usize, (usize, usize)> = HashMap::new();
    let mut width = 0;
    for (r, row) in rows.iter().enumerate() {
        for (k, &i) in row.iter().enumerate() {
            let x = GAP_X + k * (BOX_W + GAP_X);
            pos.insert(i, (x, GAP_Y + r * (BOX_H + GAP_Y)));
            width = width.max(x + BOX_W);
        }
    }
    Layout {
        rank,
        n_rows: rows.len(),
        pos,
        width,
    }
}

/// The graph of a dump as SVG: weights are left out (a product's weight
/// is named in its tooltip), fused-away nodes are dashed boxes on the
/// right of the node that absorbed them.
pub fn graph_svg(dump: &Value) -> String {
    let empty = Vec::new();
    let nodes = dump["nodes"].as_array().unwrap_or(&empty);
    let Layout {
        rank,
        n_rows,
        pos,
        width,
    } = layout(nodes);
    let by_name: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n["name"].as_str().map(|s| (s, i)))
        .collect();
    let fused = dump["fused_away"].as_array().unwrap_or(&empty);
    let fused_x = width + 3 * GAP_X;
    let mut fused_used: HashMap<usize, usize> = HashMap::new();
    let total_w = if fused.is_empty() {
        width + GAP_X
    } else {
        fused_x + BOX_W + GAP_X
    };
    let height = GAP_Y + n_rows * (BOX_H + GAP_Y);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" width=\"{total_w}\" height=\"{height}\" viewBox=\"0 0 {total_w} {height}\">"
    );
    s.push_str("<g class=\"edges\" stroke=\"#999\" stroke-width=\"1\" fill=\"none\">");
    let is_input = |i: usize| nodes.get(i).is_some_and(|n| n["op"] == "input");
    for (i, n) in nodes.iter().enumerate() {
        let Some(&(x, y)) = pos.get(&i) else { continue };
        for src in n["srcs"].as_array().unwrap_or(&empty) {
            let s_id = src.as_u64().unwrap_or(u64::MAX) as usize;
            let Some(&(sx, sy)) = pos.get(&s_id) else {
                continue;
            };
            // Step inputs (positions, cells, windows) feed every layer;
            // their long edges would cover the picture, so only the ones
            // to the next row are drawn (tooltips name the sources).
            if is_input(s_id) && rank[i] > rank[s_id] + 1 {
                continue;
            }
            let _ = write!(
                s,
                "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{y}\"/>",
                sx + BOX_W / 2,
                sy + BOX_H,
                x + BOX_W / 2
            );
        }
    }
    s.push_str("</g>");
    for (i, n) in nodes.iter().enumerate() {
        let Some(&(x, y)) = pos.get(&i) else { continue };
        let name = n["name"].as_str().unwrap_or("");
        let op = n["op"].as_str().unwrap_or("");
        let shape = shape_text(&n["shape"]);
        let mut tip = format!("{name}\n{op} {shape} {}", n["dtype"].as_str().unwrap_or(""));
        if let Some(b) = n["buffer"].as_str() {
            let _ = write!(tip, "\nbuffer: {b}");
        }
        if let Some(w) = n["weight_bytes"].as_u64().filter(|&w| w > 0) {
            let _ = write!(tip, "\nweights read: {w} bytes");
        }
        let _ = write!(
            s,
            "<g class=\"node\" data-name=\"{}\" data-op=\"{}\"><title>{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"4\" fill=\"{}\" stroke=\"#555\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text><text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#333\">{} {}</text></g>",
            esc(name),
            esc(op),
            esc(&tip),
            op_color(op),
            x + 5,
            y + 14,
            esc(&clip(name, 28)),
            x + 5,
            y + 28,
            esc(op),
            esc(&shape),
        );
    }
    for f in fused {
        let Some(&(_, y)) = f["fused_into"]
            .as_str()
            .and_then(|n| by_name.get(n))
            .and_then(|i| pos.get(i))
        else {
            continue;
        };
        let slot = fused_used.entry(y).or_insert(0);
        let fy = y + *slot * 4;
        *slot += 1;
        let name = f["name"].as_str().unwrap_or("");
        let op = f["op"].as_str().unwrap_or("");
        let _ = write!(
            s,
            "<g class=\"node fused\"><title>{} ({} fused into {})</title><rect x=\"{fused_x}\" y=\"{fy}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"4\" fill=\"#fff\" stroke=\"#999\" stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#777\">{} ({} fused away)</text></g>",
            esc(name),
            esc(op),
            esc(f["fused_into"].as_str().unwrap_or("?")),
            fused_x + 5,
            fy + 20,
            esc(&clip(name, 18)),
            esc(op),
        );
    }
    s.push_str("</svg>");
    s
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// A bar chart of `values` (one bar each, in order) with a y axis in
/// `unit`, `label` under it.
pub fn bars_svg(values: &[(String, f64, &'static str)], unit: &str, label: &str) -> String {
    let (w, h, pad) = (900.0, 220.0, 40.0);
    let max = values.iter().map(|v| v.1).fold(0.0f64, f64::max).max(1e-9);
    let bw = ((w - 2.0 * pad) / values.len().max(1) as f64).max(0.5);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\">",
        h + 30.0,
        h + 30.0
    );
    let _ = write!(
        s,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><text x=\"2\" y=\"14\" font-size=\"11\">{max:.3} {}</text><text x=\"{pad}\" y=\"{}\" font-size=\"11\">{}</text>",
        h - 10.0,
        w - pad,
        h - 10.0,
        esc(unit),
        h + 20.0,
        esc(label)
    );
    for (k, (name, v, color)) in values.iter().enumerate() {
        let bh = (v / max) * (h - 30.0);
        let _ = write!(
            s,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{bh:.2}\" fill=\"{color}\"><title>{}: {v:.3} {}</title></rect>",
            pad + k as f64 * bw,
            h - 10.0 - bh,
            (bw - 0.5).max(0.5),
            esc(name),
            esc(unit)
        );
    }
    s.push_str("</svg>");
    s
}

/// One step's ops along a time axis: a coloured strip per op, `spans`
/// being (start µs, duration µs, op type, node name).
pub fn strip_svg(spans: &[(f64, f64, String, String)]) -> String {
    let (w, h, pad) = (900.0, 60.0, 10.0);
    let t0 = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let t1 = spans.iter().map(|s| s.0 + s.1).fold(0.0f64, f64::max);
    let span = (t1 - t0).max(1e-9);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">"
    );
    for (start, dur, op, name) in spans {
        let x = pad + (start - t0) / span * (w - 2.0 * pad);
        let dw = (dur / span * (w - 2.0 * pad)).max(0.5);
        let _ = write!(
            s,
            "<rect x=\"{x:.2}\" y=\"10\" width=\"{dw:.2}\" height=\"36\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.2\"><title>{} ({}): {dur:.1} µs</title></rect>",
            op_color(op),
            esc(name),
            esc(op)
        );
    }
    s.push_str("</svg>");
    s
}
