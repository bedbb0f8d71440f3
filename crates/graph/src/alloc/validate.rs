//! The checks a graph passes before any buffer is assigned: sources
//! precede their consumers, every op has the operands it documents, with
//! the element types and shapes it needs, and a layer's KV rows have one
//! width. A graph that fails is refused with the node's name.

use minfer_gguf::GgmlType;

use crate::builder::BuiltGraph;
use crate::error::{GraphError, Result};
use crate::ir::{DType, KvKind, NodeId, Op};
use crate::weights::WeightStore;

/// What kind of value a node holds, as far as its readers care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Computed f32 values (or a reshape of them).
    F32,
    /// i32 step data (or a reshape of it).
    I32,
    /// A weight, of the given type.
    Weight(GgmlType),
    /// The ordering token of a KV store: no value.
    Token,
}

pub(crate) fn err(g: &BuiltGraph, i: NodeId, msg: impl Into<String>) -> GraphError {
    GraphError::Shape {
        node: g.nodes[i].name.clone(),
        op: g.nodes[i].op.name(),
        msg: msg.into(),
    }
}

/// The row width of one layer's K and V regions, and the layer.
pub(crate) type KvRows = Vec<[Option<usize>; 2]>;

fn note_row(
    rows: &mut KvRows,
    layer: usize,
    kind: KvKind,
    row: usize,
    g: &BuiltGraph,
    i: usize,
) -> Result<()> {
    if rows.len() <= layer {
        rows.resize(layer + 1, [None, None]);
    }
    let cell = &mut rows[layer][kind as usize];
    match *cell {
        Some(r) if r != row => Err(err(
            g,
            i,
            format!("KV rows of {row} values; layer {layer} uses {r}"),
        )),
        _ => {
            *cell = Some(row);
            Ok(())
        }
    }
}

/// Checks every node of `g` and returns each node's value kind and the KV
/// row widths the graph's stores and attentions need.
pub(crate) fn validate(g: &BuiltGraph, weights: &WeightStore) -> Result<(Vec<Kind>, KvRows)> {
    let n = g.nodes.len();
    if g.output >= n {
        return Err(GraphError::InvalidGraph(format!(
            "output node {} is not in the graph",
            g.output
        )));
    }
    let mut kinds: Vec<Kind> = Vec::with_capacity(n);
    let mut rows = KvRows::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if let Some(&s) = node.srcs.iter().find(|&&s| s >= i) {
            return Err(err(g, i, format!("source {s} does not precede the node")));
        }
        let src = |k: usize, what: &str| -> Result<Kind> {
            node.srcs
                .get(k)
                .map(|&s| kinds[s])
                .ok_or_else(|| err(g, i, format!("missing source {k} ({what})")))
        };
        let is_f32 = |k: Kind| matches!(k, Kind::F32 | Kind::Weight(GgmlType::F32));
        let kind = match &node.op {
            Op::Input(_) => {
                if node.dtype != DType::I32 {
                    return Err(err(g, i, "inputs hold i32"));
                }
                Kind::I32
            }
            Op::Weight(id) => {
                if id.0 as usize >= weights.len() {
                    return Err(err(
                        g,
                        i,
                        format!("weight handle {} is not in the store", id.0),
                    ));
                }
                let info = weights.info(*id);
                if info.shape != node.shape {
                    return Err(err(g, i, format!("weight shape {:?}", info.shape)));
                }
                Kind::Weight(info.ty)
            }
            Op::Reshape => match src(0, "x")? {
                Kind::Token => return Err(err(g, i, "cannot reshape a KV store token")),
                k => k,
            },
            Op::KvStore { layer, kind } => {
                if !is_f32(src(0, "x")?) || src(1, "kv_cells")? != Kind::I32 {
                    return Err(err(g, i, "needs f32 rows and i32 cells"));
                }
                note_row(
                    &mut rows,
                    *layer,
                    *kind,
                    g.nodes[node.srcs[0]].shape[0],
                    g,
                    i,
                )?;
                Kind::Token
            }
            Op::RopeKvStore { rope, layer } => {
                let (x, p, c) = (src(0, "x")?, src(1, "positions")?, src(2, "kv_cells")?);
                if x != Kind::F32 || p != Kind::I32 || c != Kind::I32 {
                    return Err(err(g, i, "needs f32 rows, i32 positions and i32 cells"));
                }
                let xs = g.nodes[node.srcs[0]].shape;
                if xs[0] != rope.n_head * rope.head_dim {
                    return Err(err(
                        g,
                        i,
                        format!("rows of {} are not heads of RoPE", xs[0]),
                    ));
                }
                note_row(&mut rows, *layer, KvKind::K, xs[0], g, i)?;
                Kind::Token
            }
            op => {
                if node.dtype != DType::F32 {
                    return Err(err(g, i, "computed values are f32"));
                }
                check_sources(g, i, op, &kinds, weights)?;
                if let Op::Attention(p) = op {
                    let row = p.n_head_kv * p.head_dim;
                    note_row(&mut rows, p.layer, KvKind::K, row, g, i)?;
                    note_row(&mut rows, p.layer, KvKind::V, row, g, i)?;
                }
                let products: &[usize] = match op {
                    Op::MatMul => &[0],
                    Op::MoeFfn(_) => &[2, 3, 4],
                    _ => &[],
                };
                for &s in products {
                    let Kind::Weight(ty) = kinds[node.srcs[s]] else {
                        continue;
                    };
                    if minfer_kernels::act_type(ty).is_none() {
                        let w = &g.nodes[node.srcs[s]];
                        return Err(err(
                            g,
                            i,
                            format!(
                                "weight {} has type {}, which has no matrix product",
                                w.name,
                                ty.name()
                            ),
                        ));
                    }
                }
                Kind::F32
            }
        };
        kinds.push(kind);
    }
    if kinds[g.output] != Kind::F32 || matches!(g.nodes[g.output].op, Op::Weight(_)) {
        return Err(err(g, g.output, "the output must be a computed f32 value"));
    }
    Ok((kinds, rows))
}

