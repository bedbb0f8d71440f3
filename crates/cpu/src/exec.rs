//! Running one node on the CPU: the mapping from an IR op and the slots of
//! its sources (as the CPU sees them) onto the kernels of this backend and
//! [`minfer_kernels::matmul`].
//!
//! Nothing here allocates. Buffers were sized when the graph was planned;
//! the output buffer is moved out of the pool for the duration of the op
//! (which leaves an empty, unallocated vector in its place) so that it can
//! be written while the sources are read from the same pool.

use minfer_kernels::pool::{SharedMut, ThreadPool};
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, Layout, MatRef, RowKernels};

use minfer_graph::ir::{AttnParams, KvKind, MoeParams, Node, NodeId, Op};
use minfer_graph::kv::KvRegion;
use minfer_graph::{BuiltGraph, GraphError, RegionTable, Result, Slot, WeightId, WeightStore};

use crate::pool::TypedPool;
use crate::RowTable;

/// Everything a node may read or write during a step.
pub(crate) struct ExecCtx<'a> {
    pub pool: &'a mut TypedPool,
    pub kv: &'a mut RegionTable<KvRegion>,
    pub weights: &'a WeightStore,
    pub kernels: &'a Kernels,
    /// The f32 row routines (activations, softmax) at the same level.
    pub rows: RowKernels,
    pub threads: &'a ThreadPool,
    pub act: &'a mut ActScratch,
    pub attn: &'a mut crate::AttnScratch,
    pub moe: &'a mut crate::moe::MoeScratch,
    /// Copy of K rows that a fused RoPE+store rotates before storing.
    pub rope_scratch: &'a mut [f32],
    pub n_ctx: usize,
    /// Filled prefix of the window-cells input (its buffer is sized for
    /// the largest possible windows).
    pub window_len: usize,
}

/// Views f32 weight bytes as values; GGUF data is aligned, but an owned
/// tensor might not be, and that is reported rather than assumed.
fn f32_weight(weights: &WeightStore, id: WeightId, len: usize) -> Result<&[f32]> {
    let bytes = weights.data(id);
    // SAFETY: every bit pattern is a valid f32, and `align_to` only
    // yields the correctly aligned middle part.
    let (pre, vals, _) = unsafe { bytes.align_to::<f32>() };
    if !pre.is_empty() || vals.len() < len {
        return Err(GraphError::Exec {
            node: weights.info(id).name.clone(),
            msg: format!("cannot be read as {len} aligned f32 values"),
        });
    }
    Ok(&vals[..len])
}

/// The bytes of f32 values, for kernels that take a raw table.
fn f32_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and u8 has alignment 1; the length covers
    // exactly the values' bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// An f32 source: a pool buffer or an f32 weight.
fn src_f32<'a>(pool: &'a TypedPool, weights: &'a WeightStore, slot: Slot) -> Result<&'a [f32]> {
    match slot {
        Slot::F32 { buf, len } => Ok(&pool.f32[buf][..len]),
        Slot::Weight(id) => {
            let s = weights.info(id).shape;
            f32_weight(weights, id, s[0] * s[1])
        }
        _ => Err(GraphError::Exec {
            node: format!("{slot:?}"),
            msg: "expected an f32 value".into(),
        }),
    }
}

/// An i32 source (an input or a reshape of one).
fn src_i32(pool: &TypedPool, slot: Slot) -> Result<&[i32]> {
    match slot {
        Slot::I32 { buf, len } => Ok(&pool.i32[buf][..len]),
        _ => Err(GraphError::Exec {
            node: format!("{slot:?}"),
            msg: "expected an i32 value".into(),
        }),
    }
}

