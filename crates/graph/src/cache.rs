//! `GraphCache`: built graphs kept by their [`GraphParams`], with the
//! allocator (and so the KV cache) that outlives every one of them.
//!
//! Reuse is decided by comparing params, never by walking a graph: the
//! builder must produce the same node list for equal params, and a step
//! with equal params runs the cached graph as is. Each built graph gets a
//! new uid from a counter that only grows, so a uid names exactly one
//! topology for the life of the cache.
//!
//! The cache holds the backends: the CPU's, always, and a GPU's when one
//! was given. Each owns its node buffers and the KV regions of the layers
//! it runs, and those outlive every graph, so rebuilding (prefill →
//! decode, a new turn) drops node plans but never the KV regions. Two
//! caches share nothing: each owns its allocator, its backends, their
//! regions and the CPU's thread pool.

use std::time::{Duration, Instant};

use minfer_kernels::pool::ThreadPool;
use minfer_kernels::trace;
use minfer_kernels::{Kernels, SimdLevel};

use crate::alloc::{AllocStats, Allocator, MemPlan, Slot, Transfer};
use crate::backend::{Backend, Device, GraphView, KvInfo};
use crate::backends::cpu::CpuBackend;
use crate::builder::{BuiltGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use crate::fusion::{fuse, FusionReport};
use crate::ir::{InputKind, KvKind, NodeId};
use crate::kv::KvRegion;
use crate::params::{GraphParams, KvFormat};
use crate::splits::{Schedule, Split, TraceConfig};
use crate::weights::WeightStore;

/// How many built graphs a cache keeps by default.
pub const DEFAULT_CAPACITY: usize = 8;

/// Identity of one built graph within its cache; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphUid(pub u64);

/// Options of a [`GraphCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Built graphs kept at most; the least recently prepared is dropped.
    pub capacity: usize,
    /// Scheduler trace output.
    pub trace: TraceConfig,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            capacity: DEFAULT_CAPACITY,
            trace: TraceConfig::default(),
        }
    }
}

/// The data of one step, copied into the graph's input buffers. A slice
/// for an input the graph does not have is ignored (it may be empty).
#[derive(Clone, Copy, Debug, Default)]
pub struct StepInputs<'a> {
    /// `n_tokens` token ids.
    pub token_ids: &'a [i32],
    /// `n_tokens` positions, each below `n_ctx`.
    pub positions: &'a [i32],
    /// `n_tokens` KV cells the tokens write.
    pub kv_cells: &'a [i32],
    /// `n_tokens + 1` offsets into `window_cells`.
    pub window_offsets: &'a [i32],
    /// Every token's attention window, concatenated.
    pub window_cells: &'a [i32],
    /// The position of each cell of `window_cells` (read by sliding-window
    /// attention only).
    pub window_positions: &'a [i32],
    /// `n_out` rows (below `n_tokens`) whose outputs are wanted.
    pub out_ids: &'a [i32],
}

/// Where the engine's own time went in the last step, measured only when
/// [`GraphCache::set_timing`] is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTimings {
    /// The last `prepare`: params compare and MRU update on a reuse, or
    /// the whole build on a miss.
    pub prepare: Duration,
    /// Validating and copying the step inputs.
    pub fill: Duration,
    /// The scheduler walk, kernels included.
    pub run: Duration,
    /// Time inside node kernels during the walk.
    pub kernels: Duration,
}

impl StepTimings {
    /// The walk's own cost: `run` minus the kernels.
    pub fn sched_overhead(&self) -> Duration {
        self.run.saturating_sub(self.kernels)
    }
}

/// One built graph and everything derived from it once.
struct Entry {
    params: GraphParams,
    uid: GraphUid,
    graph: BuiltGraph,
    plan: MemPlan,
    sched: Schedule,
    report: FusionReport,
}

