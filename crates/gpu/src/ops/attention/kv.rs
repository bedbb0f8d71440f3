//! KV regions on the device: allocation, the CPU's raw row format in and
//! out, and the store kernels (plain, and fused with RoPE).
//!
//! A cell's row starts at a multiple of 4 bytes and holds exactly the
//! bytes of the CPU region's raw row (`KvRegion::read_raw_row`): f32
//! values, f16 halves (two per word, the even value in the low half, which
//! is the little-endian byte order), or Q8_0's 34-byte blocks back to
//! back; the tail of the last word is padding. So moving a row between a
//! CPU region and a device region is a plain copy of its bytes.

use std::sync::Arc;

use minfer_graph::{KvFormat, RopeParams, RopeStyle};

use super::rope::{RopeSetup, ROPE_COMMON};
use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::ops::groups_for;
use crate::Gpu;

/// Values per Q8_0 block.
const QK: usize = 32;

const KV_IO: &str = include_str!("../../shaders/kv_store_io.wgsl");
pub(super) const KV_COMMON: &str = include_str!("../../shaders/kv_common.wgsl");
const KV_QUANT: &str = include_str!("../../shaders/kv_quant.wgsl");
const SRC_PLAIN: &str = include_str!("../../shaders/kv_src_plain.wgsl");
const SRC_ROPE: &str = include_str!("../../shaders/rope_kv_src.wgsl");
const STORE_F32: &str = include_str!("../../shaders/kv_store_f32.wgsl");
const STORE_F16: &str = include_str!("../../shaders/kv_store_f16.wgsl");
const STORE_Q8: &str = include_str!("../../shaders/kv_store_q8.wgsl");

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

impl minfer_graph::Region for DeviceKv {
    fn shape(&self) -> minfer_graph::KvInfo {
        minfer_graph::KvInfo::new(self.format, self.row_elems, self.n_ctx)
    }
}

fn bad(what: &str, msg: String) -> GpuError {
    GpuError::Buffer {
        what: what.to_string(),
        msg,
    }
}

/// Bytes of one cell's row in the CPU's raw format.
pub(super) fn row_bytes(format: KvFormat, row_elems: usize) -> usize {
    format.row_bytes(row_elems)
}

/// A zeroed region.
///
/// # Errors
/// [`GpuError::Buffer`] past the device's limits (the whole region must
/// fit one binding and 32-bit byte addresses), for an empty region, a
/// Q8_0 row that is not whole blocks or an f16 row of odd length.
pub fn new_kv(gpu: &Gpu, format: KvFormat, row_elems: usize, n_ctx: usize) -> Result<DeviceKv> {
    if row_elems == 0 || n_ctx == 0 {
        return Err(bad(
            "kv region",
            format!("row_elems ({row_elems}) and n_ctx ({n_ctx}) must be positive"),
        ));
    }
    match format {
        KvFormat::Q8_0 if !row_elems.is_multiple_of(QK) => {
            return Err(bad(
                "kv region",
                format!("q8_0 needs a row length that is a multiple of {QK}, got {row_elems}"),
            ))
        }
        // Stores write whole words, two halves each.
        KvFormat::F16 if !row_elems.is_multiple_of(2) => {
            return Err(bad(
                "kv region",
                format!("f16 needs an even row length, got {row_elems}"),
            ))
        }
        _ => {}
    }
    let stride = (row_bytes(format, row_elems) as u64).div_ceil(4) * 4;
    let bytes = stride.checked_mul(n_ctx as u64);
    // The kernels bind the whole region and address it in 32-bit bytes.
    let limit = gpu.max_binding().min(u64::from(u32::MAX));
    match bytes {
        Some(b) if b <= limit => Ok(DeviceKv {
            format,
            row_elems,
            n_ctx,
            stride,
            buffer: gpu.storage("kv region", b)?,
        }),
        _ => Err(bad(
            "kv region",
            format!("{n_ctx} cells of {stride} bytes exceed the {limit} bytes a kernel can bind"),
        )),
    }
}

fn check_cell(kv: &DeviceKv, cell: usize) -> Result<()> {
    if cell >= kv.n_ctx {
        return Err(bad(
            "kv row",
            format!("cell {cell} is outside the region's {} cells", kv.n_ctx),
        ));
    }
    Ok(())
}

/// Cell `cell`'s row in the CPU region's raw byte format (what
/// `KvRegion::read_raw_row` gives), appended to `out`.
///
/// # Errors
/// A cell past `n_ctx`; device errors.
pub fn read_raw_row(gpu: &Gpu, kv: &DeviceKv, cell: usize, out: &mut Vec<u8>) -> Result<()> {
    check_cell(kv, cell)?;
    let n = row_bytes(kv.format, kv.row_elems);
    let bytes = gpu.read(&kv.buffer, cell as u64 * kv.stride, n)?;
    out.extend_from_slice(&bytes);
    Ok(())
}

