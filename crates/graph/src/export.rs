//! Graph dumps: Graphviz DOT for looking at a topology, JSON for tools
//! (the format behind a `--dump-graph` option).

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::builder::BuiltGraph;
use crate::ir::{DType, InputKind, Node, Op};

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::I32 => "i32",
    }
}

/// The op's parameters as JSON (empty object for ops without any).
fn op_params(op: &Op) -> Value {
    match op {
        Op::Input(kind) => json!({ "kind": format!("{kind:?}") }),
        Op::Weight(id) => json!({ "weight": id.0 }),
        Op::RmsNorm { eps } => json!({ "eps": eps }),
        Op::Scale(s) => json!({ "scale": s }),
        Op::Rope(p) => json!({
            "style": format!("{:?}", p.style), "n_head": p.n_head, "head_dim": p.head_dim,
            "n_rot": p.n_rot, "freq_base": p.freq_base, "freq_scale": p.freq_scale,
            "attn_factor": p.attn_factor,
        }),
        Op::KvStore { layer, kind } => json!({ "layer": layer, "kind": format!("{kind:?}") }),
        Op::RopeKvStore { rope, layer } => json!({
            "layer": layer, "style": format!("{:?}", rope.style), "n_head": rope.n_head,
            "head_dim": rope.head_dim, "n_rot": rope.n_rot, "freq_base": rope.freq_base,
            "freq_scale": rope.freq_scale, "attn_factor": rope.attn_factor,
        }),
        Op::Attention(p) => json!({
            "layer": p.layer, "n_head": p.n_head, "n_head_kv": p.n_head_kv,
            "head_dim": p.head_dim, "scale": p.scale, "sliding_window": p.sliding_window,
        }),
        Op::MoeFfn(p) => json!({
            "n_expert": p.n_expert, "n_used": p.n_used, "n_ff": p.n_ff,
            "gating": format!("{:?}", p.gating), "norm_weights": p.norm_weights,
            "weights_scale": p.weights_scale, "act": format!("{:?}", p.act),
        }),
        _ => json!({}),
    }
}

fn node_json(id: usize, n: &Node) -> Value {
    json!({
        "id": id,
        "name": n.name,
        "op": n.op.name(),
        "params": op_params(&n.op),
        "shape": n.shape,
        "dtype": dtype_name(n.dtype),
        "srcs": n.srcs,
    })
}

/// The graph as JSON: `{"nodes": [{id, name, op, params, shape, dtype,
/// srcs}], "inputs": [{kind, node}], "output": id}`.
pub fn to_json(g: &BuiltGraph) -> Value {
    let nodes: Vec<Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| node_json(i, n))
        .collect();
    let inputs: Vec<Value> = g
        .inputs
        .iter()
        .map(|&(kind, id): &(InputKind, usize)| json!({ "kind": format!("{kind:?}"), "node": id }))
        .collect();
    json!({ "nodes": nodes, "inputs": inputs, "output": g.output })
}

/// [`to_json`], pretty-printed.
pub fn to_json_string(g: &BuiltGraph) -> String {
    // Serializing a `Value` cannot fail (its map keys are strings).
    serde_json::to_string_pretty(&to_json(g)).unwrap_or_default()
}

/// Escapes a string for a double-quoted DOT label.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The graph in Graphviz DOT: one box per node (name, op, shape, dtype),
/// one edge per source. Inputs are drawn as ellipses, weights as notes and
/// the output doubled.
pub fn to_dot(g: &BuiltGraph) -> String {
    let mut s = String::from(
        "digraph minfer {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n",
    );
    for (i, n) in g.nodes.iter().enumerate() {
        let shape = match (&n.op, i == g.output) {
            (_, true) => "doubleoctagon",
            (Op::Input(_), _) => "ellipse",
            (Op::Weight(_), _) => "note",
            _ => "box",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(
            s,
            "  n{i} [shape={shape}, label=\"{}\\n{} [{}, {}] {}\"];",
            dot_escape(&n.name),
            n.op.name(),
            n.shape[0],
            n.shape[1],
            dtype_name(n.dtype)
        );
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for &src in &n.srcs {
            let _ = writeln!(s, "  n{src} -> n{i};");
        }
    }
    s.push_str("}\n");
    s
}