/// Built graphs by params, the allocator that sizes their node buffers,
/// and the backends that hold those buffers and the KV regions.
pub struct GraphCache {
    cpu: CpuBackend,
    gpu: Option<Box<dyn Backend>>,
    config: CacheConfig,
    /// Most recently prepared first.
    entries: Vec<Entry>,
    alloc: Allocator,
    next_uid: u64,
    builds: u64,
    reuses: u64,
    verify: bool,
    timing: bool,
    timings: StepTimings,
}

impl std::fmt::Debug for GraphCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphCache")
            .field("graphs", &self.entries.len())
            .field("builds", &self.builds)
            .field("reuses", &self.reuses)
            .field("alloc", &self.alloc.stats())
            .finish()
    }
}

fn check_len(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(GraphError::BadInput {
            what,
            msg: format!("{got} values, the graph takes {want}"),
        });
    }
    Ok(())
}

fn check_cells(cells: &[i32], n_ctx: usize) -> Result<()> {
    match cells
        .iter()
        .find(|&&c| usize::try_from(c).map_or(true, |c| c >= n_ctx))
    {
        Some(&c) => Err(GraphError::CellOutOfRange {
            cell: c.into(),
            n_ctx,
        }),
        None => Ok(()),
    }
}

impl GraphCache {
    /// A cache with its own pool of `n_threads` threads (the caller
    /// included) and the default options.
    pub fn new(kernels: Kernels, n_threads: usize) -> Self {
        Self::with_config(kernels, n_threads, CacheConfig::default())
    }

    /// A cache whose kernels run at `level` (an error when this CPU lacks
    /// it), with its own pool of `n_threads` threads and default options.
    /// Front ends choose the SIMD level through this, without depending on
    /// the kernels crate.
    pub fn with_simd(level: SimdLevel, n_threads: usize) -> Result<Self> {
        Ok(Self::new(Kernels::new(level)?, n_threads))
    }

    /// A cache with explicit options.
    pub fn with_config(kernels: Kernels, n_threads: usize, config: CacheConfig) -> Self {
        GraphCache {
            cpu: CpuBackend::new(kernels, n_threads),
            gpu: None,
            config: CacheConfig {
                capacity: config.capacity.max(1),
                ..config
            },
            entries: Vec::new(),
            alloc: Allocator::new(),
            next_uid: 1,
            builds: 0,
            reuses: 0,
            verify: false,
            timing: false,
            timings: StepTimings::default(),
        }
    }

    /// Graphs built so far (cache misses).
    pub fn builds(&self) -> u64 {
        self.builds
    }

    /// Prepares answered by a cached graph.
    pub fn reuses(&self) -> u64 {
        self.reuses
    }

    /// Counters of node buffers and KV regions.
    pub fn alloc_stats(&self) -> AllocStats {
        self.alloc.stats()
    }

    /// Gives the cache a GPU backend: graphs whose plan offloads layers
    /// run those on it. Graphs built before are dropped, since their
    /// plans never named it.
    pub fn set_gpu(&mut self, gpu: Box<dyn Backend>) {
        for e in self.entries.drain(..) {
            self.cpu.forget(e.uid);
        }
        self.gpu = Some(gpu);
    }

    /// A description of the GPU backend, when the cache has one.
    pub fn gpu_name(&self) -> Option<String> {
        self.gpu.as_ref().map(|g| g.describe())
    }

    fn backend(&self, d: Device) -> Result<&dyn Backend> {
        match d {
            Device::Cpu => Ok(&self.cpu),
            Device::Gpu => self.gpu.as_deref().ok_or_else(no_gpu),
        }
    }

    fn backend_mut(&mut self, d: Device) -> Result<&mut dyn Backend> {
        match d {
            Device::Cpu => Ok(&mut self.cpu),
            Device::Gpu => match self.gpu.as_mut() {
                Some(g) => Ok(g.as_mut()),
                None => Err(no_gpu()),
            },
        }
    }

    /// Layer `layer`'s K or V region, once a graph has created it, when
    /// the CPU holds it (see [`GraphCache::kv_info`] for any device).
    pub fn kv_region(&self, layer: usize, kind: KvKind) -> Option<&KvRegion> {
        self.cpu.region(layer, kind)
    }

