//! KV regions on the device and the ops over them: RoPE, the KV store
//! (f32, f16 and Q8_0 cells), RoPE fused with the store, and causal GQA
//! attention over each query's window of cells (sliding windows too).

use std::sync::Arc;

use minfer_graph::{AttnParams, KvFormat, RopeParams};

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::Gpu;

/// One layer's K or V region on the device: `n_ctx` cells of `row_elems`
/// values in `format`, each cell's row `stride` bytes apart (a multiple of
/// 4, so that no two cells share a 32-bit word).
#[derive(Clone, Debug)]
pub struct DeviceKv {
    /// How values are stored.
    pub format: KvFormat,
    /// Values per cell.
    pub row_elems: usize,
    /// Cells.
    pub n_ctx: usize,
    /// Bytes from one cell's row to the next.
    pub stride: u64,
    /// The cells.
    pub buffer: Arc<wgpu::Buffer>,
}

/// A zeroed region.
///
/// # Errors
/// [`GpuError::Buffer`] past the device's limits; a Q8_0 row that is not
/// whole blocks.
pub fn new_kv(_gpu: &Gpu, _format: KvFormat, _row_elems: usize, _n_ctx: usize) -> Result<DeviceKv> {
    Err(GpuError::Unsupported("kv regions".into()))
}

/// Cell `cell`'s row in the CPU region's raw byte format (what
/// `KvRegion::read_raw_row` gives), appended to `out`.
///
/// # Errors
/// A cell past `n_ctx`; device errors.
pub fn read_raw_row(_gpu: &Gpu, _kv: &DeviceKv, _cell: usize, _out: &mut Vec<u8>) -> Result<()> {
    Err(GpuError::Unsupported("kv rows".into()))
}

/// Writes cell `cell`'s row from the CPU region's raw byte format.
///
/// # Errors
/// A cell past `n_ctx` or a row of the wrong length.
pub fn write_raw_row(_gpu: &Gpu, _kv: &DeviceKv, _cell: usize, _src: &[u8]) -> Result<()> {
    Err(GpuError::Unsupported("kv rows".into()))
}

/// Stores `n_rows` rows of `x` (each `kv.row_elems` f32 values) into the
/// cells `cells[0..n_rows]`.
pub fn kv_store(
    _gpu: &Gpu,
    _kv: &DeviceKv,
    _x: &BufRange,
    _cells: &BufRange,
    _n_rows: u32,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("kv_store".into()))
}

/// RoPE of every head of `n_rows` rows of `x`, in place, at `positions`.
pub fn rope_inplace(
    _gpu: &Gpu,
    _x: &BufRange,
    _positions: &BufRange,
    _n_rows: u32,
    _p: &RopeParams,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("rope".into()))
}

/// RoPE of `n_rows` rows of `x` stored into `kv` at `cells` (`x` is left
/// unchanged): the same values as [`rope_inplace`] then [`kv_store`].
pub fn rope_kv_store(
    _gpu: &Gpu,
    _kv: &DeviceKv,
    _x: &BufRange,
    _positions: &BufRange,
    _cells: &BufRange,
    _n_rows: u32,
    _p: &RopeParams,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("rope_kv_store".into()))
}

/// The step inputs a sliding window reads: each query's position and the
/// position of every window cell (parallel to the cells).
#[derive(Clone, Debug)]
pub struct SlidingInputs {
    /// `n_rows` query positions.
    pub positions: BufRange,
    /// One position per window cell.
    pub cell_positions: BufRange,
}

/// Attention of `n_rows` query rows (`p.n_head * p.head_dim` values each)
/// over the cells `cells[offsets[t]..offsets[t + 1]]` of `k` and `v`,
/// written to `out` (same shape as `q`). With `p.sliding_window > 0`,
/// `sliding` names the positions and only cells above
/// `position - sliding_window` are read.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    _gpu: &Gpu,
    _q: &BufRange,
    _k: &DeviceKv,
    _v: &DeviceKv,
    _offsets: &BufRange,
    _cells: &BufRange,
    _sliding: Option<&SlidingInputs>,
    _n_rows: u32,
    _p: &AttnParams,
    _out: &BufRange,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("attention".into()))
}
