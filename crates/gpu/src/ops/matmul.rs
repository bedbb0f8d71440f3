//! Weights on the device and the products over them: activations
//! quantized per row to the CPU backend's Q8 formats, integer dot
//! products per weight type, and row lookups (get_rows) that dequantize.
//!
//! The numerics are the CPU's (`minfer_kernels`): the activation
//! quantizers use the same formulas, with a correctly rounded division
//! and f16 rounding done in integer arithmetic so that every device gives
//! the same int8 values and scales; each block's quant products are summed
//! exactly in i32, and the f32 sums over blocks (or, for F32/F16 weights,
//! over values) run in the CPU scalar kernels' order, products kept
//! unfused: on lavapipe the products equal the CPU's bit for bit.
//! get_rows reproduces the CPU's dequantization bit for bit.
//!
//! The product kernels give each lane whole rows (no lane waits for
//! another, so there is no barrier: a software device such as lavapipe
//! pays heavily for one and for every load, so the kernels read each
//! weight block once for a tile of tokens and, with subgroups, each
//! activation word once per subgroup). A (token, row) result is reduced
//! in one fixed order whatever the number of tokens, the tile that
//! computes it or how the weight is split into chunks, so a row's result
//! does not depend on its batch.

use std::sync::Arc;

use minfer_kernels::GgmlType;

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch, Kernel};
use crate::ops::groups_for;
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

/// The kernel family of a weight type: which mat-vec shader and which
/// activation format it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// Blocks of 32 with Q8_0 / Q8_1 activations.
    Legacy,
    /// Super-blocks of 256 with Q8_K activations.
    KQuant,
    /// F32 / F16 with f32 activations.
    Float,
}

fn family(ty: GgmlType) -> Option<Family> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => Family::Legacy,
        Q4_K | Q5_K | Q6_K => Family::KQuant,
        F32 | F16 => Family::Float,
        _ => return None,
    })
}

/// Words of one quantized activation block in the scratch buffer (the
/// shaders' `A32_WORDS` and `AK_WORDS`): 32 values as 8 words of i8, d and
/// s; 256 values as 64 words of i8, d and eight sums of 32.
const A32_WORDS: u64 = 10;
const AK_WORDS: u64 = 73;

/// Tokens per workgroup of the mat-vec kernels (their `TT`) for full
/// tiles; the tokens after the last full tile take a one-token kernel.
/// Every variant sums a (token, row) result in the same order, so which
/// one computes a token does not change its bits.
const TOKEN_TILE: usize = 8;

/// The longest rows a product takes on a software adapter.
const SOFTWARE_MAX_COLS: usize = 262_144;

/// Bytes kept after a chunk's rows: the shaders read whole words, which
/// for the last field of the last block may reach past the row data.
const CHUNK_PAD: u64 = 32;

/// The largest chunk the shaders address: byte offsets are u32.
const MAX_CHUNK: u64 = 1 << 31;

const COMMON: &str = include_str!("../shaders/matmul/common.wgsl");
const ACT_SG: &str = include_str!("../shaders/matmul/act_sg.wgsl");
const ACT_PLAIN: &str = include_str!("../shaders/matmul/act_plain.wgsl");
const MV_LEGACY: &str = include_str!("../shaders/matmul/mv_legacy.wgsl");
const MV_KQUANTS: &str = include_str!("../shaders/matmul/mv_kquants.wgsl");
const MV_FLOAT: &str = include_str!("../shaders/matmul/mv_float.wgsl");
const MV_IO: &str = include_str!("../shaders/matmul/mv_io.wgsl");
/// An activation quantizer: the shared helpers, its parameters and
/// bindings, and the kernel.
macro_rules! quantizer {
    ($file:literal) => {
        concat!(
            include_str!("../shaders/matmul/common.wgsl"),
            include_str!("../shaders/matmul/quant_io.wgsl"),
            include_str!($file)
        )
    };
}

const QUANT_Q8: &str = quantizer!("../shaders/matmul/quant_q8.wgsl");
const QUANT_Q8_SG: &str = quantizer!("../shaders/matmul/quant_q8_sg.wgsl");
const QUANT_Q8K: &str = quantizer!("../shaders/matmul/quant_q8k.wgsl");
const QUANT_Q8K_SG: &str = quantizer!("../shaders/matmul/quant_q8k_sg.wgsl");

/// A matmul shader for weight type `$wt` (its GGUF id): the type constant,
/// then the shared helpers and the kernel.
macro_rules! shader {
    ($wt:literal, $($file:literal),+) => {
        concat!(
            "const WT: u32 = ", $wt, "u;\n",
            $(include_str!(concat!("../shaders/matmul/", $file)),)+
        )
    };
}