    /// Layer `layer`'s K or V region for writing, when the CPU holds it.
    pub fn kv_region_mut(&mut self, layer: usize, kind: KvKind) -> Option<&mut KvRegion> {
        self.cpu.region_mut(layer, kind)
    }

    /// The device holding layer `layer`'s `kind` region and its shape,
    /// once a graph (or [`GraphCache::ensure_kv_region_on`]) created it.
    pub fn kv_info(&self, layer: usize, kind: KvKind) -> Option<(Device, KvInfo)> {
        if let Some(i) = self.cpu.kv_info(layer, kind) {
            return Some((Device::Cpu, i));
        }
        let g = self.gpu.as_ref()?;
        g.kv_info(layer, kind).map(|i| (Device::Gpu, i))
    }

    fn kv_home(&self, layer: usize, kind: KvKind) -> Result<Device> {
        self.kv_info(layer, kind)
            .map(|(d, _)| d)
            .ok_or(GraphError::NoKvRegion {
                layer,
                kind,
                where_: "",
            })
    }

    /// Appends cell `cell`'s row of a region, in the raw format of
    /// [`KvRegion::read_raw_row`], wherever the region lives.
    ///
    /// # Errors
    /// No such region, a cell past it, device errors.
    pub fn kv_read_raw_row(
        &self,
        layer: usize,
        kind: KvKind,
        cell: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let d = self.kv_home(layer, kind)?;
        self.backend(d)?.kv_read_raw(layer, kind, cell, out)
    }

    /// Appends the rows of `cells` of a region, in order, in the raw
    /// format (one device read where the region is on a GPU).
    ///
    /// # Errors
    /// No such region, a cell past it, device errors.
    pub fn kv_read_raw_rows(
        &self,
        layer: usize,
        kind: KvKind,
        cells: &[usize],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let d = self.kv_home(layer, kind)?;
        self.backend(d)?.kv_read_raw_rows(layer, kind, cells, out)
    }

    /// Writes cell `cell`'s row of a region from the raw format.
    ///
    /// # Errors
    /// No such region, a cell past it, a row of the wrong length.
    pub fn kv_write_raw_row(
        &mut self,
        layer: usize,
        kind: KvKind,
        cell: usize,
        src: &[u8],
    ) -> Result<()> {
        let d = self.kv_home(layer, kind)?;
        self.backend_mut(d)?.kv_write_raw(layer, kind, cell, src)
    }

    /// Stores f32 values into cell `cell` of a region, rounded as a KV
    /// store rounds (tests fill cells a sequence must never read).
    ///
    /// # Errors
    /// No such region, a cell past it, a row of the wrong length.
    pub fn kv_store_row(
        &mut self,
        layer: usize,
        kind: KvKind,
        cell: usize,
        row: &[f32],
    ) -> Result<()> {
        let d = self.kv_home(layer, kind)?;
        self.backend_mut(d)?.kv_store_row(layer, kind, cell, row)
    }

    /// Creates layer `layer`'s `kind` region on the CPU (`n_ctx` cells of
    /// `row` values in `format`) if no graph has yet, so that cells can be
    /// restored before the first step; an existing region must match.
    ///
    /// # Errors
    /// A region of another shape; an allocation failure.
    pub fn ensure_kv_region(
        &mut self,
        layer: usize,
        kind: KvKind,
        row: usize,
        n_ctx: usize,
        format: KvFormat,
    ) -> Result<()> {
        self.ensure_kv_region_on(Device::Cpu, layer, kind, row, n_ctx, format)
    }

