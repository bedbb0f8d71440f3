//! Weights on the device and the products over them: activations
//! quantized per row to the CPU backend's Q8 formats, integer dot
//! products per weight type, and row lookups (get_rows) that dequantize.

use std::sync::Arc;

use minfer_kernels::GgmlType;

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::Gpu;

/// Rows `first_row..first_row + rows` of a weight, in one buffer.
#[derive(Clone, Debug)]
pub struct WeightChunk {
    /// The rows' bytes in the GGUF layout, from the buffer's start.
    pub buffer: Arc<wgpu::Buffer>,
    /// The chunk's first row.
    pub first_row: usize,
    /// Rows in the chunk.
    pub rows: usize,
}

/// A weight matrix resident on the device: `rows` rows of `cols` values
/// of type `ty`, split into chunks of whole rows where it is larger than
/// the device's largest storage binding.
#[derive(Clone, Debug)]
pub struct DeviceWeight {
    /// The GGUF type of the values.
    pub ty: GgmlType,
    /// Rows (output features).
    pub rows: usize,
    /// Values per row (input features).
    pub cols: usize,
    /// The chunks, in row order, covering every row once.
    pub chunks: Vec<WeightChunk>,
}

/// Whether the GPU backend has a product and a row lookup for `ty`.
pub fn supports(_ty: GgmlType) -> bool {
    false
}

/// Uploads a weight (`data` in the GGUF row layout) as chunks no larger
/// than [`Gpu::max_binding`].
///
/// # Errors
/// [`GpuError::Unsupported`] for a type without kernels, [`GpuError::Buffer`]
/// when a single row is larger than a binding or `data` is short.
pub fn upload_weight(
    _gpu: &Gpu,
    _name: &str,
    _ty: GgmlType,
    _rows: usize,
    _cols: usize,
    _data: &[u8],
) -> Result<DeviceWeight> {
    Err(GpuError::Unsupported("weights".into()))
}

/// Scratch bytes [`matmul`] needs for `n_tok` activation rows of `cols`
/// values against a weight of type `ty` (0 for float weights).
pub fn matmul_scratch_bytes(_ty: GgmlType, _cols: usize, _n_tok: usize) -> u64 {
    0
}

/// `out[t * w.rows + r] = w[r] · x[t]` for `n_tok` rows `x[t]` of `w.cols`
/// f32 values. `scratch` holds at least [`matmul_scratch_bytes`].
pub fn matmul(
    _gpu: &Gpu,
    _w: &DeviceWeight,
    _x: &BufRange,
    _n_tok: usize,
    _out: &BufRange,
    _scratch: &BufRange,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("mat_mul".into()))
}

/// `out[i] = w[ids[i]]` as f32 for `n_ids` ids (rows of `w.cols` values).
pub fn get_rows(
    _gpu: &Gpu,
    _w: &DeviceWeight,
    _ids: &BufRange,
    _n_ids: usize,
    _out: &BufRange,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("get_rows".into()))
}
