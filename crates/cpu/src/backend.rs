//! The CPU backend: the kernels crate's products and this crate's
//! kernels on one persistent thread pool, node buffers as plain vectors,
//! the KV regions of the layers it runs, and the scratch its kernels need,
//! sized when a graph is prepared so that no step allocates.

use std::ops::Range;
use std::time::{Duration, Instant};

use minfer_graph::ir::{KvKind, Op};
use minfer_graph::kv::KvRegion;
use minfer_graph::splits::runs;
use minfer_graph::{
    Backend, Device, GraphError, GraphUid, GraphView, HostBackend, KvInfo, PoolSizes, Region,
    RegionTable, Result, Slot, WeightStore,
};
use minfer_kernels::pool::shared::shared_pool;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{ActScratch, GgmlType, Kernels, SimdLevel};
use minfer_trace as trace;

use crate::attention::AttnScratch;
use crate::exec::{exec_node, ExecCtx};
use crate::moe::MoeScratch;
use crate::pool::TypedPool;

/// The CPU's part of a graph cache.
pub struct CpuBackend {
    kernels: Kernels,
    /// The process's pool for this thread count, shared with every other
    /// model of the process.
    threads: std::sync::Arc<ThreadPool>,
    pool: TypedPool,
    kv: RegionTable<KvRegion>,
    act: ActScratch,
    /// Sized for the largest `(n_ctx, head_dim, query heads per KV head,
    /// query tokens per tile)` any graph has needed (`attn_size`).
    attn: AttnScratch,
    moe: MoeScratch,
    attn_size: (usize, usize, usize, usize),
    rope_scratch: Vec<f32>,
    /// The filled prefix of the window-cells input of the running step.
    window_len: usize,
    trace_key: Option<u32>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("level", &self.kernels.level())
            .field("threads", &self.threads.n_threads())
            .finish()
    }
}

fn pool_len(slot: Slot) -> Option<(bool, usize, usize)> {
    match slot {
        Slot::F32 { buf, len } => Some((true, buf, len)),
        Slot::I32 { buf, len } => Some((false, buf, len)),
        _ => None,
    }
}

impl CpuBackend {
    /// A backend whose kernels run at `kernels`' level on a pool of
    /// `n_threads` threads (the caller included).
    pub fn new(kernels: Kernels, n_threads: usize) -> Self {
        CpuBackend {
            kernels,
            threads: shared_pool(n_threads),
            pool: TypedPool::default(),
            kv: RegionTable::new(""),
            act: ActScratch::default(),
            attn: AttnScratch::new(n_threads, 0, 0).with_row_kernels(kernels.rows()),
            moe: MoeScratch::default(),
            attn_size: (0, 0, 0, 0),
            rope_scratch: Vec::new(),
            window_len: 0,
            trace_key: None,
        }
    }

    /// A backend whose kernels run at `level` (an error when this CPU
    /// lacks it) on a pool of `n_threads` threads. Front ends choose the
    /// SIMD level through this, without depending on the kernels crate.
    pub fn with_simd(level: SimdLevel, n_threads: usize) -> Result<Self> {
        Ok(Self::new(Kernels::new(level)?, n_threads))
    }

    /// Measures (or takes from this process's earlier measurements or
    /// from `file`) how a lone token's products best read each type of
    /// `weights`' interleaved matrices on this machine, and keeps it for this backend's
    /// kernels (see [`crate::tuning`]). The results do not change; their
    /// speed may.
    pub fn tune(
        &mut self,
        weights: &WeightStore,
        file: Option<&std::path::Path>,
    ) -> crate::tuning::Tuned {
        let (kernels, tuned) = crate::tuning::tune(self.kernels, &self.threads, weights, file);
        self.kernels = kernels;
        tuned
    }

    /// How a lone token's products read each type of interleaved weights.
    pub fn tuning(&self) -> minfer_kernels::packed::TileTuning {
        self.kernels.tuning()
    }

