//! The backend layer: what the graph cache asks of a device that runs
//! nodes. A backend owns its memory (node buffers, the KV regions of the
//! layers it runs, its scratch, the resident form of the weights it reads)
//! and its kernels; the cache plans which node runs where, sizes the
//! buffers, and moves values between backends at split boundaries only.
//!
//! Two devices exist: the CPU, always present, and at most one GPU. A
//! [`Slot`] names a buffer of the pool of the backend that holds it, so
//! the same slot number means different memory on each device.
//!
//! Every backend implements [`Backend`]. The one whose memory is the
//! host's (the CPU backend, `minfer-cpu`) also implements [`HostBackend`]:
//! a step's inputs are written into its buffers, its output is read from
//! them without a copy, and values cross to another device through them.
//! The cache holds the host backend and the optional GPU backend the same
//! way, as trait objects, and knows neither crate.

use std::ops::Range;
use std::time::Duration;

use crate::builder::BuiltGraph;
use crate::error::Result;
use crate::ir::KvKind;
use crate::kv::KvRegion;
use crate::params::GraphParams;
use crate::plan::{MemPlan, Slot};
use crate::regions::KvInfo;
use crate::types::{Device, GraphUid, PoolSizes};
use crate::weights::WeightStore;
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::Kernels;

/// Everything a backend may look at while it prepares or runs a graph.
#[derive(Clone, Copy)]
pub struct GraphView<'a> {
    /// The cache's identity for the graph; a rebuilt graph has a new one.
    pub uid: GraphUid,
    /// The fused graph.
    pub graph: &'a BuiltGraph,
    /// What the graph was built for.
    pub params: &'a GraphParams,
    /// Its buffer layout.
    pub plan: &'a MemPlan,
    /// The ranges of nodes this backend runs, in order.
    pub splits: &'a [Range<usize>],
    /// The weights the graph reads.
    pub weights: &'a WeightStore,
}

/// A device's part of the graph cache. The CPU backend is one
/// implementation; the GPU backend (a separate crate) is another.
pub trait Backend: Send {
    /// Which device this is.
    fn device(&self) -> Device;

    /// A one-line description for logs and `--timings` (the adapter's name).
    fn describe(&self) -> String;

    /// Grows the node pools to `sizes` (buffers already there keep their
    /// index; none shrinks).
    fn ensure_buffers(&mut self, sizes: &PoolSizes) -> Result<()>;

    /// Creates layer `layer`'s `kind` region of shape `want`, or checks
    /// that the existing one has this shape; returns whether it was created.
    fn ensure_kv(&mut self, layer: usize, kind: KvKind, want: KvInfo) -> Result<bool>;

    /// The shape of a region, when this backend holds it.
    fn kv_info(&self, layer: usize, kind: KvKind) -> Option<KvInfo>;

    /// Appends cell `cell`'s row, in the raw format, to `out`.
    fn kv_read_raw(&self, layer: usize, kind: KvKind, cell: usize, out: &mut Vec<u8>)
        -> Result<()>;

    /// Appends the rows of `cells`, in order, in the raw format, to `out`:
    /// what a loop over [`Backend::kv_read_raw`] gives, which a device
    /// backend replaces with one read.
    fn kv_read_raw_rows(
        &self,
        layer: usize,
        kind: KvKind,
        cells: &[usize],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        for &c in cells {
            self.kv_read_raw(layer, kind, c, out)?;
        }
        Ok(())
    }

    /// Writes cell `cell`'s row from the raw format.
    fn kv_write_raw(&mut self, layer: usize, kind: KvKind, cell: usize, src: &[u8]) -> Result<()>;

    /// Stores f32 values into cell `cell` (rounded as a KV store rounds).
    fn kv_store_row(&mut self, layer: usize, kind: KvKind, cell: usize, row: &[f32]) -> Result<()>;

    /// A new graph: size the scratch its nodes need, make the weights it
    /// reads resident, record whatever is replayed each step. Called once
    /// per built graph, after [`Backend::ensure_buffers`] and the KV
    /// regions.
    fn prepare(&mut self, view: &GraphView) -> Result<()>;

    /// Graph `uid` left the cache: drop what was recorded for it.
    fn forget(&mut self, uid: GraphUid);

    /// Writes f32 values at the start of `slot` (a buffer of this pool).
    fn write_f32(&mut self, slot: Slot, data: &[f32]) -> Result<()>;

    /// Writes i32 values at the start of `slot`.
    fn write_i32(&mut self, slot: Slot, data: &[i32]) -> Result<()>;

    /// Reads the first `out.len()` f32 values of `slot`, waiting for the
    /// work that writes them.
    fn read_f32(&mut self, slot: Slot, out: &mut [f32]) -> Result<()>;

    /// Runs the nodes `nodes` (one of the view's splits). Work may still
    /// be in flight when this returns; [`Backend::synchronize`] or a read
    /// waits for it. Returns the time spent in kernels when `timed`.
    fn run(&mut self, view: &GraphView, nodes: Range<usize>, timed: bool) -> Result<Duration>;

    /// Waits until all work given to this backend has finished.
    fn synchronize(&mut self) -> Result<()>;
}

/// The backend whose buffers are host memory: it takes a step's inputs,
/// hands back its output as a slice, and is the side every transfer
/// between devices reads from or writes to. A cache has exactly one.
pub trait HostBackend: Backend {
    /// The values of f32 buffer `slot`.
    fn f32_values(&self, slot: Slot) -> Result<&[f32]>;

    /// The values of f32 buffer `slot`, for writing.
    fn f32_values_mut(&mut self, slot: Slot) -> Result<&mut [f32]>;

    /// The values of i32 buffer `slot`.
    fn i32_values(&self, slot: Slot) -> Result<&[i32]>;

    /// What the coming step's nodes need besides their buffers: the
    /// filled length of the window inputs and the trace key of the graph.
    fn set_step(&mut self, window_len: usize, trace_key: Option<u32>);

    /// Layer `layer`'s K or V region, if this backend holds it.
    fn region(&self, layer: usize, kind: KvKind) -> Option<&KvRegion>;

    /// Layer `layer`'s K or V region for writing, if this backend holds it.
    fn region_mut(&mut self, layer: usize, kind: KvKind) -> Option<&mut KvRegion>;

    /// Repacks `weights` for this backend's kernels on its pool; returns
    /// the bytes packed.
    fn pack_weights(&self, weights: &WeightStore) -> usize;

    /// The thread pool the kernels run on.
    fn threads(&self) -> &ThreadPool;

    /// The kernels, at the SIMD level chosen.
    fn kernels(&self) -> &Kernels;
}