/// Runs node `i` of `g`.
pub(crate) fn exec_node(
    cx: &mut ExecCtx,
    g: &BuiltGraph,
    slots: &[Slot],
    inplace: &[bool],
    i: NodeId,
) -> Result<()> {
    let node = &g.nodes[i];
    let slot_of = |k: usize| slots[node.srcs[k]];
    match &node.op {
        Op::Input(_) | Op::Weight(_) | Op::Reshape => Ok(()),
        Op::KvStore { layer, kind } => {
            let x = src_f32(cx.pool, cx.weights, slot_of(0))?;
            let cells = src_i32(cx.pool, slot_of(1))?;
            crate::kv_store(cx.kv.require_mut(*layer, *kind)?, x, cells)
        }
        Op::RopeKvStore { rope, layer } => {
            let x = src_f32(cx.pool, cx.weights, slot_of(0))?;
            let pos = src_i32(cx.pool, slot_of(1))?;
            let cells = src_i32(cx.pool, slot_of(2))?;
            // The same arithmetic as an unfused rope followed by a store:
            // rotate a copy, then store the copy.
            let tmp = cx
                .rope_scratch
                .get_mut(..x.len())
                .ok_or_else(|| GraphError::Exec {
                    node: node.name.clone(),
                    msg: "rope scratch is smaller than planned".into(),
                })?;
            tmp.copy_from_slice(x);
            crate::rope_inplace(tmp, pos, rope, cx.n_ctx)?;
            crate::kv_store(cx.kv.require_mut(*layer, KvKind::K)?, tmp, cells)
        }
        _ => {
            let Slot::F32 { buf, len } = slots[i] else {
                return Err(GraphError::Exec {
                    node: node.name.clone(),
                    msg: "has no f32 buffer".into(),
                });
            };
            let mut out = std::mem::take(&mut cx.pool.f32[buf]);
            let r = compute(cx, g, slots, inplace, i, &mut out[..len]);
            cx.pool.f32[buf] = out;
            r
        }
    }
}

/// Runs a node that writes an f32 buffer (`out`, moved out of the pool).
fn compute(
    cx: &mut ExecCtx,
    g: &BuiltGraph,
    slots: &[Slot],
    inplace: &[bool],
    i: NodeId,
    out: &mut [f32],
) -> Result<()> {
    let node = &g.nodes[i];
    let slot_of = |k: usize| slots[node.srcs[k]];
    let ne0 = node.shape[0];
    // Elementwise ops run in place: seed the output with the first source
    // unless the planner put the output in that source's buffer already.
    let seed = |cx: &ExecCtx, out: &mut [f32]| -> Result<()> {
        if !inplace[i] {
            let x = src_f32(cx.pool, cx.weights, slot_of(0))?;
            if x.len() != out.len() {
                return Err(GraphError::Exec {
                    node: node.name.clone(),
                    msg: format!("source length {}", x.len()),
                });
            }
            out.copy_from_slice(x);
        }
        Ok(())
    };
    match &node.op {
        Op::GetRows => get_rows(cx, g, &slot_of, node, out),
        Op::RmsNorm { eps } => rms_norm_rows(
            cx,
            src_f32(cx.pool, cx.weights, slot_of(0))?,
            ne0,
            *eps,
            out,
        ),
        Op::Add | Op::Mul => {
            seed(cx, out)?;
            let b = src_f32(cx.pool, cx.weights, slot_of(1))?;
            if node.op == Op::Add {
                crate::add_inplace(out, b, ne0)
            } else {
                crate::mul_inplace(out, b, ne0)
            }
        }
        Op::Scale(s) => {
            seed(cx, out)?;
            crate::scale_inplace(out, *s);
            Ok(())
        }
        Op::Silu => {
            seed(cx, out)?;
            cx.rows.silu(out);
            Ok(())
        }
        Op::Tanh => {
            seed(cx, out)?;
            crate::tanh_inplace(out);
            Ok(())
        }
        Op::SwiGlu | Op::GeGlu => {
            seed(cx, out)?;
            glu(cx, node, src_f32(cx.pool, cx.weights, slot_of(1))?, out)
        }
        Op::Softmax => {
            seed(cx, out)?;
            crate::softmax_inplace(cx.rows, out, ne0)
        }
        Op::Rope(p) => {
            seed(cx, out)?;
            let factors = match node.srcs.len() {
                3 => Some(src_f32(cx.pool, cx.weights, slot_of(2))?),
                _ => None,
            };
            crate::rope_ext_inplace(out, src_i32(cx.pool, slot_of(1))?, p, factors, cx.n_ctx)
        }
        Op::MatMul => mat_mul(cx, g, &slot_of, node, out),
        Op::MoeFfn(p) => moe_ffn(cx, p, &slot_of, node, out),
        Op::Attention(p) => attention(cx, p, &slot_of, node.srcs.len(), out),
        op => Err(GraphError::Exec {
            node: node.name.clone(),
            msg: format!("op {} does not write a buffer", op.name()),
        }),
    }
}

