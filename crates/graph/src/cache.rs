//! `GraphCache`: built graphs kept by their [`GraphParams`], with the
//! allocator (and so the KV cache) that outlives every one of them.
//!
//! Reuse is decided by comparing params, never by walking a graph: the
//! builder must produce the same node list for equal params, and a step
//! with equal params runs the cached graph as is. Each built graph gets a
//! new uid from a counter that only grows, so a uid names exactly one
//! topology for the life of the cache.
//!
//! The cache holds the backends, both as trait objects: the host's (the
//! CPU's), always, and a GPU's when one was given. Each owns its node buffers and the KV regions of the layers
//! it runs, and those outlive every graph, so rebuilding (prefill →
//! decode, a new turn) drops node plans but never the KV regions. Two
//! caches share nothing: each owns its allocator, its backends, their
//! regions and the CPU's thread pool.

use std::time::Instant;

use minfer_kernels::pool::ThreadPool;
use minfer_kernels::Kernels;
use minfer_trace as trace;

use crate::alloc::{AllocStats, Allocator};
use crate::backend::{Backend, GraphView, HostBackend};
use crate::builder::{BuiltGraph, GraphBuilder};
use crate::entry::Entry;
use crate::error::{GraphError, Result};
use crate::fusion::{fuse, FusionReport};
use crate::ir::{KvKind, NodeId};
use crate::kv::KvRegion;
use crate::params::GraphParams;
use crate::plan::{MemPlan, Slot};
use crate::regions::KvInfo;
use crate::splits::{Schedule, Split, TraceConfig};
use crate::step::{no_gpu, Devices, StepInputs, StepTimings};
use crate::types::{Device, GraphUid};
use crate::weights::WeightStore;

/// How many built graphs a cache keeps by default.
pub const DEFAULT_CAPACITY: usize = 8;

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

/// Built graphs by params, the allocator that sizes their node buffers,
/// and the backends that hold those buffers and the KV regions.
pub struct GraphCache {
    cpu: Box<dyn HostBackend>,
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

impl GraphCache {
    /// A cache over host backend `cpu` (the CPU backend of `minfer-cpu`)
    /// with the default options.
    pub fn new(cpu: Box<dyn HostBackend>) -> Self {
        Self::with_config(cpu, CacheConfig::default())
    }

    /// A cache over host backend `cpu` with explicit options.
    pub fn with_config(cpu: Box<dyn HostBackend>, config: CacheConfig) -> Self {
        GraphCache {
            cpu,
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
            Device::Cpu => Ok(self.cpu.as_ref()),
            Device::Gpu => self.gpu.as_deref().ok_or_else(no_gpu),
        }
    }

    fn backend_mut(&mut self, d: Device) -> Result<&mut dyn Backend> {
        match d {
            Device::Cpu => Ok(self.cpu.as_mut()),
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

    /// The backend holding layer `layer`'s `kind` region, to read or
    /// write its cells through ([`Backend::kv_read_raw_rows`],
    /// [`Backend::kv_write_raw`], [`Backend::kv_store_row`]) wherever it
    /// lives.
    ///
    /// # Errors
    /// [`GraphError::NoKvRegion`] when no backend holds the region.
    pub fn kv_backend(&self, layer: usize, kind: KvKind) -> Result<&dyn Backend> {
        let d = self.kv_home(layer, kind)?;
        self.backend(d)
    }

    /// As [`GraphCache::kv_backend`], for writing.
    ///
    /// # Errors
    /// As [`GraphCache::kv_backend`].
    pub fn kv_backend_mut(&mut self, layer: usize, kind: KvKind) -> Result<&mut dyn Backend> {
        let d = self.kv_home(layer, kind)?;
        self.backend_mut(d)
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

    /// Creates layer `layer`'s `kind` region of shape `want` on the CPU if
    /// no graph has yet, so that cells can be restored before the first
    /// step; an existing region must match.
    ///
    /// # Errors
    /// A region of another shape; an allocation failure.
    pub fn ensure_kv_region(&mut self, layer: usize, kind: KvKind, want: KvInfo) -> Result<()> {
        self.ensure_kv_region_on(Device::Cpu, layer, kind, want)
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
        want: KvInfo,
    ) -> Result<()> {
        if self.backend_mut(d)?.ensure_kv(layer, kind, want)? {
            let bytes = crate::kv::region_bytes(want.format, want.row_elems, want.n_ctx);
            self.alloc.note_region(bytes);
        }
        Ok(())
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
            let want = KvInfo::new(format, need.row, n_ctx);
            self.ensure_kv_region_on(need.device, need.layer, need.kind, want)?;
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
        let e = self
            .entries
            .iter()
            .find(|e| e.uid == uid)
            .ok_or(GraphError::UnknownGraph(uid.0))?;
        let devices = Devices {
            host: self.cpu.as_mut(),
            gpu: self.gpu.as_deref_mut(),
        };
        let timings = self.timing.then_some(&mut self.timings);
        crate::step::run(
            e,
            devices,
            weights,
            inputs,
            self.config.trace.census,
            timings,
        )
    }
}

/// The fields in which `new` differs from `old`, for the log line that says
/// why a graph was rebuilt.
fn param_changes(old: &GraphParams, new: &GraphParams) -> String {
    fn change<T: PartialEq + std::fmt::Debug>(out: &mut Vec<String>, name: &str, a: T, b: T) {
        if a != b {
            out.push(format!("{name} {a:?} -> {b:?}"));
        }
    }
    let mut out = Vec::new();
    let (a, b) = (&old.compute, &new.compute);
    change(&mut out, "n_tokens", old.n_tokens, new.n_tokens);
    change(&mut out, "n_out", old.n_out, new.n_out);
    change(&mut out, "kind", old.kind, new.kind);
    change(&mut out, "output", old.output, new.output);
    change(&mut out, "n_ctx", a.n_ctx, b.n_ctx);
    change(&mut out, "kv_format", a.kv_format, b.kv_format);
    change(&mut out, "backend", a.backend, b.backend);
    change(&mut out, "fusion", a.fusion, b.fusion);
    change(
        &mut out,
        "weights_version",
        old.weights_version,
        new.weights_version,
    );
    if out.is_empty() {
        // Equal to the most recent graph but evicted from the cache.
        return "params of an evicted graph".into();
    }
    out.join(", ")
}

#[cfg(test)]
mod param_change_tests {
    use super::*;
    use crate::params::{BackendPlan, ComputeParams, Fusion, GraphKind, KvFormat, OutputKind};

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