macro_rules! rows {
    ($wt:literal) => {
        shader!($wt, "common.wgsl", "wload.wgsl", "get_rows.wgsl")
    };
}

/// Lanes per workgroup and rows per lane of the mat-vec kernels. On a
/// software device small workgroups keep the work of a few hundred rows
/// spread over its threads; a GPU gets whole waves. Two rows per lane
/// share each activation read and keep a wide tile's partial sums in
/// registers.
const MV_WG_SOFTWARE: usize = 16;
const MV_WG: usize = 64;
const MV_RPL: usize = 2;

/// The mat-vec kernel of `ty` for token tiles of `tt`, and the rows one
/// workgroup computes.
fn mv_kernel(gpu: &Gpu, ty: GgmlType, fam: Family, tt: usize) -> Result<(Arc<Kernel>, usize)> {
    let wg = if gpu.adapter().kind == crate::AdapterKind::Software {
        MV_WG_SOFTWARE
    } else {
        MV_WG
    };
    let rpl = MV_RPL;
    let sg = gpu.subgroups;
    let name = format!(
        "matmul_{}_t{tt}{}",
        ty.name().to_ascii_lowercase(),
        if sg { "_sg" } else { "" }
    );
    let kernel = gpu.kernel_with(&name, || {
        let body = match fam {
            Family::Legacy => MV_LEGACY,
            Family::KQuant => MV_KQUANTS,
            Family::Float => MV_FLOAT,
        };
        format!(
            "const WT: u32 = {}u;\nconst TT: u32 = {tt}u;\nconst RPL: u32 = {rpl}u;\n\
             const WG: u32 = {wg}u;\n{COMMON}{}{MV_IO}{}",
            ty as u32,
            if sg { ACT_SG } else { ACT_PLAIN },
            crate::kernel::expand_repeats(body, &[("TT", tt)]),
        )
    })?;
    Ok((kernel, wg * rpl))
}

/// The get_rows kernel of `ty`: its name and shader.
fn rows_source(ty: GgmlType) -> Option<(&'static str, &'static str)> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 => ("get_rows_q4_0", rows!(2)),
        Q4_1 => ("get_rows_q4_1", rows!(3)),
        Q5_0 => ("get_rows_q5_0", rows!(6)),
        Q5_1 => ("get_rows_q5_1", rows!(7)),
        Q8_0 => ("get_rows_q8_0", rows!(8)),
        Q4_K => ("get_rows_q4_k", rows!(12)),
        Q5_K => ("get_rows_q5_k", rows!(13)),
        Q6_K => ("get_rows_q6_k", rows!(14)),
        F32 => ("get_rows_f32", rows!(0)),
        F16 => ("get_rows_f16", rows!(1)),
        _ => return None,
    })
}

fn unsupported(ty: GgmlType, op: &str) -> GpuError {
    GpuError::Unsupported(format!("{op} over {ty} weights"))
}

/// Whether the GPU backend has a product and a row lookup for `ty`.
pub fn supports(ty: GgmlType) -> bool {
    family(ty).is_some()
}

/// Bytes of one row of `cols` values of `ty`, or an error when `cols` is
/// not a whole number of blocks.
fn row_bytes(ty: GgmlType, cols: usize) -> Result<usize> {
    minfer_kernels::matmul::row_bytes(ty, cols).ok_or_else(|| GpuError::Buffer {
        what: format!("{ty} weight"),
        msg: format!(
            "{cols} values per row is not a multiple of the {}-value block",
            ty.block_size()
        ),
    })
}

/// Uploads a weight (`data` in the GGUF row layout) as chunks no larger
/// than [`Gpu::max_binding`].
///
/// # Errors
/// [`GpuError::Unsupported`] for a type without kernels, [`GpuError::Buffer`]
/// when a single row is larger than a binding or `data` is short.
pub fn upload_weight(
    gpu: &Gpu,
    name: &str,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: &[u8],
) -> Result<DeviceWeight> {
    upload_weight_chunked(gpu, name, ty, rows, cols, data, gpu.max_binding())
}

