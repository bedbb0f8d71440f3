//! The GPU backend of the graph cache: node buffers and KV regions in
//! device memory, the weights the offloaded nodes read uploaded once, and
//! each built graph's dispatches recorded once (pipelines, bind groups,
//! workgroup counts) and replayed every step while its uid stays the same.
//!
//! A step's work is one command buffer per split, submitted without
//! waiting: the queue orders it after the step's input uploads and before
//! the read-back at the next split boundary, which is the only place the
//! CPU waits for the device.

mod record;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use minfer_graph::{
    Backend, Device, GraphError, GraphUid, GraphView, KvInfo, KvKind, PoolSizes, Region,
    RegionTable, Slot, WeightId, WeightStore,
};

use crate::context::Gpu;
use crate::kernel::{Bound, BufRange};
use crate::ops::attention::{self, DeviceKv};
use crate::ops::matmul::{self, DeviceWeight};

type GResult<T> = minfer_graph::Result<T>;

/// One node buffer and the values it holds.
struct PoolBuf {
    buffer: Arc<wgpu::Buffer>,
    len: usize,
}

/// The dispatches of one graph, per split (by its node range).
struct Recorded {
    splits: Vec<(Range<usize>, Vec<Bound>)>,
}

/// The GPU's part of a graph cache.
pub struct GpuBackend {
    gpu: Arc<Gpu>,
    f32: Vec<PoolBuf>,
    i32: Vec<PoolBuf>,
    kv: RegionTable<DeviceKv>,
    /// Resident weights by handle, for the store `store_key` names.
    weights: HashMap<WeightId, DeviceWeight>,
    store_key: usize,
    /// Quantized activations of the products (one at a time).
    scratch: Arc<wgpu::Buffer>,
    scratch_bytes: u64,
    staging: wgpu::Buffer,
    staging_bytes: u64,
    graphs: HashMap<GraphUid, Recorded>,
    /// Reused host buffer for reads of f32 values.
    read_bytes: Vec<u8>,
}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("adapter", &self.gpu.adapter().name)
            .field("graphs", &self.graphs.len())
            .finish()
    }
}

fn gerr(e: crate::GpuError) -> GraphError {
    e.into()
}

impl GpuBackend {
    /// A backend on an opened device.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let scratch = gpu
            .storage("minfer scratch", 16)
            .expect("a 16-byte buffer fits every device");
        let staging = gpu.staging(16);
        GpuBackend {
            gpu,
            f32: Vec::new(),
            i32: Vec::new(),
            kv: RegionTable::new(" on the GPU"),
            weights: HashMap::new(),
            store_key: 0,
            scratch,
            scratch_bytes: 16,
            staging,
            staging_bytes: 16,
            graphs: HashMap::new(),
            read_bytes: Vec::new(),
        }
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    fn region(&self, layer: usize, kind: KvKind) -> GResult<&DeviceKv> {
        self.kv.require(layer, kind)
    }

    /// The binding of a node value on this device.
    fn range(&self, slot: Slot) -> GResult<BufRange> {
        let (b, len) = match slot {
            Slot::F32 { buf, len } => (&self.f32[buf], len),
            Slot::I32 { buf, len } => (&self.i32[buf], len),
            other => {
                return Err(GraphError::Backend {
                    backend: "GPU",
                    msg: format!("no GPU buffer behind {other:?}"),
                })
            }
        };
        if len > b.len {
            return Err(GraphError::Backend {
                backend: "GPU",
                msg: format!("a value of {len} in a buffer of {}", b.len),
            });
        }
        Ok(BufRange {
            buffer: b.buffer.clone(),
            offset: 0,
            size: Some((len.max(1) * 4) as u64),
        })
    }

    /// Makes weight `id` resident (uploaded once).
    fn resident(&mut self, weights: &WeightStore, id: WeightId) -> GResult<&DeviceWeight> {
        // A different store (another model) invalidates every handle.
        let key = weights as *const WeightStore as usize;
        if key != self.store_key {
            self.weights.clear();
            self.store_key = key;
        }
        if !self.weights.contains_key(&id) {
            let info = weights.info(id);
            let dw = matmul::upload_weight(
                &self.gpu,
                &info.name,
                info.ty,
                info.shape[1],
                info.shape[0],
                weights.data(id),
            )
            .map_err(gerr)?;
            self.weights.insert(id, dw);
        }
        Ok(&self.weights[&id])
    }

    fn grow_scratch(&mut self, bytes: u64) -> GResult<()> {
        if bytes > self.scratch_bytes {
            self.scratch = self.gpu.storage("minfer scratch", bytes).map_err(gerr)?;
            self.scratch_bytes = bytes;
            // Recorded graphs bind the old buffer; they keep it alive and
            // stay correct, since only one product uses the scratch at a
            // time within a command buffer.
        }
        Ok(())
    }

    fn grow_staging(&mut self, bytes: u64) {
        if bytes > self.staging_bytes {
            self.staging = self.gpu.staging(bytes);
            self.staging_bytes = bytes;
        }
    }
}

impl Backend for GpuBackend {
    fn device(&self) -> Device {
        Device::Gpu
    }

    fn describe(&self) -> String {
        let a = self.gpu.adapter();
        format!("{} ({}, {})", a.name, a.kind.name(), a.api)
    }

