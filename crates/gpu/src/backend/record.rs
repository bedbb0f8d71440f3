//! Recording a graph: each GPU node's op turned into the dispatches of
//! the kernels in [`crate::ops`], bound to the node buffers, KV regions
//! and resident weights once, when the graph is built.

use minfer_graph::{AttnParams, BuiltGraph, Device, GraphError, GraphView, Node, NodeId, Op, Slot};
use minfer_kernels::GgmlType;

use super::{gerr, GResult, GpuBackend, Recorded};
use crate::kernel::{BufRange, Dispatch};
use crate::ops::attention::{self, SlidingInputs};
use crate::ops::elementwise::{self, BinaryOp};
use crate::ops::groups_for;
use crate::ops::matmul::{self, DeviceWeight, WeightChunk};

const COPY_WGSL: &str = include_str!("../shaders/copy.wgsl");

fn node_err(node: &Node, msg: impl std::fmt::Display) -> GraphError {
    GraphError::Shape {
        node: node.name.clone(),
        op: node.op.name(),
        msg: format!("on the GPU: {msg}"),
    }
}

impl GpuBackend {
    /// The dispatches of every GPU split of `view`, bound.
    pub(super) fn record(&mut self, view: &GraphView) -> GResult<Recorded> {
        // Weights first: the resident copies must exist before any range
        // borrows them.
        for range in view.splits {
            for i in range.clone() {
                let node = &view.graph.nodes[i];
                if !minfer_graph::splits::runs(&node.op) {
                    continue;
                }
                for &s in &node.srcs {
                    if let Op::Weight(id) = view.graph.nodes[s].op {
                        self.resident(view.weights, id)?;
                    }
                }
                if let Op::MatMul = node.op {
                    self.reserve_matmul(view.graph, node, view)?;
                }
            }
        }
        let mut splits = Vec::with_capacity(view.splits.len());
        for range in view.splits {
            let mut bound = Vec::new();
            for i in range.clone() {
                let node = &view.graph.nodes[i];
                if !minfer_graph::splits::runs(&node.op) {
                    continue;
                }
                let ds = self.node_dispatches(view, i)?;
                for d in &ds {
                    bound.push(self.gpu.bind(d).map_err(gerr)?);
                }
            }
            splits.push((range.clone(), bound));
        }
        Ok(Recorded { splits })
    }

    fn reserve_matmul(&mut self, g: &BuiltGraph, node: &Node, view: &GraphView) -> GResult<()> {
        let Op::Weight(id) = g.nodes[node.srcs[0]].op else {
            return Ok(());
        };
        let ty = view.weights.info(id).ty;
        let cols = g.nodes[node.srcs[0]].shape[0];
        let n_tok = g.nodes[node.srcs[1]].shape[1];
        self.grow_scratch(matmul::matmul_scratch_bytes(ty, cols, n_tok))
    }

    /// Where source `k` of node `i` is, as this device sees it.
    fn src(&self, view: &GraphView, i: NodeId, k: usize) -> GResult<BufRange> {
        let node = &view.graph.nodes[i];
        let s = *node
            .srcs
            .get(k)
            .ok_or_else(|| node_err(node, format!("missing source {k}")))?;
        match view.plan.on(Device::Gpu)[s] {
            Slot::Weight(id) => {
                let w = self
                    .weights
                    .get(&id)
                    .ok_or_else(|| node_err(node, "weight not resident"))?;
                if w.chunks.len() != 1 {
                    return Err(node_err(node, "a split weight as an elementwise operand"));
                }
                Ok(BufRange::whole(&w.chunks[0].buffer))
            }
            slot => self.range(slot),
        }
    }

    fn out(&self, view: &GraphView, i: NodeId) -> GResult<BufRange> {
        self.range(view.plan.on(Device::Gpu)[i])
    }

    /// A copy of source 0 into the output, unless the planner put the
    /// output in that source's buffer already.
    fn seed(&self, view: &GraphView, i: NodeId, out: &BufRange) -> GResult<Vec<Dispatch>> {
        if view.plan.inplace[i] {
            return Ok(Vec::new());
        }
        let n = view.graph.nodes[i].n_elements() as u64;
        let kernel = self.gpu.kernel("copy_f32", COPY_WGSL).map_err(gerr)?;
        Ok(vec![Dispatch {
            kernel,
            params: vec![n as u32],
            buffers: vec![self.src(view, i, 0)?, out.clone()],
            groups: groups_for(n, 256),
        }])
    }

    /// The dispatches of attention node `i`, with its sinks (gpt-oss)
    /// where it has them.
    fn attention_dispatches(
        &self,
        view: &GraphView,
        i: NodeId,
        p: &AttnParams,
        rows: u32,
    ) -> GResult<Vec<Dispatch>> {
        let node = &view.graph.nodes[i];
        let sinks = match p.sinks_src(node.srcs.len()) {
            Some(k) => Some(self.src(view, i, k)?),
            None => None,
        };
        let kv = |layer: usize, kind: minfer_graph::KvKind| self.region(layer, kind);
        let q = self.src(view, i, 0)?;
        let offsets = self.src(view, i, 3)?;
        let cells = self.src(view, i, 4)?;
        let sliding = if p.sliding_window > 0 {
            Some(SlidingInputs {
                positions: self.src(view, i, 5)?,
                cell_positions: self.src(view, i, 6)?,
            })
        } else {
            None
        };
        attention::attention(
            &self.gpu,
            &q,
            kv(p.layer, minfer_graph::KvKind::K)?,
            kv(p.layer, minfer_graph::KvKind::V)?,
            &offsets,
            &cells,
            sliding.as_ref(),
            sinks.as_ref(),
            rows,
            p,
            &self.out(view, i)?,
        )
        .map_err(gerr)
    }

