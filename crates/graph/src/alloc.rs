//! The allocator of a [`GraphCache`](crate::GraphCache): node buffers drawn
//! from typed per-backend pools by liveness, and the persistent KV regions.
//!
//! No node value outlives the step that computes it (the KV cache lives in
//! the regions, not in node buffers), so every pool buffer is free at the
//! start of a step. Planning a graph therefore starts from the whole pool
//! and walks the nodes in build order, taking a buffer for each value and
//! giving it back after its last reader. The cached graphs of one cache
//! share the same physical buffers; only one of them runs at a time.
//!
//! The KV regions are a separate, never-freed list: one K and one V region
//! per layer, created by the first graph that stores into or attends over
//! that layer, at the full `n_ctx`. Rebuilding or evicting a graph touches
//! node buffers only.

use crate::builder::BuiltGraph;
use crate::error::{GraphError, Result};
use crate::ir::{DType, KvKind, NodeId, Op};
use crate::kv::KvRegion;
use crate::params::{BackendPlan, GraphParams, KvFormat};
use crate::weights::{WeightId, WeightStore};

/// Where a node's value lives while a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// No value: the ordering token of a KV store.
    None,
    /// Read from the weight store, never copied.
    Weight(WeightId),
    /// The first `len` values of f32 pool buffer `buf`.
    F32 {
        /// Index of the pool buffer.
        buf: usize,
        /// Values used.
        len: usize,
    },
    /// The first `len` values of i32 pool buffer `buf`.
    I32 {
        /// Index of the pool buffer.
        buf: usize,
        /// Values used.
        len: usize,
    },
}

impl Slot {
    /// The f32 pool buffer behind the slot, if any.
    fn f32_buf(self) -> Option<usize> {
        match self {
            Slot::F32 { buf, .. } => Some(buf),
            _ => None,
        }
    }
}

/// Counters of what the allocator has created, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Node buffers created since the cache was made (never destroyed).
    pub buffers_created: usize,
    /// Bytes held by node buffers.
    pub buffer_bytes: usize,
    /// KV regions created (one K and one V per layer).
    pub kv_regions: usize,
    /// Bytes held by KV regions.
    pub kv_bytes: usize,
}

/// The node buffers of one backend, one list per element type so that
/// integers never travel through `f32`.
#[derive(Default)]
pub(crate) struct TypedPool {
    pub f32: Vec<Vec<f32>>,
    pub i32: Vec<Vec<i32>>,
}

/// One layer's persistent K and V regions.
#[derive(Default)]
pub(crate) struct LayerKv {
    pub k: Option<KvRegion>,
    pub v: Option<KvRegion>,
}

/// Bytes one region of `row` values per cell takes over `n_ctx` cells.
fn region_bytes(format: KvFormat, row: usize, n_ctx: usize) -> usize {
    let per_row = match format {
        KvFormat::F32 => row * 4,
        KvFormat::F16 => row * 2,
        // 32 values per block, an f16 scale and 32 signed bytes.
        KvFormat::Q8_0 => row / 32 * 34,
    };
    per_row * n_ctx
}

/// The buffer layout of one built graph, computed once when it is built.
#[derive(Debug)]
pub(crate) struct MemPlan {
    /// Where each node's value lives.
    pub slots: Vec<Slot>,
    /// Whether a node writes its result over its first source's buffer.
    pub inplace: Vec<bool>,
    /// Values of the widest K row a fused RoPE+store rotates (its scratch).
    pub rope_scratch: usize,
    /// Widest head of any attention node (0 when there is none).
    pub attn_head_dim: usize,
    /// Most query heads sharing one KV head in any attention node.
    pub attn_group: usize,
    /// The mat_mul that needs the most quantized-activation scratch:
    /// (weight, values per row, activation rows).
    pub widest_matmul: Option<(WeightId, usize, usize)>,
    /// The most activation values (values per row × rows) of any mat_mul
    /// with quantized activations: what the interleaved kernels' tables
    /// are sized for.
    pub max_act_values: usize,
    /// Highest weight handle the graph reads; the store given at execute
    /// must hold it.
    pub max_weight: Option<WeightId>,
}

/// Node buffers and KV regions of one cache.
#[derive(Default)]
pub struct Allocator {
    cpu: TypedPool,
    kv: Vec<LayerKv>,
    stats: AllocStats,
}