    fn ensure_buffers(&mut self, sizes: &PoolSizes) -> GResult<()> {
        let mut replaced = false;
        for (pool, want, what) in [
            (&mut self.f32, &sizes.f32, "f32 node buffer"),
            (&mut self.i32, &sizes.i32, "i32 node buffer"),
        ] {
            for (i, &n) in want.iter().enumerate() {
                if i < pool.len() && pool[i].len >= n {
                    continue;
                }
                let buffer = self
                    .gpu
                    .storage(what, (n.max(1) * 4) as u64)
                    .map_err(gerr)?;
                let b = PoolBuf { buffer, len: n };
                if i < pool.len() {
                    pool[i] = b;
                    replaced = true;
                } else {
                    pool.push(b);
                }
            }
        }
        if replaced {
            // A grown buffer is a new buffer: recordings that bound the old
            // one are made again when their graph next runs.
            self.graphs.clear();
        }
        Ok(())
    }

    fn ensure_kv(&mut self, layer: usize, kind: KvKind, want: KvInfo) -> GResult<bool> {
        let gpu = &self.gpu;
        self.kv.ensure(layer, kind, want, || {
            attention::new_kv(gpu, want.format, want.row_elems, want.n_ctx).map_err(gerr)
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
    ) -> GResult<()> {
        attention::read_raw_row(&self.gpu, self.region(layer, kind)?, cell, out).map_err(gerr)
    }

    fn kv_read_raw_rows(
        &self,
        layer: usize,
        kind: KvKind,
        cells: &[usize],
        out: &mut Vec<u8>,
    ) -> GResult<()> {
        let (Some(&lo), Some(&hi)) = (cells.iter().min(), cells.iter().max()) else {
            return Ok(());
        };
        let r = self.region(layer, kind)?;
        if hi >= r.n_ctx {
            return Err(GraphError::CellOutOfRange {
                cell: hi as i64,
                n_ctx: r.n_ctx,
            });
        }
        let raw = self.kv_info(layer, kind).map_or(0, |i| i.raw_row_bytes());
        // Each cell's row is its raw bytes at the start of its stride, so
        // one read of the cells' span serves every row.
        let span = ((hi - lo + 1) as u64 * r.stride) as usize;
        let bytes = self
            .gpu
            .read(&r.buffer, lo as u64 * r.stride, span)
            .map_err(gerr)?;
        for &c in cells {
            let at = (c - lo) * r.stride as usize;
            out.extend_from_slice(&bytes[at..at + raw]);
        }
        Ok(())
    }

    fn kv_write_raw(&mut self, layer: usize, kind: KvKind, cell: usize, src: &[u8]) -> GResult<()> {
        attention::write_raw_row(&self.gpu, self.region(layer, kind)?, cell, src).map_err(gerr)
    }

    fn kv_store_row(
        &mut self,
        layer: usize,
        kind: KvKind,
        cell: usize,
        row: &[f32],
    ) -> GResult<()> {
        // Through the CPU's rounding, so a stored row is what a KV store of
        // these values leaves on either device.
        let info = self.kv_info(layer, kind).ok_or(GraphError::NoKvRegion {
            layer,
            kind,
            where_: " on the GPU",
        })?;
        let mut cpu = minfer_graph::kv::KvRegion::new(info.format, info.row_elems, 1)?;
        cpu.store_row(0, row)?;
        let mut raw = Vec::new();
        cpu.read_raw_row(0, &mut raw)?;
        self.kv_write_raw(layer, kind, cell, &raw)
    }

    fn prepare(&mut self, view: &GraphView) -> GResult<()> {
        let rec = self.record(view)?;
        self.graphs.insert(view.uid, rec);
        Ok(())
    }

    fn forget(&mut self, uid: GraphUid) {
        self.graphs.remove(&uid);
    }

    fn write_f32(&mut self, slot: Slot, data: &[f32]) -> GResult<()> {
        let r = self.range(slot)?;
        self.gpu.write(&r.buffer, 0, bytemuck::cast_slice(data));
        Ok(())
    }

    fn write_i32(&mut self, slot: Slot, data: &[i32]) -> GResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let r = self.range(slot)?;
        self.gpu.write(&r.buffer, 0, bytemuck::cast_slice(data));
        Ok(())
    }

    fn read_f32(&mut self, slot: Slot, out: &mut [f32]) -> GResult<()> {
        let r = self.range(slot)?;
        let bytes = out.len() * 4;
        self.grow_staging(bytes as u64);
        self.read_bytes.resize(bytes, 0);
        self.gpu
            .read_into(&r.buffer, 0, &self.staging, &mut self.read_bytes)
            .map_err(gerr)?;
        for (o, c) in out.iter_mut().zip(self.read_bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(())
    }

    fn run(&mut self, view: &GraphView, nodes: Range<usize>, timed: bool) -> GResult<Duration> {
        if !self.graphs.contains_key(&view.uid) {
            let rec = self.record(view)?;
            self.graphs.insert(view.uid, rec);
        }
        let rec = &self.graphs[&view.uid];
        let Some((_, bound)) = rec.splits.iter().find(|(r, _)| *r == nodes) else {
            return Err(GraphError::Backend {
                backend: "GPU",
                msg: format!("graph {} has no GPU split {nodes:?}", view.uid.0),
            });
        };
        let t = timed.then(Instant::now);
        let mut enc = self.gpu.encoder();
        self.gpu.encode(&mut enc, bound);
        self.gpu.submit(enc);
        match t {
            Some(t) => {
                self.gpu.wait().map_err(gerr)?;
                Ok(t.elapsed())
            }
            None => Ok(Duration::ZERO),
        }
    }

    fn synchronize(&mut self) -> GResult<()> {
        self.gpu.wait().map_err(gerr)
    }
}