/// Writes cell `cell`'s row from the CPU region's raw byte format.
///
/// # Errors
/// A cell past `n_ctx` or a row of the wrong length.
pub fn write_raw_row(gpu: &Gpu, kv: &DeviceKv, cell: usize, src: &[u8]) -> Result<()> {
    check_cell(kv, cell)?;
    let n = row_bytes(kv.format, kv.row_elems);
    if src.len() != n {
        return Err(bad(
            "kv raw row",
            format!("expected {n} bytes, got {}", src.len()),
        ));
    }
    // `write` pads the row to whole words with zeros: the cell's padding.
    gpu.write(&kv.buffer, cell as u64 * kv.stride, src);
    Ok(())
}

/// The store kernel for `format`, with the plain or the RoPE source of
/// values.
fn store_kernel(gpu: &Gpu, format: KvFormat, rope: bool) -> Result<Arc<crate::Kernel>> {
    let (name, main) = match (format, rope) {
        (KvFormat::F32, false) => ("kv_store_f32", STORE_F32),
        (KvFormat::F16, false) => ("kv_store_f16", STORE_F16),
        (KvFormat::Q8_0, false) => ("kv_store_q8_0", STORE_Q8),
        (KvFormat::F32, true) => ("rope_kv_store_f32", STORE_F32),
        (KvFormat::F16, true) => ("rope_kv_store_f16", STORE_F16),
        (KvFormat::Q8_0, true) => ("rope_kv_store_q8_0", STORE_Q8),
    };
    let src = if rope {
        [KV_IO, KV_COMMON, KV_QUANT, ROPE_COMMON, SRC_ROPE, main].concat()
    } else {
        [KV_IO, KV_COMMON, KV_QUANT, SRC_PLAIN, main].concat()
    };
    gpu.kernel(name, &src)
}

fn u32_of(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| bad(what, format!("{v} does not fit the kernels' 32-bit sizes")))
}

/// The store dispatch: one workgroup per row of `x`.
#[allow(clippy::too_many_arguments)]
fn store(
    gpu: &Gpu,
    kv: &DeviceKv,
    x: &BufRange,
    cells: &BufRange,
    positions: Option<&BufRange>,
    n_rows: u32,
    rope: [u32; 5],
) -> Result<Vec<Dispatch>> {
    let kernel = store_kernel(gpu, kv.format, positions.is_some())?;
    let mut params = vec![
        n_rows,
        u32_of(kv.row_elems, "kv row")?,
        u32_of(kv.stride as usize, "kv stride")?,
        u32_of(kv.n_ctx, "kv cells")?,
    ];
    params.extend_from_slice(&rope);
    let mut buffers = vec![x.clone(), cells.clone(), BufRange::whole(&kv.buffer)];
    buffers.extend(positions.cloned());
    Ok(vec![Dispatch {
        kernel,
        params,
        buffers,
        groups: groups_for(u64::from(n_rows), 1),
    }])
}

/// Stores `n_rows` rows of `x` (each `kv.row_elems` f32 values) into the
/// cells `cells[0..n_rows]`, converting as the CPU region does (f16 round
/// to nearest even, Q8_0 as `quantize_row_q8_0`), to the same bits. A cell
/// outside the region is skipped (the graph validates cells before).
///
/// # Errors
/// Shader or size errors.
pub fn kv_store(
    gpu: &Gpu,
    kv: &DeviceKv,
    x: &BufRange,
    cells: &BufRange,
    n_rows: u32,
) -> Result<Vec<Dispatch>> {
    store(gpu, kv, x, cells, None, n_rows, [0; 5])
}

/// RoPE of `n_rows` rows of `x` stored into `kv` at `cells` (`x` is left
/// unchanged): the same values as [`super::rope_inplace`] then
/// [`kv_store`].
///
/// # Errors
/// As [`super::rope_inplace`], and heads that do not fill the region's
/// rows.
pub fn rope_kv_store(
    gpu: &Gpu,
    kv: &DeviceKv,
    x: &BufRange,
    positions: &BufRange,
    cells: &BufRange,
    n_rows: u32,
    p: &RopeParams,
) -> Result<Vec<Dispatch>> {
    let r = RopeSetup::new(p)?;
    if p.n_head * p.head_dim != kv.row_elems {
        return Err(bad(
            "rope kv store",
            format!(
                "{} heads x {} do not fill the region's rows of {}",
                p.n_head, p.head_dim, kv.row_elems
            ),
        ));
    }
    if r.n_rot == 0 {
        // Nothing rotates: a plain store gives the same bits.
        return kv_store(gpu, kv, x, cells, n_rows);
    }
    let style = u32::from(p.style == RopeStyle::Neox);
    let rope = [
        r.head_dim,
        r.n_rot,
        style,
        r.theta_scale.to_bits(),
        p.freq_scale.to_bits(),
    ];
    store(gpu, kv, x, cells, Some(positions), n_rows, rope)
}