/// A row gather: from a weight (packed or as stored) or from an f32
/// value.
fn get_rows(
    cx: &ExecCtx,
    g: &BuiltGraph,
    slot_of: &dyn Fn(usize) -> Slot,
    node: &Node,
    out: &mut [f32],
) -> Result<()> {
    let ids = src_i32(cx.pool, slot_of(1))?;
    let t = g.nodes[node.srcs[0]].shape;
    match slot_of(0) {
        Slot::Weight(id) => {
            let ty = cx.weights.info(id).ty;
            let table = match cx.weights.packed(id) {
                Some(p) => RowTable::Packed(p),
                None => RowTable::Stored(cx.weights.data(id)),
            };
            crate::get_rows(ty, table, t[0], t[1], ids, out)
        }
        s => {
            let table = f32_bytes(src_f32(cx.pool, cx.weights, s)?);
            crate::get_rows(GgmlType::F32, RowTable::Stored(table), t[0], t[1], ids, out)
        }
    }
}

/// RMS norm of the rows of `x`, row by row on the pool for a batch.
fn rms_norm_rows(cx: &ExecCtx, x: &[f32], ne0: usize, eps: f32, out: &mut [f32]) -> Result<()> {
    if ne0 == 0 || x.len() != out.len() || !x.len().is_multiple_of(ne0) || x.len() < 64 * ne0 {
        // One thread: a decode step's few rows, or input that
        // `rms_norm` refuses with its own error.
        return crate::rms_norm(x, ne0, eps, out);
    }
    // Row by row, so any split of the rows over threads gives the
    // same bits.
    let dst = SharedMut::new(out.as_mut_ptr());
    cx.threads.for_chunks(x.len() / ne0, 1, 2, |r| {
        let (at, len) = (r.start * ne0, r.len() * ne0);
        // SAFETY: the chunks of `for_chunks` are disjoint row ranges
        // inside `out` (as long as `x`, whole rows of `ne0`), which
        // outlives the job; each thread writes only its own rows.
        let o = unsafe { std::slice::from_raw_parts_mut(dst.get().add(at), len) };
        // The shapes were checked above, so this cannot fail.
        let _ = crate::rms_norm(&x[at..at + len], ne0, eps, o);
    });
    Ok(())
}

/// A gated unit over `out` (holding the gate) and `up`, element by
/// element on the pool.
fn glu(cx: &ExecCtx, node: &Node, up: &[f32], out: &mut [f32]) -> Result<()> {
    if up.len() != out.len() {
        return Err(GraphError::Exec {
            node: node.name.clone(),
            msg: format!("{} values with {} up values", out.len(), up.len()),
        });
    }
    let rows = cx.rows;
    let glu = |o: &mut [f32], u: &[f32]| match node.op {
        Op::SwiGlu => rows.swiglu(o, u),
        _ => rows.geglu(o, u),
    };
    // Element by element, so any split over threads gives the
    // same bits.
    let dst = SharedMut::new(out.as_mut_ptr());
    cx.threads.for_chunks(out.len(), 64, 2, |r| {
        // SAFETY: the chunks of `for_chunks` are disjoint and inside
        // `out`, which outlives the job; each thread writes only
        // its own range.
        let o = unsafe { std::slice::from_raw_parts_mut(dst.get().add(r.start), r.len()) };
        glu(o, &up[r]);
    });
    Ok(())
}

/// Weight `id` as the products read it: interleaved when the store
/// repacked it for these kernels.
fn mat_ref<'w>(weights: &'w WeightStore, id: WeightId, shape: [usize; 2]) -> MatRef<'w> {
    let (data, layout) = match weights.packed(id) {
        Some(p) => (p, Layout::Packed),
        None => (weights.data(id), Layout::Rows),
    };
    MatRef {
        ty: weights.info(id).ty,
        rows: shape[1],
        cols: shape[0],
        data,
        layout,
    }
}