    /// As [`GraphCache::ensure_kv_region`], on device `d` (the one the
    /// offload plan runs the layer on).
    ///
    /// # Errors
    /// As [`GraphCache::ensure_kv_region`]; no GPU backend for [`Device::Gpu`].
    pub fn ensure_kv_region_on(
        &mut self,
        d: Device,
        layer: usize,
        kind: KvKind,
        row: usize,
        n_ctx: usize,
        format: KvFormat,
    ) -> Result<()> {
        if self
            .backend_mut(d)?
            .ensure_kv(layer, kind, row, n_ctx, format)?
        {
            self.alloc
                .note_region(crate::kv::region_bytes(format, row, n_ctx));
        }
        Ok(())
    }

    /// Repacks `weights` for the CPU's kernels (see [`WeightStore::pack`])
    /// on its pool; returns the bytes packed.
    pub fn pack_weights(&self, weights: &WeightStore) -> usize {
        self.cpu.pack_weights(weights)
    }

    /// The thread pool the CPU's kernels run on.
    pub fn threads(&self) -> &ThreadPool {
        self.cpu.threads()
    }

    /// The CPU's kernels.
    pub fn kernels(&self) -> &Kernels {
        self.cpu.kernels()
    }

    /// On a reuse, also rebuild the graph with the given builder and
    /// compare it node by node with the cached one, failing with
    /// "non-deterministic builder" on a difference. This is the check that
    /// the params really determine the topology; it costs a full build per
    /// step, so it is off unless a test or a debug session turns it on.
    /// It is a runtime switch rather than a `debug_assertions` item so that
    /// tests built with optimizations still exercise it.
    pub fn set_verify(&mut self, on: bool) {
        self.verify = on;
    }

    /// Keeps at least `n` built graphs (a workload that cycles through more
    /// row counts than the default keeps, such as speculative checks of
    /// varying length, would otherwise rebuild them). Never shrinks.
    pub fn keep_at_least(&mut self, n: usize) {
        self.config.capacity = self.config.capacity.max(n);
    }

    /// Measure where each step's time goes (see [`last_step_timings`]).
    ///
    /// [`last_step_timings`]: GraphCache::last_step_timings
    pub fn set_timing(&mut self, on: bool) {
        self.timing = on;
    }

    /// Timings of the last prepare and execute, when timing is on.
    pub fn last_step_timings(&self) -> StepTimings {
        self.timings
    }

    fn entry(&self, uid: GraphUid) -> Result<&Entry> {
        self.entries
            .iter()
            .find(|e| e.uid == uid)
            .ok_or(GraphError::UnknownGraph(uid.0))
    }

    /// The cached (fused) graph of `uid`, for dumps.
    pub fn graph(&self, uid: GraphUid) -> Option<&BuiltGraph> {
        self.entry(uid).ok().map(|e| &e.graph)
    }

    /// The params `uid` was built for.
    pub fn params_of(&self, uid: GraphUid) -> Option<GraphParams> {
        self.entry(uid).ok().map(|e| e.params)
    }

    /// What the fusion pass did to `uid`.
    pub fn fusion_report(&self, uid: GraphUid) -> Option<FusionReport> {
        self.entry(uid).ok().map(|e| e.report)
    }

    /// The splits `uid` runs as.
    pub fn splits(&self, uid: GraphUid) -> Option<&[Split]> {
        self.entry(uid).ok().map(|e| e.sched.splits.as_slice())
    }

    /// Whether node `node` of `uid` writes over its first source's buffer.
    pub fn is_inplace(&self, uid: GraphUid, node: NodeId) -> Option<bool> {
        self.entry(uid).ok()?.plan.inplace.get(node).copied()
    }

    /// Where node `node` of `uid` keeps its value.
    pub fn slot(&self, uid: GraphUid, node: NodeId) -> Option<Slot> {
        let plan = &self.entry(uid).ok()?.plan;
        (node < plan.devices.len()).then(|| plan.home(node))
    }