/// Checks the value kinds of a compute node's sources.
fn check_sources(
    g: &BuiltGraph,
    i: NodeId,
    op: &Op,
    kinds: &[Kind],
    weights: &WeightStore,
) -> Result<()> {
    let srcs = &g.nodes[i].srcs;
    let wanted: &[&str] = match op {
        Op::GetRows => &["table", "ids"],
        Op::MatMul => &["weight", "f32"],
        Op::Rope(_) if srcs.len() == 3 => &["f32", "ids", "f32"],
        Op::Rope(_) => &["f32", "ids"],
        // The sinks, when there are any, come last.
        Op::Attention(p) if p.sliding_window > 0 && p.sinks_src(srcs.len()).is_some() => {
            &["f32", "token", "token", "ids", "ids", "ids", "ids", "f32"]
        }
        Op::Attention(p) if p.sliding_window > 0 => {
            &["f32", "token", "token", "ids", "ids", "ids", "ids"]
        }
        Op::Attention(p) if p.sinks_src(srcs.len()).is_some() => {
            &["f32", "token", "token", "ids", "ids", "f32"]
        }
        Op::Attention(_) => &["f32", "token", "token", "ids", "ids"],
        Op::Add | Op::Mul | Op::SwiGlu | Op::GeGlu => &["f32", "f32"],
        Op::MoeFfn(_) if srcs.len() == 8 => &[
            "f32", "f32", "weight", "weight", "weight", "f32", "f32", "f32",
        ],
        Op::MoeFfn(_) => &["f32", "f32", "weight", "weight", "weight"],
        _ => &["f32"],
    };
    if srcs.len() != wanted.len() {
        return Err(err(
            g,
            i,
            format!("{} sources, expected {}", srcs.len(), wanted.len()),
        ));
    }
    for (k, (&s, &want)) in srcs.iter().zip(wanted).enumerate() {
        let kind = kinds[s];
        let ok = match want {
            "f32" => matches!(kind, Kind::F32 | Kind::Weight(GgmlType::F32)),
            "ids" => kind == Kind::I32,
            "weight" => matches!(kind, Kind::Weight(_)),
            "table" => matches!(kind, Kind::Weight(_) | Kind::F32),
            "token" => kind == Kind::Token,
            _ => true,
        };
        if !ok {
            let what = match (&g.nodes[s].op, kind) {
                (Op::Weight(id), _) => format!(
                    "weight {} of type {}",
                    weights.info(*id).name,
                    weights.info(*id).ty.name()
                ),
                (_, Kind::F32) => "F32".to_string(),
                (_, Kind::I32) => "I32".to_string(),
                _ => "None".to_string(),
            };
            let what = if want == "token" {
                format!("{what} (sources 1 and 2 must be the layer's KV stores)")
            } else {
                what
            };
            return Err(err(g, i, format!("source {k} must be {want}, got {what}")));
        }
    }
    Ok(())
}