    /// Grows the scratch to what the CPU's nodes of `view` need.
    fn size_scratch(&mut self, view: &GraphView) {
        let g = view.graph;
        let (mut rope, mut head_dim, mut group, mut packed_values) = (0, 0, 0, 0);
        // The most queries one attention node of the graph has.
        let mut queries = 0;
        for range in view.splits {
            for node in &g.nodes[range.clone()] {
                match &node.op {
                    Op::RopeKvStore { .. } => {
                        rope = rope.max(g.nodes[node.srcs[0]].n_elements());
                    }
                    Op::Attention(p) => {
                        head_dim = head_dim.max(p.head_dim);
                        group = group.max(p.n_head / p.n_head_kv.max(1));
                        queries = queries.max(g.nodes[node.srcs[0]].shape[1]);
                    }
                    Op::MoeFfn(p) => {
                        let [n_embd, n_rows] = node.shape;
                        self.moe.reserve(p, n_embd, n_rows);
                        packed_values =
                            packed_values.max(crate::moe::wave_values(p, n_embd, n_rows));
                        for &w in &node.srcs[2..] {
                            let Op::Weight(id) = g.nodes[w].op else {
                                continue;
                            };
                            let ty = view.weights.info(id).ty;
                            let cols = g.nodes[w].shape[0];
                            if minfer_kernels::act_type(ty).is_some_and(|a| a != GgmlType::F32) {
                                packed_values = packed_values.max(cols * n_rows);
                                self.act.reserve_rows(ty, cols, n_rows);
                            }
                        }
                    }
                    Op::MatMul => {
                        let Op::Weight(id) = g.nodes[node.srcs[0]].op else {
                            continue;
                        };
                        let ty = view.weights.info(id).ty;
                        let cols = g.nodes[node.srcs[0]].shape[0];
                        let rows_x = g.nodes[node.srcs[1]].shape[1];
                        if minfer_kernels::act_type(ty).is_some_and(|a| a != GgmlType::F32) {
                            packed_values = packed_values.max(cols * rows_x);
                            self.act.reserve_rows(ty, cols, rows_x);
                        }
                    }
                    _ => {}
                }
            }
        }
        if self.rope_scratch.len() < rope {
            self.rope_scratch.resize(rope, 0.0);
        }
        self.act.reserve_packed(packed_values);
        if head_dim > 0 {
            let n_ctx = view.params.compute.n_ctx as usize;
            let (have_ctx, have_hd, have_group, have_tile) = self.attn_size;
            let (n_ctx, group) = (have_ctx.max(n_ctx), have_group.max(group));
            // The tile is chosen for the grown context and group, so that
            // its memory stays bounded however the graphs come.
            let tile = AttnScratch::tile_for(n_ctx, group, queries.max(have_tile));
            if (n_ctx, group) != (have_ctx, have_group) || have_hd < head_dim || have_tile != tile {
                let size = (n_ctx, have_hd.max(head_dim), group, tile);
                self.attn = AttnScratch::new(self.threads.n_threads(), size.0, size.1)
                    .with_group(size.2)
                    .with_tile(size.3)
                    .with_row_kernels(self.kernels.rows());
                self.attn_size = size;
            }
        }
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn describe(&self) -> String {
        format!(
            "cpu ({:?}, {} threads)",
            self.kernels.level(),
            self.threads.n_threads()
        )
    }

    fn ensure_buffers(&mut self, sizes: &PoolSizes) -> Result<()> {
        fn grow<T: Clone + Default>(bufs: &mut Vec<Vec<T>>, sizes: &[usize]) -> Result<()> {
            for (i, &n) in sizes.iter().enumerate() {
                if i == bufs.len() {
                    bufs.push(Vec::new());
                }
                let b = &mut bufs[i];
                if b.len() < n {
                    b.try_reserve_exact(n - b.len()).map_err(|e| {
                        GraphError::OutOfMemory(format!("a node buffer of {n} values: {e}"))
                    })?;
                    b.resize(n, T::default());
                }
            }
            Ok(())
        }
        grow(&mut self.pool.f32, &sizes.f32)?;
        grow(&mut self.pool.i32, &sizes.i32)
    }

    fn ensure_kv(&mut self, layer: usize, kind: KvKind, want: KvInfo) -> Result<bool> {
        self.kv.ensure(layer, kind, want, || {
            KvRegion::new(want.format, want.row_elems, want.n_ctx)
        })
    }

    fn kv_info(&self, layer: usize, kind: KvKind) -> Option<KvInfo> {
        self.kv.get(layer, kind).map(Region::shape)
    }

    fn kv_read_raw(
        &self,
        layer: usize,
        kind: KvKind,
        cell: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.kv.require(layer, kind)?.read_raw_row(cell, out)
    }

    fn kv_write_raw(&mut self, layer: usize, kind: KvKind, cell: usize, src: &[u8]) -> Result<()> {
        self.kv.require_mut(layer, kind)?.write_raw_row(cell, src)
    }

    fn kv_store_row(&mut self, layer: usize, kind: KvKind, cell: usize, row: &[f32]) -> Result<()> {
        self.kv.require_mut(layer, kind)?.store_row(cell, row)
    }

    fn prepare(&mut self, view: &GraphView) -> Result<()> {
        self.size_scratch(view);
        // The GELU table is built once per process, here rather than
        // inside the first step that needs it.
        if view.graph.nodes.iter().any(|n| matches!(n.op, Op::GeGlu)) {
            minfer_kernels::gelu::warm_up();
        }
        Ok(())
    }

    fn forget(&mut self, _uid: GraphUid) {}

    fn write_f32(&mut self, slot: Slot, data: &[f32]) -> Result<()> {
        let dst = self.f32_values_mut(slot)?;
        let n = data.len().min(dst.len());
        dst[..n].copy_from_slice(&data[..n]);
        Ok(())
    }

    fn write_i32(&mut self, slot: Slot, data: &[i32]) -> Result<()> {
        match pool_len(slot) {
            Some((false, buf, len)) => {
                let n = data.len().min(len);
                self.pool.i32[buf][..n].copy_from_slice(&data[..n]);
                Ok(())
            }
            _ => Err(GraphError::Exec {
                node: format!("{slot:?}"),
                msg: "not an i32 buffer".into(),
            }),
        }
    }

    fn read_f32(&mut self, slot: Slot, out: &mut [f32]) -> Result<()> {
        let src = self.f32_values(slot)?;
        let n = out.len().min(src.len());
        out[..n].copy_from_slice(&src[..n]);
        Ok(())
    }

    fn run(&mut self, view: &GraphView, nodes: Range<usize>, timed: bool) -> Result<Duration> {
        let g = view.graph;
        let slots = view.plan.on(Device::Cpu);
        let inplace = &view.plan.inplace;
        let mut cx = ExecCtx {
            pool: &mut self.pool,
            kv: &mut self.kv,
            weights: view.weights,
            kernels: &self.kernels,
            rows: self.kernels.rows(),
            threads: &self.threads,
            act: &mut self.act,
            attn: &mut self.attn,
            moe: &mut self.moe,
            rope_scratch: &mut self.rope_scratch,
            n_ctx: view.params.compute.n_ctx as usize,
            window_len: self.window_len,
        };
        let mut kernels = Duration::ZERO;
        // Checked once per split, so tracing off costs one branch per node.
        let key = self.trace_key.filter(|_| trace::enabled());
        for i in nodes {
            if !runs(&g.nodes[i].op) {
                continue;
            }
            if let Some(key) = key {
                trace::set_current_op(key, i as u32);
                let t = trace::now_ns();
                exec_node(&mut cx, g, slots, inplace, i)?;
                trace::op(key, i as u32, t);
            } else if timed {
                let t = Instant::now();
                exec_node(&mut cx, g, slots, inplace, i)?;
                kernels += t.elapsed();
            } else {
                exec_node(&mut cx, g, slots, inplace, i)?;
            }
        }
        Ok(kernels)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }
}

impl HostBackend for CpuBackend {
    /// The kernels' instruction-set level.
    fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// The thread pool the kernels run on.
    fn threads(&self) -> &ThreadPool {
        &self.threads
    }