/// Per-type free lists and buffer end-of-life marks during planning.
struct Walk {
    f32_free: Vec<usize>,
    i32_free: Vec<usize>,
    f32_end: Vec<usize>,
    i32_end: Vec<usize>,
}

fn err(g: &BuiltGraph, i: NodeId, msg: impl Into<String>) -> GraphError {
    GraphError::Shape {
        node: g.nodes[i].name.clone(),
        op: g.nodes[i].op.name(),
        msg: msg.into(),
    }
}

/// Takes the smallest free buffer that holds `n` values, or creates one.
fn take<T: Clone + Default>(
    bufs: &mut Vec<Vec<T>>,
    free: &mut Vec<usize>,
    end: &mut Vec<usize>,
    stats: &mut AllocStats,
    n: usize,
) -> Result<usize> {
    let best = free
        .iter()
        .enumerate()
        .filter(|&(_, &b)| bufs[b].len() >= n)
        .min_by_key(|&(_, &b)| bufs[b].len())
        .map(|(k, _)| k);
    if let Some(k) = best {
        return Ok(free.swap_remove(k));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n.max(1)).map_err(|e| {
        GraphError::Other(format!("cannot allocate a node buffer of {n} values: {e}"))
    })?;
    v.resize(n.max(1), T::default());
    bufs.push(v);
    end.push(0);
    stats.buffers_created += 1;
    stats.buffer_bytes += n.max(1) * std::mem::size_of::<T>();
    Ok(bufs.len() - 1)
}

impl Allocator {
    /// An allocator with empty pools and no KV regions.
    pub fn new() -> Self {
        Self::default()
    }

    /// What has been created so far.
    pub fn stats(&self) -> AllocStats {
        self.stats
    }

    /// A backend's pool and the KV regions, borrowed together for a step.
    pub(crate) fn step_parts(&mut self, backend: BackendPlan) -> (&mut TypedPool, &mut [LayerKv]) {
        match backend {
            BackendPlan::Cpu => (&mut self.cpu, &mut self.kv),
        }
    }

    /// Layer `layer`'s K or V region, if a graph has created it.
    pub fn kv_region(&self, layer: usize, kind: KvKind) -> Option<&KvRegion> {
        let l = self.kv.get(layer)?;
        match kind {
            KvKind::K => l.k.as_ref(),
            KvKind::V => l.v.as_ref(),
        }
    }

    /// Layer `layer`'s K or V region for writing, if it exists.
    pub fn kv_region_mut(&mut self, layer: usize, kind: KvKind) -> Option<&mut KvRegion> {
        let l = self.kv.get_mut(layer)?;
        match kind {
            KvKind::K => l.k.as_mut(),
            KvKind::V => l.v.as_mut(),
        }
    }

    /// Makes sure layer `layer` has its `kind` region of `row` values per
    /// cell, or checks that the existing one matches.
    fn ensure_region(
        &mut self,
        layer: usize,
        kind: KvKind,
        row: usize,
        params: &GraphParams,
    ) -> Result<()> {
        let n_ctx = params.compute.n_ctx as usize;
        let format = params.compute.kv_format;
        self.ensure_kv_region(layer, kind, row, n_ctx, format)
    }

    /// Makes sure layer `layer` has its `kind` region of `n_ctx` cells of
    /// `row` values in `format` (creating it now rather than at the first
    /// graph that uses it), or checks that the existing one matches.
    ///
    /// # Errors
    /// [`GraphError::Other`] when an existing region has another shape or
    /// format, or the region cannot be allocated;
    /// [`GraphError::BadInput`] for a zero size.
    pub fn ensure_kv_region(
        &mut self,
        layer: usize,
        kind: KvKind,
        row: usize,
        n_ctx: usize,
        format: KvFormat,
    ) -> Result<()> {
        if self.kv.len() <= layer {
            self.kv.resize_with(layer + 1, LayerKv::default);
        }
        let slot = match kind {
            KvKind::K => &mut self.kv[layer].k,
            KvKind::V => &mut self.kv[layer].v,
        };
        if let Some(r) = slot {
            if r.row_elems() != row || r.n_ctx() != n_ctx || r.format() != format {
                return Err(GraphError::Other(format!(
                    "KV region {kind:?} of layer {layer} holds {} cells of {} values as {:?}; \
                     this graph needs {n_ctx} cells of {row} values as {format:?} \
                     (the regions are sized once per cache)",
                    r.n_ctx(),
                    r.row_elems(),
                    r.format()
                )));
            }
            return Ok(());
        }
        *slot = Some(KvRegion::new(format, row, n_ctx)?);
        self.stats.kv_regions += 1;
        self.stats.kv_bytes += region_bytes(format, row, n_ctx);
        Ok(())
    }