/// [`upload_weight`] with chunks of at most `max_chunk_bytes` (padding
/// included), so that tests can split small weights.
///
/// # Errors
/// As [`upload_weight`]; also when `rows` is 0.
pub fn upload_weight_chunked(
    gpu: &Gpu,
    name: &str,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: &[u8],
    max_chunk_bytes: u64,
) -> Result<DeviceWeight> {
    if !supports(ty) {
        return Err(unsupported(ty, "weights"));
    }
    let row = row_bytes(ty, cols)?;
    let bad = |msg: String| GpuError::Buffer {
        what: name.to_string(),
        msg,
    };
    let total = rows
        .checked_mul(row)
        .ok_or_else(|| bad(format!("{rows} rows of {row} bytes overflow")))?;
    if rows == 0 || cols == 0 {
        return Err(bad("an empty weight".into()));
    }
    if data.len() < total {
        return Err(bad(format!(
            "{} bytes for {rows} rows of {row} bytes ({total})",
            data.len()
        )));
    }
    // Buffers are rounded up to 16 bytes, which must stay within the limit.
    let budget = (max_chunk_bytes.min(MAX_CHUNK) & !15).saturating_sub(CHUNK_PAD);
    let per_chunk = (budget / row as u64) as usize;
    if per_chunk == 0 {
        return Err(bad(format!(
            "a row of {row} bytes is larger than a binding ({max_chunk_bytes} bytes)"
        )));
    }
    let mut chunks = Vec::with_capacity(rows.div_ceil(per_chunk));
    let mut first_row = 0;
    while first_row < rows {
        let n = per_chunk.min(rows - first_row);
        let bytes = &data[first_row * row..(first_row + n) * row];
        let buffer = gpu.storage(name, bytes.len() as u64 + CHUNK_PAD)?;
        gpu.write(&buffer, 0, bytes);
        chunks.push(WeightChunk {
            buffer,
            first_row,
            rows: n,
        });
        first_row += n;
    }
    Ok(DeviceWeight {
        ty,
        rows,
        cols,
        chunks,
    })
}

/// Scratch bytes [`matmul`] needs for `n_tok` activation rows of `cols`
/// values against a weight of type `ty` (0 for float weights).
pub fn matmul_scratch_bytes(ty: GgmlType, cols: usize, n_tok: usize) -> u64 {
    let n = n_tok as u64;
    match family(ty) {
        Some(Family::Legacy) => n * (cols as u64 / 32) * A32_WORDS * 4,
        Some(Family::KQuant) => n * (cols as u64 / 256) * AK_WORDS * 4,
        Some(Family::Float) | None => 0,
    }
}

/// Bytes a binding of `b` can see.
fn bound_bytes(b: &BufRange) -> u64 {
    b.size
        .unwrap_or_else(|| b.buffer.size().saturating_sub(b.offset))
}

/// Checks that `b` holds at least `need` bytes.
fn check_len(what: &str, b: &BufRange, need: u64) -> Result<()> {
    let have = bound_bytes(b);
    if have < need {
        return Err(GpuError::Buffer {
            what: what.to_string(),
            msg: format!("{have} bytes bound, {need} needed"),
        });
    }
    Ok(())
}

fn u32_of(what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| GpuError::Buffer {
        what: what.to_string(),
        msg: format!("{v} does not fit the shaders' 32-bit indices"),
    })
}

/// The activation quantizer for a product of family `fam`: the kernel, the
/// values per block and the blocks per workgroup.
fn quantize_kernel(gpu: &Gpu, fam: Family) -> Result<(Arc<Kernel>, usize, u64)> {
    Ok(match (fam == Family::Legacy, gpu.subgroups) {
        (true, true) => (gpu.kernel("matmul_quantize_q8_sg", QUANT_Q8_SG)?, 32, 8),
        (true, false) => (gpu.kernel("matmul_quantize_q8", QUANT_Q8)?, 32, 8),
        (false, true) => (gpu.kernel("matmul_quantize_q8k_sg", QUANT_Q8K_SG)?, 256, 8),
        (false, false) => (gpu.kernel("matmul_quantize_q8k", QUANT_Q8K)?, 256, 1),
    })
}

