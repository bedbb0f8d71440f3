//! Dumps of built graphs as the cache runs them: every node with its op,
//! shape, type and the buffer it lives in, plus the nodes the fusion pass
//! folded away, as JSON (for tools and the viewer page) and Graphviz DOT.
//!
//! A dump is a JSON value rather than a Rust type so that the viewer can
//! read one back from a file without the graph crate's types; the DOT text
//! is made from that same value.

use std::fmt::Write as _;

use minfer_trace::{GraphMeta, NodeMeta};
use serde_json::{json, Map, Value};

use crate::builder::BuiltGraph;
use crate::ir::{DType, KvKind, Op};
use crate::params::{GraphKind, GraphParams};
use crate::plan::Slot;
use crate::weights::WeightStore;

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::I32 => "i32",
    }
}

/// "prefill" or "decode".
pub fn kind_name(kind: GraphKind) -> &'static str {
    match kind {
        GraphKind::Prefill => "prefill",
        GraphKind::Decode => "decode",
    }
}

/// Bytes of model weights node `i` reads when it runs: a whole matrix for
/// a product, one row per token for a row lookup, the chosen experts (at
/// most) for a routed FFN, nothing otherwise.
pub fn weight_bytes(g: &BuiltGraph, weights: &WeightStore, i: usize) -> u64 {
    let node = &g.nodes[i];
    if let Op::MoeFfn(p) = node.op {
        // At most every row's chosen experts, each read once.
        let used = (node.shape[1] * p.n_used).min(p.n_expert) as u64;
        return node.srcs[2..]
            .iter()
            .filter_map(|&s| match g.nodes[s].op {
                Op::Weight(id) => Some(weights.data(id).len() as u64 / p.n_expert as u64 * used),
                _ => None,
            })
            .sum();
    }
    let Some(&src) = node.srcs.first() else {
        return 0;
    };
    let Op::Weight(id) = g.nodes[src].op else {
        return 0;
    };
    let total = weights.data(id).len() as u64;
    match node.op {
        Op::MatMul => total,
        Op::GetRows => {
            let rows = g.nodes[src].shape[1].max(1) as u64;
            total / rows * node.shape[1] as u64
        }
        _ => 0,
    }
}

/// The node descriptions the trace recorder resolves op events with.
pub fn trace_meta(g: &BuiltGraph, params: &GraphParams, weights: &WeightStore) -> GraphMeta {
    GraphMeta {
        kind: kind_name(params.kind),
        n_tokens: params.n_tokens,
        nodes: g
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeMeta {
                name: n.name.clone(),
                op: n.op.name(),
                shape: n.shape,
                dtype: dtype_name(n.dtype),
                weight_bytes: weight_bytes(g, weights, i),
                srcs: n.srcs.iter().map(|&s| s as u32).collect(),
            })
            .collect(),
    }
}

/// Where a node's value lives, in words: a pool buffer, a weight tensor, a
/// layer's KV region (for the stores), or nothing.
fn buffer_name(op: &Op, slot: Slot, weights: &WeightStore) -> String {
    match (op, slot) {
        (Op::KvStore { layer, kind }, _) => format!("kv[{layer}].{}", kv_letter(*kind)),
        (Op::RopeKvStore { layer, .. }, _) => format!("kv[{layer}].K"),
        (_, Slot::Weight(id)) => format!("weight {}", weights.info(id).name),
        (_, Slot::F32 { buf, .. }) => format!("f32#{buf}"),
        (_, Slot::I32 { buf, .. }) => format!("i32#{buf}"),
        (_, Slot::None) => "none".into(),
    }
}

fn kv_letter(kind: KvKind) -> &'static str {
    match kind {
        KvKind::K => "K",
        KvKind::V => "V",
    }
}

/// What a cached graph looks like to a dump: the graph, the slot and
/// in-place flag of every node, and the graph built without fusion.
pub struct DumpParts<'a> {
    /// The params the graph was built for.
    pub params: &'a GraphParams,
    /// The graph as it runs (fused).
    pub graph: &'a BuiltGraph,
    /// The same params built with every rewrite off.
    pub unfused: &'a BuiltGraph,
    /// Each node's slot on its home device.
    pub slots: &'a [Slot],
    /// Each node's home device.
    pub devices: &'a [crate::types::Device],
    /// Each node's in-place flag.
    pub inplace: &'a [bool],
    /// Nodes per op name.
    pub census: &'a [(&'static str, usize)],
}

/// The dump of one graph as JSON: `{kind, n_tokens, n_out, output, census,
/// nodes: [{id, name, op, shape, dtype, srcs, buffer, inplace,
/// weight_bytes}], fused_away: [{name, op, shape, dtype, fused_into}]}`.
pub fn dump_json(p: &DumpParts, weights: &WeightStore) -> Value {
    let g = p.graph;
    let nodes: Vec<Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let slot = p.slots.get(i).copied().unwrap_or(Slot::None);
            json!({
                "id": i,
                "name": n.name,
                "op": n.op.name(),
                "shape": n.shape,
                "dtype": dtype_name(n.dtype),
                "srcs": n.srcs,
                "buffer": buffer_name(&n.op, slot, weights),
                "inplace": p.inplace.get(i).copied().unwrap_or(false),
                "device": p.devices.get(i).map_or("cpu", |d| d.name()),
                "weight_bytes": weight_bytes(g, weights, i),
            })
        })
        .collect();
    // A fused node keeps its consumer's name, so the nodes of the unfused
    // graph whose names are gone are exactly those folded into another.
    let kept: std::collections::HashSet<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    let u = p.unfused;
    let fused_away: Vec<Value> = u
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !kept.contains(n.name.as_str()))
        .map(|(i, n)| {
            let into = u
                .nodes
                .iter()
                .find(|c| c.srcs.contains(&i) && kept.contains(c.name.as_str()))
                .map(|c| c.name.as_str());
            json!({
                "name": n.name,
                "op": n.op.name(),
                "shape": n.shape,
                "dtype": dtype_name(n.dtype),
                "fused_into": into,
            })
        })
        .collect();
    let census: Map<String, Value> = p
        .census
        .iter()
        .map(|&(name, c)| (name.to_string(), json!(c)))
        .collect();
    json!({
        "kind": kind_name(p.params.kind),
        "n_tokens": p.params.n_tokens,
        "n_out": p.params.n_out,
        "output": g.output,
        "census": census,
        "nodes": nodes,
        "fused_away": fused_away,
    })
}