    /// Repacks `weights` for these kernels (see [`WeightStore::pack`]) on
    /// this backend's pool; returns the bytes packed.
    fn pack_weights(&self, weights: &WeightStore) -> usize {
        weights.pack(&self.kernels, &self.threads)
    }

    /// The f32 values of `slot`.
    fn f32_values(&self, slot: Slot) -> Result<&[f32]> {
        match slot {
            Slot::F32 { buf, len } => Ok(&self.pool.f32[buf][..len]),
            other => Err(GraphError::Exec {
                node: format!("{other:?}"),
                msg: "not an f32 buffer".into(),
            }),
        }
    }

    /// The f32 values of `slot`, for writing.
    fn f32_values_mut(&mut self, slot: Slot) -> Result<&mut [f32]> {
        match slot {
            Slot::F32 { buf, len } => Ok(&mut self.pool.f32[buf][..len]),
            other => Err(GraphError::Exec {
                node: format!("{other:?}"),
                msg: "not an f32 buffer".into(),
            }),
        }
    }

    /// The i32 values of `slot`.
    fn i32_values(&self, slot: Slot) -> Result<&[i32]> {
        match slot {
            Slot::I32 { buf, len } => Ok(&self.pool.i32[buf][..len]),
            other => Err(GraphError::Exec {
                node: format!("{other:?}"),
                msg: "not an i32 buffer".into(),
            }),
        }
    }

    /// Sets the filled length of the window inputs for the next run.
    fn set_step(&mut self, window_len: usize, trace_key: Option<u32>) {
        self.window_len = window_len;
        self.trace_key = trace_key;
    }

    fn region(&self, layer: usize, kind: KvKind) -> Option<&KvRegion> {
        self.kv.get(layer, kind)
    }

    fn region_mut(&mut self, layer: usize, kind: KvKind) -> Option<&mut KvRegion> {
        self.kv.get_mut(layer, kind)
    }
}
