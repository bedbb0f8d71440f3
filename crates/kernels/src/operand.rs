//! The operands of a matrix product, shared by the row-wise and the
//! interleaved paths: the weight view, its byte layout and the activation
//! scratch with the quantization that fills it. Both paths name these,
//! so they live below both (the scratch's `reserve_*` methods stay in
//! [`crate::matmul`], next to the kernel tables they size for).

use minfer_gguf::GgmlType;

use crate::error::KernelError;
use crate::pool::{SharedMut, ThreadPool};
use crate::quant;
use crate::simd::Isa;

/// A weight matrix: `rows` rows of `cols` elements of type `ty`, stored row
/// after row (ggml's layout: `cols` is `ne[0]`).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// Element type.
    pub ty: GgmlType,
    /// Number of rows (output features).
    pub rows: usize,
    /// Elements per row (input features).
    pub cols: usize,
    /// The raw bytes, `rows * row_bytes(ty, cols)` long.
    pub data: &'a [u8],
    /// How the rows are arranged in `data`.
    pub layout: Layout,
}

/// Products per pool job in `matmul_many`; they wait in a fixed array,
/// so that a step does not allocate.
pub(crate) const MAX_PRODUCTS: usize = 32;

/// One product of several run together (see
/// [`crate::matmul::matmul_many`]): `out[t][r] = dot(w[r], x[t])` for
/// `n_tok` rows of `x`.
pub struct Product<'a> {
    /// The weights.
    pub w: MatRef<'a>,
    /// `n_tok` activation rows of `w.cols` values.
    pub x: &'a [f32],
    /// Activation rows.
    pub n_tok: usize,
    /// `n_tok` rows of `w.rows` outputs.
    pub out: &'a mut [f32],
}

/// The arrangement of a weight matrix's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// ggml's: row after row.
    #[default]
    Rows,
    /// Sixteen rows interleaved per group, as [`crate::packed::pack`]
    /// makes it.
    Packed,
}

/// Bytes taken by `n` elements of type `ty` (a whole number of blocks).
pub fn row_bytes(ty: GgmlType, n: usize) -> Option<usize> {
    let block = ty.block_size() as usize;
    if !n.is_multiple_of(block) {
        return None;
    }
    (n / block).checked_mul(ty.type_size() as usize)
}

/// Scratch space for quantized activations, kept between calls. Stored as
/// `u64` so every activation format is suitably aligned.
#[derive(Default, Debug)]
pub struct ActScratch {
    pub(crate) words: Vec<u64>,
    /// Per activation row, its block scales widened to f32 for the
    /// four-row kernels (see [`crate::dot::scale_table`]); for the
    /// interleaved kernels, the per-block values of [`crate::packed::Acts`].
    pub(crate) table: Vec<f32>,
    /// The interleaved kernels' integer start values.
    pub(crate) init: Vec<i32>,
}

pub(crate) fn bytes_mut(words: &mut Vec<u64>, len: usize) -> &mut [u8] {
    let n = len.div_ceil(8);
    if words.len() < n {
        words.resize(n, 0);
    }
    &mut bytemuck::cast_slice_mut(words.as_mut_slice())[..len]
}

/// Quantizes `n_tok` rows of `cols` activations into `dst` (rows of
/// `a_row` bytes) with `isa`'s quantizers, splitting the rows across
/// threads when there are many.
pub(crate) fn quantize_rows(
    pool: &ThreadPool,
    isa: Isa,
    act: GgmlType,
    x: &[f32],
    cols: usize,
    dst: &mut [u8],
    a_row: usize,
) -> Result<(), KernelError> {
    let n_tok = x.len() / cols;
    if n_tok < 2 * pool.n_threads() {
        for (src, d) in x.chunks_exact(cols).zip(dst.chunks_exact_mut(a_row)) {
            quant::quantize_row_on(isa, act, src, d)?;
        }
        return Ok(());
    }
    let dst_ptr = SharedMut::new(dst.as_mut_ptr());
    let failed = std::sync::atomic::AtomicBool::new(false);
    pool.for_chunks(n_tok, 1, 2, |range| {
        for t in range {
            // SAFETY: row `t` belongs to this chunk alone and lies inside
            // `dst`, which holds `n_tok * a_row` bytes.
            let d = unsafe { std::slice::from_raw_parts_mut(dst_ptr.get().add(t * a_row), a_row) };
            if quant::quantize_row_on(isa, act, &x[t * cols..(t + 1) * cols], d).is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    if failed.into_inner() {
        // Lengths were validated, so this only reports an unsupported
        // activation format, which `quantize_row` names.
        return quant::quantize_row(act, &x[..cols], &mut dst[..a_row]);
    }
    Ok(())
}