    /// The graph for `params`: the cached one when params are equal (a
    /// struct compare, nothing else), otherwise a new one from `build`
    /// (then fused and planned). `build` adds the nodes to the builder
    /// and returns the output node.
    pub fn prepare(
        &mut self,
        params: &GraphParams,
        weights: &WeightStore,
        build: impl FnOnce(&mut GraphBuilder) -> Result<NodeId>,
    ) -> Result<GraphUid> {
        let t0 = self.timing.then(Instant::now);
        if let Some(pos) = self.entries.iter().position(|e| e.params == *params) {
            self.entries[..=pos].rotate_right(1);
            self.reuses += 1;
            if self.verify {
                let fresh = self.build_fused(params, weights, build)?.0;
                if let Some(diff) = self.entries[0].graph.structural_diff(&fresh) {
                    return Err(GraphError::NonDeterministic(diff.to_string()));
                }
            }
            if let Some(t0) = t0 {
                self.timings.prepare = t0.elapsed();
            }
            trace::counter("graph_reuses", self.reuses as f64);
            return Ok(self.entries[0].uid);
        }
        let t_build = trace::start();
        let why = self
            .entries
            .first()
            .map(|e| param_changes(&e.params, params));
        let (graph, report) = self.build_fused(params, weights, build)?;
        if params.compute.backend.uses_gpu() && self.gpu.is_none() {
            return Err(no_gpu());
        }
        let mut sched = Schedule::new(&graph, params.compute.backend);
        let splits: Vec<(Device, std::ops::Range<usize>)> = sched
            .splits
            .iter()
            .map(|s| (s.device, s.nodes.clone()))
            .collect();
        let plan = self.alloc.plan(&graph, weights, &sched.devices, &splits)?;
        let uid = GraphUid(self.next_uid);
        self.materialize(uid, &graph, params, &plan, &sched, weights)?;
        if trace::enabled() {
            sched.trace_key =
                trace::register_graph(crate::dump::trace_meta(&graph, params, weights));
        }
        tracing::debug!(
            nodes = graph.nodes.len(),
            kind = crate::dump::kind_name(params.kind),
            n_tokens = params.n_tokens,
            "graph build {}: {}",
            self.builds + 1,
            why.as_deref().unwrap_or("first graph")
        );
        self.next_uid += 1;
        self.builds += 1;
        self.entries.insert(
            0,
            Entry {
                params: *params,
                uid,
                graph,
                plan,
                sched,
                report,
            },
        );
        // Evicting a graph frees no node buffer: its buffers stay in the
        // pools for the graphs that remain, and the KV regions are not its
        // to free. What a backend recorded for it goes.
        while self.entries.len() > self.config.capacity {
            if let Some(e) = self.entries.pop() {
                self.cpu.forget(e.uid);
                if let Some(g) = self.gpu.as_mut() {
                    g.forget(e.uid);
                }
            }
        }
        if let Some(t0) = t0 {
            self.timings.prepare = t0.elapsed();
        }
        trace::end(t_build, "graph", "graph_build", self.builds);
        Ok(uid)
    }