    /// The dispatches of node `i`.
    fn node_dispatches(&self, view: &GraphView, i: NodeId) -> GResult<Vec<Dispatch>> {
        let g = view.graph;
        let node = &g.nodes[i];
        let gpu = &*self.gpu;
        let ne0 = node.shape[0] as u32;
        let rows = node.shape[1] as u32;
        let n = node.n_elements() as u32;
        let kv = |layer: usize, kind: minfer_graph::KvKind| self.region(layer, kind);
        let ds = match &node.op {
            Op::KvStore { layer, kind } => {
                let x = self.src(view, i, 0)?;
                let cells = self.src(view, i, 1)?;
                let n_rows = g.nodes[node.srcs[0]].shape[1] as u32;
                attention::kv_store(gpu, kv(*layer, *kind)?, &x, &cells, n_rows)
            }
            Op::RopeKvStore { rope, layer } => {
                let x = self.src(view, i, 0)?;
                let pos = self.src(view, i, 1)?;
                let cells = self.src(view, i, 2)?;
                let n_rows = g.nodes[node.srcs[0]].shape[1] as u32;
                attention::rope_kv_store(
                    gpu,
                    kv(*layer, minfer_graph::KvKind::K)?,
                    &x,
                    &pos,
                    &cells,
                    n_rows,
                    rope,
                )
            }
            Op::GetRows => return self.get_rows(view, i),
            Op::RmsNorm { eps } => {
                let x = self.src(view, i, 0)?;
                elementwise::rms_norm(gpu, &x, &self.out(view, i)?, ne0, rows, *eps)
            }
            Op::MatMul => {
                let Op::Weight(id) = g.nodes[node.srcs[0]].op else {
                    return Err(node_err(node, "mat_mul needs a weight"));
                };
                let w = self
                    .weights
                    .get(&id)
                    .ok_or_else(|| node_err(node, "weight not resident"))?;
                let x = self.src(view, i, 1)?;
                let n_tok = g.nodes[node.srcs[1]].shape[1];
                let scratch = BufRange::whole(&self.scratch);
                matmul::matmul(gpu, w, &x, n_tok, &self.out(view, i)?, &scratch)
            }
            Op::Attention(p) => return self.attention_dispatches(view, i, p, rows),
            op => {
                // The elementwise ops run in place on the output.
                let out = self.out(view, i)?;
                let mut ds = self.seed(view, i, &out)?;
                let more = match op {
                    Op::Add | Op::Mul => {
                        let b = self.src(view, i, 1)?;
                        let b_rows = g.nodes[node.srcs[1]].shape[1] as u32;
                        let which = if *op == Op::Add {
                            BinaryOp::Add
                        } else {
                            BinaryOp::Mul
                        };
                        elementwise::binary_inplace(gpu, which, &out, &b, ne0, rows, b_rows)
                    }
                    Op::Scale(s) => elementwise::scale_inplace(gpu, &out, n, *s),
                    Op::Silu => elementwise::silu_inplace(gpu, &out, n),
                    Op::Tanh => elementwise::tanh_inplace(gpu, &out, n),
                    Op::SwiGlu => elementwise::swiglu_inplace(gpu, &out, &self.src(view, i, 1)?, n),
                    Op::GeGlu => elementwise::geglu_inplace(gpu, &out, &self.src(view, i, 1)?, n),
                    Op::Softmax => elementwise::softmax_inplace(gpu, &out, ne0, rows),
                    // Frequency factors are applied on the CPU (the plan
                    // puts such a rope there).
                    Op::Rope(_) if node.srcs.len() == 3 => {
                        return Err(node_err(
                            node,
                            "rope with frequency factors has no GPU kernel",
                        ))
                    }
                    Op::Rope(p) => {
                        attention::rope_inplace(gpu, &out, &self.src(view, i, 1)?, rows, p)
                    }
                    other => {
                        return Err(node_err(
                            node,
                            format!("op {} has no GPU kernel", other.name()),
                        ))
                    }
                }
                .map_err(gerr)?;
                ds.extend(more);
                Ok(ds)
            }
        };
        ds.map_err(gerr)
    }

    /// Rows of a weight table, or of an f32 value (the selection of the
    /// output rows).
    fn get_rows(&self, view: &GraphView, i: NodeId) -> GResult<Vec<Dispatch>> {
        let g = view.graph;
        let node = &g.nodes[i];
        let ids = self.src(view, i, 1)?;
        let n_ids = g.nodes[node.srcs[1]].n_elements();
        let out = self.out(view, i)?;
        let table_node = &g.nodes[node.srcs[0]];
        let ds = match view.plan.on(Device::Gpu)[node.srcs[0]] {
            Slot::Weight(id) => {
                let w = self
                    .weights
                    .get(&id)
                    .ok_or_else(|| node_err(node, "weight not resident"))?;
                matmul::get_rows(&self.gpu, w, &ids, n_ids, &out)
            }
            slot => {
                let table = self.range(slot)?;
                let w = DeviceWeight {
                    ty: GgmlType::F32,
                    rows: table_node.shape[1],
                    cols: table_node.shape[0],
                    chunks: vec![WeightChunk {
                        buffer: table.buffer,
                        first_row: 0,
                        rows: table_node.shape[1],
                    }],
                };
                matmul::get_rows(&self.gpu, &w, &ids, n_ids, &out)
            }
        };
        ds.map_err(gerr)
    }
}