/// A routed FFN (see [`crate::moe`]).
fn moe_ffn(
    cx: &mut ExecCtx,
    p: &MoeParams,
    slot_of: &dyn Fn(usize) -> Slot,
    node: &Node,
    out: &mut [f32],
) -> Result<()> {
    let weight = |i: usize| match slot_of(i) {
        Slot::Weight(id) => Ok(mat_ref(cx.weights, id, cx.weights.info(id).shape)),
        _ => Err(GraphError::Exec {
            node: node.name.clone(),
            msg: "the experts must be weights".into(),
        }),
    };
    let biases = match node.srcs.len() {
        8 => Some([
            src_f32(cx.pool, cx.weights, slot_of(5))?,
            src_f32(cx.pool, cx.weights, slot_of(6))?,
            src_f32(cx.pool, cx.weights, slot_of(7))?,
        ]),
        _ => None,
    };
    let experts = crate::moe::Experts {
        up: weight(2)?,
        gate: weight(3)?,
        down: weight(4)?,
        biases,
    };
    let input = crate::moe::MoeInputs {
        x: src_f32(cx.pool, cx.weights, slot_of(0))?,
        router: src_f32(cx.pool, cx.weights, slot_of(1))?,
    };
    let run = crate::moe::MoeRun {
        kernels: cx.kernels,
        rows: cx.rows,
        pool: cx.threads,
        act: cx.act,
        scratch: cx.moe,
    };
    crate::moe::moe_ffn(run, p, &experts, &input, out)
}

/// A matrix product of a weight with the activations.
fn mat_mul(
    cx: &mut ExecCtx,
    g: &BuiltGraph,
    slot_of: &dyn Fn(usize) -> Slot,
    node: &Node,
    out: &mut [f32],
) -> Result<()> {
    let Slot::Weight(id) = slot_of(0) else {
        return Err(GraphError::Exec {
            node: node.name.clone(),
            msg: "mat_mul needs a weight".into(),
        });
    };
    let w = mat_ref(cx.weights, id, g.nodes[node.srcs[0]].shape);
    let x_node = &g.nodes[node.srcs[1]];
    let x = src_f32(cx.pool, cx.weights, slot_of(1))?;
    matmul(cx.kernels, cx.threads, &w, x, x_node.shape[1], out, cx.act)?;
    Ok(())
}

/// Attention of one node of `n_srcs` sources: over each query's whole
/// window, or, with a sliding window, over its most recent positions only;
/// with sinks when the node has them.
fn attention(
    cx: &mut ExecCtx,
    p: &AttnParams,
    slot_of: &dyn Fn(usize) -> Slot,
    n_srcs: usize,
    out: &mut [f32],
) -> Result<()> {
    let q = src_f32(cx.pool, cx.weights, slot_of(0))?;
    let offsets = src_i32(cx.pool, slot_of(3))?;
    let cells = src_i32(cx.pool, slot_of(4))?;
    let cells = &cells[..cx.window_len.min(cells.len())];
    let sinks = match p.sinks_src(n_srcs) {
        Some(s) => Some(src_f32(cx.pool, cx.weights, slot_of(s))?),
        None => None,
    };
    let (k, v) = cx.kv.pair(p.layer)?;
    if p.sliding_window == 0 && sinks.is_none() {
        return crate::attention(q, k, v, offsets, cells, p, cx.threads, cx.attn, out);
    }
    let (positions, cell_pos): (&[i32], &[i32]) = if p.sliding_window > 0 {
        let cell_pos = src_i32(cx.pool, slot_of(6))?;
        let cell_pos = &cell_pos[..cx.window_len.min(cell_pos.len())];
        (src_i32(cx.pool, slot_of(5))?, cell_pos)
    } else {
        (&[], &[])
    };
    let windows = crate::Windows {
        offsets,
        cells,
        query_pos: positions,
        cell_pos,
    };
    match sinks {
        Some(s) => crate::attention_with_sinks(q, k, v, &windows, s, p, cx.threads, cx.attn, out),
        None => crate::attention_sliding(q, k, v, &windows, p, cx.threads, cx.attn, out),
    }
}