/// Escapes a string for a double-quoted DOT label.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn shape_text(v: &Value) -> String {
    match v.as_array().map(|a| a.as_slice()) {
        Some([a, b]) => format!("[{a}, {b}]"),
        _ => v.to_string(),
    }
}

/// Graphviz DOT for a list of graph dumps (from [`dump_json`]): one
/// cluster per graph, one box per node (name, op, shape, type, buffer);
/// fused-away nodes are dashed grey boxes with a dashed edge to the node
/// that absorbed them. Weights are named in the label of the node that
/// reads them rather than drawn: a few hundred extra nodes, each with an
/// edge, make Graphviz take minutes instead of seconds.
pub fn dumps_to_dot(dumps: &[Value]) -> String {
    // Straight edges and a short crossing search keep `dot` fast on
    // graphs of a thousand nodes; the layers read top to bottom anyway.
    let mut s = String::from(
        "digraph minfer {\n  rankdir=TB;\n  newrank=true;\n  splines=false;\n  mclimit=0.1;\n  nslimit=1;\n  remincross=false;\n  node [fontname=\"monospace\", fontsize=9];\n",
    );
    for (gi, d) in dumps.iter().enumerate() {
        let kind = d["kind"].as_str().unwrap_or("graph");
        // Writing to a String cannot fail.
        let _ = writeln!(
            s,
            "  subgraph cluster_{gi} {{\n    label=\"{} ({} tokens)\";",
            dot_escape(kind),
            d["n_tokens"]
        );
        let output = d["output"].as_u64();
        let empty = Vec::new();
        let nodes = d["nodes"].as_array().unwrap_or(&empty);
        let is_weight = |i: u64| nodes.get(i as usize).is_some_and(|n| n["op"] == "weight");
        let mut by_name = std::collections::HashMap::new();
        for n in nodes {
            let id = n["id"].as_u64().unwrap_or(0);
            let name = n["name"].as_str().unwrap_or("");
            by_name.insert(name, id);
            let op = n["op"].as_str().unwrap_or("");
            if op == "weight" {
                continue;
            }
            let shape = match (op, Some(id) == output) {
                (_, true) => "doubleoctagon",
                ("input", _) => "ellipse",
                _ => "box",
            };
            let weights: Vec<&str> = n["srcs"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter_map(Value::as_u64)
                .filter(|&w| is_weight(w))
                .filter_map(|w| nodes[w as usize]["name"].as_str())
                .collect();
            let w = if weights.is_empty() {
                String::new()
            } else {
                format!("\\nw: {}", dot_escape(&weights.join(", ")))
            };
            let _ = writeln!(
                s,
                "    g{gi}n{id} [shape={shape}, label=\"{}\\n{} {} {}\\n{}{w}\"];",
                dot_escape(name),
                dot_escape(op),
                shape_text(&n["shape"]),
                dot_escape(n["dtype"].as_str().unwrap_or("")),
                dot_escape(n["buffer"].as_str().unwrap_or("")),
            );
        }
        // Step inputs feed every layer; a long edge from one node to each
        // layer is what makes Graphviz slow (minutes for a few hundred), so
        // after its first reader an input is drawn again, dotted, beside
        // each further one.
        let mut input_used = std::collections::HashSet::new();
        for n in nodes {
            let id = n["id"].as_u64().unwrap_or(0);
            for src in n["srcs"].as_array().unwrap_or(&empty) {
                let Some(src) = src.as_u64().filter(|&w| !is_weight(w)) else {
                    continue;
                };
                let src_node = &nodes[src as usize];
                if src_node["op"] == "input" && !input_used.insert(src) {
                    let _ = writeln!(
                        s,
                        "    g{gi}n{src}u{id} [shape=ellipse, style=dotted, label=\"{}\"];\n    g{gi}n{src}u{id} -> g{gi}n{id};",
                        dot_escape(src_node["name"].as_str().unwrap_or(""))
                    );
                } else {
                    let _ = writeln!(s, "    g{gi}n{src} -> g{gi}n{id};");
                }
            }
        }
        let fused = d["fused_away"].as_array().unwrap_or(&empty);
        for (k, f) in fused.iter().enumerate() {
            let _ = writeln!(
                s,
                "    g{gi}f{k} [shape=box, style=dashed, color=grey, fontcolor=grey, label=\"{}\\n{} (fused away)\"];",
                dot_escape(f["name"].as_str().unwrap_or("")),
                dot_escape(f["op"].as_str().unwrap_or("")),
            );
            if let Some(into) = f["fused_into"].as_str().and_then(|n| by_name.get(n)) {
                let _ = writeln!(
                    s,
                    "    g{gi}f{k} -> g{gi}n{into} [style=dashed, color=grey];"
                );
            }
        }
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    s
}