    /// Plans the buffers of `g` (a fused graph built for `params`) and
    /// creates the KV regions it is the first to use.
    pub(crate) fn plan(
        &mut self,
        g: &BuiltGraph,
        params: &GraphParams,
        weights: &WeightStore,
    ) -> Result<MemPlan> {
        let n = g.nodes.len();
        if g.output >= n {
            return Err(GraphError::Other(format!(
                "output node {} is not in the graph",
                g.output
            )));
        }
        // Consumer edges and the last reader of every node, in build order
        // (sources always precede their consumers).
        let mut uses = vec![0usize; n];
        let mut last_use: Vec<usize> = (0..n).collect();
        for (i, node) in g.nodes.iter().enumerate() {
            for &s in &node.srcs {
                if s >= i {
                    return Err(err(g, i, format!("source {s} does not precede the node")));
                }
                uses[s] += 1;
                last_use[s] = i;
            }
        }
        // Inputs are filled before the walk starts and the output is read
        // after it ends, so both stay live for the whole step.
        for &(_, id) in &g.inputs {
            last_use[id] = usize::MAX;
        }
        last_use[g.output] = usize::MAX;

        // Split borrows: the pool is walked while the counters are updated.
        let pool = match params.compute.backend {
            BackendPlan::Cpu => &mut self.cpu,
        };
        let mut w = Walk {
            f32_free: (0..pool.f32.len()).collect(),
            i32_free: (0..pool.i32.len()).collect(),
            f32_end: vec![0; pool.f32.len()],
            i32_end: vec![0; pool.i32.len()],
        };
        let mut plan = MemPlan {
            slots: vec![Slot::None; n],
            inplace: vec![false; n],
            rope_scratch: 0,
            attn_head_dim: 0,
            attn_group: 0,
            widest_matmul: None,
            max_act_values: 0,
            max_weight: None,
        };
        let mut widest_act = 0usize;
        // Row width of each layer's K and V, from the stores (or the
        // attention when a layer is only read).
        let mut kv_rows: Vec<[Option<usize>; 2]> = Vec::new();
        let mut note_row =
            |layer: usize, kind: KvKind, row: usize, g: &BuiltGraph, i: usize| -> Result<()> {
                if kv_rows.len() <= layer {
                    kv_rows.resize(layer + 1, [None, None]);
                }
                let cell = &mut kv_rows[layer][kind as usize];
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
            };

        for (i, node) in g.nodes.iter().enumerate() {
            let src_slot = |k: usize| node.srcs.get(k).map(|&s| plan.slots[s]);
            let need = |k: usize, what: &str| -> Result<Slot> {
                src_slot(k).ok_or_else(|| err(g, i, format!("missing source {k} ({what})")))
            };
            let is_f32 = |s: Slot| match s {
                Slot::F32 { .. } => true,
                Slot::Weight(id) => weights.info(id).ty == minfer_gguf::GgmlType::F32,
                _ => false,
            };
            let is_i32 = |s: Slot| matches!(s, Slot::I32 { .. });
            let slot = match &node.op {
                Op::Input(_) => {
                    if node.dtype != DType::I32 {
                        return Err(err(g, i, "inputs hold i32"));
                    }
                    let b = take(
                        &mut pool.i32,
                        &mut w.i32_free,
                        &mut w.i32_end,
                        &mut self.stats,
                        node.n_elements(),
                    )?;
                    Slot::I32 {
                        buf: b,
                        len: node.n_elements(),
                    }
                }
                Op::Weight(id) => {
                    if id.0 as usize >= weights.len() {
                        return Err(err(
                            g,
                            i,
                            format!("weight handle {} is not in the store", id.0),
                        ));
                    }
                    if weights.info(*id).shape != node.shape {
                        return Err(err(
                            g,
                            i,
                            format!("weight shape {:?}", weights.info(*id).shape),
                        ));
                    }
                    plan.max_weight = plan.max_weight.max(Some(*id));
                    Slot::Weight(*id)
                }
                Op::Reshape => match need(0, "x")? {
                    Slot::F32 { buf, .. } => Slot::F32 {
                        buf,
                        len: node.n_elements(),
                    },
                    Slot::I32 { buf, .. } => Slot::I32 {
                        buf,
                        len: node.n_elements(),
                    },
                    Slot::Weight(id) => Slot::Weight(id),
                    Slot::None => return Err(err(g, i, "cannot reshape a KV store token")),
                },
                Op::KvStore { layer, kind } => {
                    if !is_f32(need(0, "x")?) || !is_i32(need(1, "kv_cells")?) {
                        return Err(err(g, i, "needs f32 rows and i32 cells"));
                    }
                    note_row(*layer, *kind, g.nodes[node.srcs[0]].shape[0], g, i)?;
                    Slot::None
                }
                Op::RopeKvStore { rope, layer } => {
                    let (x, p, c) = (need(0, "x")?, need(1, "positions")?, need(2, "kv_cells")?);
                    if !matches!(x, Slot::F32 { .. }) || !is_i32(p) || !is_i32(c) {
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
                    plan.rope_scratch = plan.rope_scratch.max(xs[0] * xs[1]);
                    note_row(*layer, KvKind::K, xs[0], g, i)?;
                    Slot::None
                }
                op => {
                    if node.dtype != DType::F32 {
                        return Err(err(g, i, "computed values are f32"));
                    }
                    self::check_sources(g, i, op, &plan.slots, weights, &is_f32, &is_i32)?;
                    if let Op::Attention(p) = op {
                        let [Some(Slot::None), Some(Slot::None)] = [src_slot(1), src_slot(2)]
                        else {
                            return Err(err(g, i, "sources 1 and 2 must be the layer's KV stores"));
                        };
                        note_row(p.layer, KvKind::K, p.n_head_kv * p.head_dim, g, i)?;
                        note_row(p.layer, KvKind::V, p.n_head_kv * p.head_dim, g, i)?;
                        plan.attn_head_dim = plan.attn_head_dim.max(p.head_dim);
                        plan.attn_group = plan.attn_group.max(p.n_head / p.n_head_kv.max(1));
                    }
                    if let (Op::MatMul, Slot::Weight(id)) = (op, plan.slots[node.srcs[0]]) {
                        let info = weights.info(id);
                        let act = minfer_kernels::act_type(info.ty).ok_or_else(|| {
                            err(
                                g,
                                i,
                                format!(
                                    "weight {} has type {}, which has no matrix product",
                                    info.name,
                                    info.ty.name()
                                ),
                            )
                        })?;
                        let cols = g.nodes[node.srcs[0]].shape[0];
                        let rows_x = g.nodes[node.srcs[1]].shape[1];
                        let bytes =
                            minfer_kernels::matmul::row_bytes(act, cols).unwrap_or(0) * rows_x;
                        if act != minfer_gguf::GgmlType::F32 {
                            plan.max_act_values = plan.max_act_values.max(cols * rows_x);
                        }
                        // Float activations are read in place and need no scratch.
                        if act != minfer_gguf::GgmlType::F32 && bytes > widest_act {
                            widest_act = bytes;
                            plan.widest_matmul = Some((id, cols, rows_x));
                        }
                    }
                    self::inplace_or_fresh(g, i, &uses, &mut plan, &mut w, pool, &mut self.stats)?
                }
            };
            plan.slots[i] = slot;
            // A value that aliases a buffer keeps it until its own last reader.
            match slot {
                Slot::F32 { buf, .. } => w.f32_end[buf] = w.f32_end[buf].max(last_use[i]),
                Slot::I32 { buf, .. } => w.i32_end[buf] = w.i32_end[buf].max(last_use[i]),
                _ => {}
            }
            // Give back the buffers whose last reader is this node, after the
            // node took its own, so an output never overlaps a live source
            // unless the in-place rule chose so.
            for s in node.srcs.iter().copied().chain(std::iter::once(i)) {
                match plan.slots[s] {
                    Slot::F32 { buf, .. } if w.f32_end[buf] == i && !w.f32_free.contains(&buf) => {
                        w.f32_free.push(buf)
                    }
                    Slot::I32 { buf, .. } if w.i32_end[buf] == i && !w.i32_free.contains(&buf) => {
                        w.i32_free.push(buf)
                    }
                    _ => {}
                }
            }
        }
        if !matches!(plan.slots[g.output], Slot::F32 { .. }) {
            return Err(err(g, g.output, "the output must be a computed f32 value"));
        }
        for (layer, rows) in kv_rows.iter().enumerate() {
            for (kind, row) in [(KvKind::K, rows[0]), (KvKind::V, rows[1])] {
                if let Some(row) = row {
                    self.ensure_region(layer, kind, row, params)?;
                }
            }
        }
        Ok(plan)
    }
}

/// Checks the slot kinds of a compute node's sources.
fn check_sources(
    g: &BuiltGraph,
    i: NodeId,
    op: &Op,
    slots: &[Slot],
    weights: &WeightStore,
    is_f32: &dyn Fn(Slot) -> bool,
    is_i32: &dyn Fn(Slot) -> bool,
) -> Result<()> {
    let srcs = &g.nodes[i].srcs;
    let kinds: &[&str] = match op {
        Op::GetRows => &["table", "ids"],
        Op::MatMul => &["weight", "f32"],
        Op::Rope(_) => &["f32", "ids"],
        Op::Attention(p) if p.sliding_window > 0 => {
            &["f32", "token", "token", "ids", "ids", "ids", "ids"]
        }
        Op::Attention(_) => &["f32", "token", "token", "ids", "ids"],
        Op::Add | Op::Mul | Op::SwiGlu | Op::GeGlu => &["f32", "f32"],
        _ => &["f32"],
    };
    if srcs.len() != kinds.len() {
        return Err(err(
            g,
            i,
            format!("{} sources, expected {}", srcs.len(), kinds.len()),
        ));
    }
    for (k, (&s, &kind)) in srcs.iter().zip(kinds).enumerate() {
        let slot = slots[s];
        let ok = match kind {
            "f32" => is_f32(slot),
            "ids" => is_i32(slot),
            "weight" => matches!(slot, Slot::Weight(_)),
            "table" => matches!(slot, Slot::Weight(_) | Slot::F32 { .. }),
            _ => true,
        };
        if !ok {
            let what = match slot {
                Slot::Weight(id) => format!(
                    "weight {} of type {}",
                    weights.info(id).name,
                    weights.info(id).ty.name()
                ),
                other => format!("{other:?}"),
            };
            return Err(err(g, i, format!("source {k} must be {kind}, got {what}")));
        }
    }
    Ok(())
}

/// The output slot of a compute node: its first source's buffer when the
/// in-place rule allows it, else a fresh f32 buffer.
fn inplace_or_fresh(
    g: &BuiltGraph,
    i: NodeId,
    uses: &[usize],
    plan: &mut MemPlan,
    w: &mut Walk,
    pool: &mut TypedPool,
    stats: &mut AllocStats,
) -> Result<Slot> {
    let node = &g.nodes[i];
    let len = node.n_elements();
    if node.op.can_be_inplace() {
        let s0 = node.srcs[0];
        let src = &g.nodes[s0];
        // The op may overwrite its first source only if nothing reads that
        // value after it: it is the sole consumer, no alias of the buffer is
        // read later, the source is computed (not an input, weight or KV
        // token) and no other source of the op lives in the same buffer.
        let computed = !matches!(
            src.op,
            Op::Input(_) | Op::Weight(_) | Op::KvStore { .. } | Op::RopeKvStore { .. }
        );
        if let Some(buf) = plan.slots[s0].f32_buf() {
            let others_elsewhere = node.srcs[1..]
                .iter()
                .all(|&s| plan.slots[s].f32_buf() != Some(buf));
            if computed
                && uses[s0] == 1
                && w.f32_end[buf] == i
                && others_elsewhere
                && src.n_elements() == len
            {
                plan.inplace[i] = true;
                return Ok(Slot::F32 { buf, len });
            }
        }
    }
    let buf = take(&mut pool.f32, &mut w.f32_free, &mut w.f32_end, stats, len)?;
    Ok(Slot::F32 { buf, len })
}