    /// Nodes per op name of graph `uid` (the census the scheduler made
    /// when the graph was built).
    pub fn census(&self, uid: GraphUid) -> Option<&[(&'static str, usize)]> {
        self.entry(uid).ok().map(|e| e.sched.census.as_slice())
    }

    /// Graph `uid` as a JSON dump (see [`crate::dump::dump_json`]); `build`
    /// must be the builder the graph was prepared with, run again with
    /// every rewrite off to find the nodes fusion removed.
    ///
    /// # Errors
    /// An unknown uid; errors of `build`.
    pub fn dump(
        &self,
        uid: GraphUid,
        weights: &WeightStore,
        build: impl FnOnce(&mut GraphBuilder) -> Result<NodeId>,
    ) -> Result<serde_json::Value> {
        let e = self.entry(uid)?;
        let mut plain = e.params;
        plain.compute.fusion = crate::params::Fusion::NONE;
        let (unfused, _) = self.build_fused(&plain, weights, build)?;
        let home: Vec<Slot> = (0..e.graph.nodes.len()).map(|i| e.plan.home(i)).collect();
        let parts = crate::dump::DumpParts {
            params: &e.params,
            graph: &e.graph,
            unfused: &unfused,
            slots: &home,
            devices: &e.plan.devices,
            inplace: &e.plan.inplace,
            census: &e.sched.census,
        };
        Ok(crate::dump::dump_json(&parts, weights))
    }

    fn build_fused(
        &self,
        params: &GraphParams,
        weights: &WeightStore,
        build: impl FnOnce(&mut GraphBuilder) -> Result<NodeId>,
    ) -> Result<(BuiltGraph, FusionReport)> {
        let mut b = GraphBuilder::new(weights, *params);
        let out = build(&mut b)?;
        let g = b.finish(out);
        Ok(fuse(g, params.compute.fusion, params.compute.backend))
    }

    /// Makes a new graph's memory exist on its backends: node buffers, KV
    /// regions, and whatever each backend prepares (scratch, resident
    /// weights, recorded dispatches).
    fn materialize(
        &mut self,
        uid: GraphUid,
        graph: &BuiltGraph,
        params: &GraphParams,
        plan: &MemPlan,
        sched: &Schedule,
        weights: &WeightStore,
    ) -> Result<()> {
        let (n_ctx, format) = (params.compute.n_ctx as usize, params.compute.kv_format);
        for need in &plan.kv {
            if self
                .backend_mut(need.device)?
                .ensure_kv(need.layer, need.kind, need.row, n_ctx, format)?
            {
                self.alloc
                    .note_region(crate::kv::region_bytes(format, need.row, n_ctx));
            }
        }
        for d in Device::ALL {
            if d == Device::Gpu && self.gpu.is_none() {
                continue;
            }
            let sizes = self.alloc.pool(d).clone();
            let view = GraphView {
                uid,
                graph,
                params,
                plan,
                splits: &sched.ranges[d.index()],
                weights,
            };
            let b = self.backend_mut(d)?;
            b.ensure_buffers(&sizes)?;
            b.prepare(&view)?;
        }
        Ok(())
    }

    /// Checks the step inputs against the graph, before anything runs.
    fn validate(e: &Entry, inputs: &StepInputs) -> Result<()> {
        let p = &e.params;
        let (n, n_ctx) = (p.n_tokens as usize, p.compute.n_ctx as usize);
        // A position at or past the context is refused whether or not the
        // graph reads positions: it would name a cell that does not exist.
        if let Some(&pos) = inputs
            .positions
            .iter()
            .find(|&&q| usize::try_from(q).map_or(true, |q| q >= n_ctx))
        {
            return Err(GraphError::PositionOutOfRange {
                pos: pos.into(),
                n_ctx,
            });
        }
        for &(kind, id) in &e.graph.inputs {
            let cap = e.graph.nodes[id].n_elements();
            match kind {
                InputKind::TokenIds => check_len("token_ids", inputs.token_ids.len(), n)?,
                InputKind::Positions => check_len("positions", inputs.positions.len(), n)?,
                InputKind::KvCells => {
                    check_len("kv_cells", inputs.kv_cells.len(), n)?;
                    check_cells(inputs.kv_cells, n_ctx)?;
                }
                InputKind::WindowOffsets => {
                    let o = inputs.window_offsets;
                    check_len("window_offsets", o.len(), n + 1)?;
                    let sorted = o.windows(2).all(|w| w[0] <= w[1]);
                    let in_range = o.first().is_some_and(|&f| f >= 0)
                        && o.last()
                            .is_some_and(|&l| l as usize <= inputs.window_cells.len());
                    if !sorted || !in_range {
                        return Err(GraphError::BadInput {
                            what: "window_offsets",
                            msg: format!(
                                "offsets must rise from 0 to at most {} (the window cells)",
                                inputs.window_cells.len()
                            ),
                        });
                    }
                }
                InputKind::WindowCells => {
                    if inputs.window_cells.len() > cap {
                        return Err(GraphError::BadInput {
                            what: "window_cells",
                            msg: format!("{} cells, room for {cap}", inputs.window_cells.len()),
                        });
                    }
                    check_cells(inputs.window_cells, n_ctx)?;
                }
                InputKind::WindowPositions => check_len(
                    "window_positions",
                    inputs.window_positions.len(),
                    inputs.window_cells.len(),
                )?,
                InputKind::OutIds => {
                    check_len("out_ids", inputs.out_ids.len(), p.n_out as usize)?;
                    if let Some(&bad) = inputs
                        .out_ids
                        .iter()
                        .find(|&&r| usize::try_from(r).map_or(true, |r| r >= n))
                    {
                        return Err(GraphError::BadInput {
                            what: "out_ids",
                            msg: format!("row {bad} is not one of the {n} tokens"),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs graph `uid` on one step's inputs and returns its output (the
    /// logits: `n_out` rows of the output width). Inputs are validated
    /// before anything is written, positions against `n_ctx` included.
    /// Allocates nothing.
    pub fn execute(
        &mut self,
        uid: GraphUid,
        weights: &WeightStore,
        inputs: &StepInputs,
    ) -> Result<&[f32]> {
        let t_fill = self.timing.then(Instant::now);
        let idx = self
            .entries
            .iter()
            .position(|e| e.uid == uid)
            .ok_or(GraphError::UnknownGraph(uid.0))?;
        let e = &self.entries[idx];
        if let Some(max) = e.plan.max_weight {
            if max.0 as usize >= weights.len() {
                return Err(GraphError::InvalidGraph(format!(
                    "graph {} reads weight {} but the store holds {}",
                    uid.0,
                    max.0,
                    weights.len()
                )));
            }
        }
        Self::validate(e, inputs)?;
        let cpu_slots = e.plan.on(Device::Cpu);
        for &(kind, id) in &e.graph.inputs {
            let src = match kind {
                InputKind::TokenIds => inputs.token_ids,
                InputKind::Positions => inputs.positions,
                InputKind::KvCells => inputs.kv_cells,
                InputKind::WindowOffsets => inputs.window_offsets,
                InputKind::WindowCells => inputs.window_cells,
                InputKind::WindowPositions => inputs.window_positions,
                InputKind::OutIds => inputs.out_ids,
            };
            self.cpu.write_i32(cpu_slots[id], src)?;
        }
        let t_run = self.timing.then(Instant::now);
        if self.config.trace.census {
            e.sched.trace(uid.0, e.graph.nodes.len());
        }
        let window_len = inputs.window_cells.len();
        self.cpu.set_step(window_len, e.sched.trace_key);
        let mut kernels = Duration::ZERO;
        let mut next = 0;
        let n_splits = e.sched.splits.len();
        for k in 0..=n_splits {
            while let Some(t) = e.plan.transfers.get(next) {
                if t.before_split != k {
                    break;
                }
                transfer(
                    &mut self.cpu,
                    self.gpu.as_deref_mut(),
                    &e.plan,
                    t,
                    window_len,
                )?;
                next += 1;
            }
            let Some(split) = e.sched.splits.get(k) else {
                break;
            };
            let view = GraphView {
                uid,
                graph: &e.graph,
                params: &e.params,
                plan: &e.plan,
                splits: &e.sched.ranges[split.device.index()],
                weights,
            };
            kernels += match split.device {
                Device::Cpu => self.cpu.run(&view, split.nodes.clone(), self.timing)?,
                Device::Gpu => match self.gpu.as_mut() {
                    Some(g) => g.run(&view, split.nodes.clone(), self.timing)?,
                    None => return Err(no_gpu()),
                },
            };
        }
        if let (Some(tf), Some(tr)) = (t_fill, t_run) {
            self.timings.fill = tr - tf;
            self.timings.run = tr.elapsed();
            self.timings.kernels = kernels;
        }
        let out = cpu_slots[e.graph.output];
        self.cpu.f32_values(out)
    }
}

fn no_gpu() -> GraphError {
    GraphError::Backend {
        backend: "GPU",
        msg: "the offload plan names the GPU, but the cache has no GPU backend".into(),
    }
}

/// Carries one value across a split boundary.
fn transfer(
    cpu: &mut CpuBackend,
    gpu: Option<&mut (dyn Backend + 'static)>,
    plan: &MemPlan,
    t: &Transfer,
    window_len: usize,
) -> Result<()> {
    let gpu = gpu.ok_or_else(no_gpu)?;
    let (cpu_slot, gpu_slot) = (plan.on(Device::Cpu)[t.node], plan.on(Device::Gpu)[t.node]);
    match t.to {
        Device::Gpu => match cpu_slot {
            Slot::I32 { .. } => {
                let v = cpu.i32_values(cpu_slot)?;
                // The window inputs are sized for the widest possible
                // windows; only their filled part is copied.
                let n = match t.input {
                    Some(InputKind::WindowCells | InputKind::WindowPositions) => {
                        window_len.min(v.len())
                    }
                    _ => v.len(),
                };
                gpu.write_i32(gpu_slot, &v[..n])
            }
            _ => gpu.write_f32(gpu_slot, cpu.f32_values(cpu_slot)?),
        },
        Device::Cpu => gpu.read_f32(gpu_slot, cpu.f32_values_mut(cpu_slot)?),
    }
}

/// The fields in which `new` differs from `old`, for the log line that says
/// why a graph was rebuilt.
fn param_changes(old: &GraphParams, new: &GraphParams) -> String {
    let mut out = Vec::new();
    if old.n_tokens != new.n_tokens {
        out.push(format!("n_tokens {} -> {}", old.n_tokens, new.n_tokens));
    }
    if old.n_out != new.n_out {
        out.push(format!("n_out {} -> {}", old.n_out, new.n_out));
    }
    if old.kind != new.kind {
        out.push(format!("kind {:?} -> {:?}", old.kind, new.kind));
    }
    if old.output != new.output {
        out.push(format!("output {:?} -> {:?}", old.output, new.output));
    }
    let (a, b) = (&old.compute, &new.compute);
    if a.n_ctx != b.n_ctx {
        out.push(format!("n_ctx {} -> {}", a.n_ctx, b.n_ctx));
    }
    if a.kv_format != b.kv_format {
        out.push(format!("kv_format {:?} -> {:?}", a.kv_format, b.kv_format));
    }
    if a.backend != b.backend {
        out.push(format!("backend {:?} -> {:?}", a.backend, b.backend));
    }
    if a.fusion != b.fusion {
        out.push(format!("fusion {:?} -> {:?}", a.fusion, b.fusion));
    }
    if old.weights_version != new.weights_version {
        out.push(format!(
            "weights_version {} -> {}",
            old.weights_version, new.weights_version
        ));
    }
    if out.is_empty() {
        // Equal to the most recent graph but evicted from the cache.
        return "params of an evicted graph".into();
    }
    out.join(", ")
}

#[cfg(test)]
mod param_change_tests {
    use super::*;
    use crate::params::{BackendPlan, ComputeParams, Fusion, GraphKind, OutputKind};

    #[test]
    fn a_rebuild_names_the_params_that_changed() {
        let a = GraphParams {
            n_tokens: 7,
            n_out: 1,
            kind: GraphKind::Prefill,
            output: OutputKind::Logits,
            compute: ComputeParams {
                n_ctx: 64,
                kv_format: KvFormat::F16,
                backend: BackendPlan::Cpu,
                fusion: Fusion::ALL,
            },
            weights_version: 0,
        };
        let b = GraphParams {
            n_tokens: 1,
            kind: GraphKind::Decode,
            ..a
        };
        assert_eq!(
            param_changes(&a, &b),
            "n_tokens 7 -> 1, kind Prefill -> Decode"
        );
        assert_eq!(param_changes(&a, &a), "params of an evicted graph");
        let c = GraphParams {
            output: OutputKind::Hidden,
            ..a
        };
        assert_eq!(param_changes(&a, &c), "output Logits -> Hidden");
    }
}