/// `out[t * w.rows + r] = w[r] · x[t]` for `n_tok` rows `x[t]` of `w.cols`
/// f32 values. `scratch` holds at least [`matmul_scratch_bytes`].
///
/// Quantized weights take two steps: the activation rows are quantized
/// into `scratch`, then each weight chunk's rows are dotted with them.
///
/// # Errors
/// [`GpuError::Unsupported`] for a type without kernels,
/// [`GpuError::Buffer`] when a binding is too short, [`GpuError::Shader`]
/// if a kernel fails to compile.
pub fn matmul(
    gpu: &Gpu,
    w: &DeviceWeight,
    x: &BufRange,
    n_tok: usize,
    out: &BufRange,
    scratch: &BufRange,
) -> Result<Vec<Dispatch>> {
    let fam = family(w.ty).ok_or_else(|| unsupported(w.ty, "mat_mul"))?;
    let row = row_bytes(w.ty, w.cols)?;
    check_len("mat_mul activations", x, (n_tok * w.cols * 4) as u64)?;
    check_len("mat_mul output", out, (n_tok * w.rows * 4) as u64)?;
    if n_tok == 0 {
        return Ok(Vec::new());
    }
    // A software device stops every loop of an invocation after 65,535
    // iterations in all; the kernels take one per block (one per eight
    // values of a float row), which the tests check up to this length.
    if gpu.adapter().kind == crate::AdapterKind::Software && w.cols > SOFTWARE_MAX_COLS {
        return Err(GpuError::Unsupported(format!(
            "rows of {} values on a software adapter (at most {SOFTWARE_MAX_COLS})",
            w.cols
        )));
    }
    let n_tok32 = u32_of("mat_mul tokens", n_tok)?;
    let cols = u32_of("mat_mul columns", w.cols)?;
    let out_stride = u32_of("mat_mul rows", w.rows)?;
    u32_of("mat_mul output", n_tok * w.rows)?;
    u32_of("mat_mul activations", n_tok * w.cols)?;
    let mut dispatches = Vec::new();
    // What the products read: the quantized rows, or x itself.
    let (acts, per_row) = match fam {
        Family::Float => (x.clone(), cols),
        Family::Legacy | Family::KQuant => {
            check_len(
                "mat_mul scratch",
                scratch,
                matmul_scratch_bytes(w.ty, w.cols, n_tok),
            )?;
            let (kernel, block, per_group) = quantize_kernel(gpu, fam)?;
            let nb = w.cols / block;
            let total = u32_of("mat_mul blocks", n_tok * nb)?;
            dispatches.push(Dispatch {
                kernel,
                params: vec![n_tok32, cols, nb as u32, total],
                buffers: vec![x.clone(), scratch.clone()],
                groups: groups_for(total as u64, per_group),
            });
            (scratch.clone(), nb as u32)
        }
    };
    // Token tiles go in z, which every device allows up to 65,535.
    for c in &w.chunks {
        let mut t_base = 0;
        while t_base < n_tok {
            let left = n_tok - t_base;
            let tt = if left >= TOKEN_TILE { TOKEN_TILE } else { 1 };
            let tiles = (left / tt).min(65_535);
            let (kernel, rows_wg) = mv_kernel(gpu, w.ty, fam, tt)?;
            let mut groups = groups_for(c.rows as u64, rows_wg as u64);
            groups[2] = tiles as u32;
            dispatches.push(Dispatch {
                kernel,
                params: vec![
                    c.rows as u32,
                    per_row,
                    row as u32,
                    n_tok32,
                    out_stride,
                    c.first_row as u32,
                    t_base as u32,
                    0,
                ],
                buffers: vec![BufRange::whole(&c.buffer), acts.clone(), out.clone()],
                groups,
            });
            t_base += tt * tiles;
        }
    }
    Ok(dispatches)
}

/// `out[i] = w[ids[i]]` as f32 for `n_ids` ids (rows of `w.cols` values).
///
/// The values are the CPU's dequantization, bit for bit. An id outside
/// `0..w.rows` gives a row of zeros (the graph checks ids before).
///
/// # Errors
/// [`GpuError::Unsupported`] for a type without kernels,
/// [`GpuError::Buffer`] when a binding is too short.
pub fn get_rows(
    gpu: &Gpu,
    w: &DeviceWeight,
    ids: &BufRange,
    n_ids: usize,
    out: &BufRange,
) -> Result<Vec<Dispatch>> {
    let (name, src) = rows_source(w.ty).ok_or_else(|| unsupported(w.ty, "get_rows"))?;
    let row = row_bytes(w.ty, w.cols)?;
    check_len("get_rows ids", ids, (n_ids * 4) as u64)?;
    check_len("get_rows output", out, (n_ids * w.cols * 4) as u64)?;
    if n_ids == 0 {
        return Ok(Vec::new());
    }
    let values = u32_of("get_rows output", n_ids * w.cols)?;
    // Ids are compared as i32 in the shader.
    if w.rows > i32::MAX as usize {
        return Err(GpuError::Buffer {
            what: "get_rows weight".into(),
            msg: format!("{} rows, more than an i32 id reaches", w.rows),
        });
    }
    let kernel = gpu.kernel(name, src)?;
    Ok(w.chunks
        .iter()
        .enumerate()
        .map(|(i, c)| Dispatch {
            kernel: kernel.clone(),
            params: vec![
                n_ids as u32,
                w.cols as u32,
                row as u32,
                c.first_row as u32,
                c.rows as u32,
                w.rows as u32,
                u32::from(i == 0),
                0,
            ],
            buffers: vec![BufRange::whole(&c.buffer), ids.clone(), out.clone()],
            groups: groups_for(values as u64, 256),
        })
        .collect())
}
