//! Row-wise and elementwise kernels. Where llama.cpp's CPU backend fixes an
//! order of operations or a precision (a double accumulator, a float
//! narrowing point), these follow it, so the activations feeding the next
//! quantized matmul are the same values.

use minfer_kernels::RowKernels;

use minfer_graph::{GraphError, Result};

use crate::check::bad_len;

/// Checks that `len` is a whole number of rows of `ne0` values.
fn check_rows(what: &'static str, len: usize, ne0: usize) -> Result<()> {
    if ne0 == 0 || !len.is_multiple_of(ne0) {
        return Err(GraphError::BadInput {
            what,
            msg: format!("{len} values are not whole rows of {ne0}"),
        });
    }
    Ok(())
}

/// RMS normalization of each row of `x` (rows of `ne0`) into `out`:
/// `x / sqrt(mean(x²) + eps)`.
///
/// As ggml: each square is taken in f32 and summed in f64, the mean is
/// narrowed to f32 before `eps` is added, and the row is multiplied by the
/// f32 factor `1 / sqrtf(mean + eps)`.
///
/// # Errors
/// [`GraphError::BadInput`] when `x` is not whole rows or `out` has a
/// different length.
pub fn rms_norm(x: &[f32], ne0: usize, eps: f32, out: &mut [f32]) -> Result<()> {
    check_rows("rms_norm input", x.len(), ne0)?;
    if out.len() != x.len() {
        return Err(bad_len("rms_norm output", x.len(), out.len()));
    }
    for (xr, yr) in x.chunks_exact(ne0).zip(out.chunks_exact_mut(ne0)) {
        let sum: f64 = xr.iter().map(|&v| f64::from(v * v)).sum();
        let mean = (sum / ne0 as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for (y, &v) in yr.iter_mut().zip(xr) {
            *y = v * scale;
        }
    }
    Ok(())
}

/// Applies `f(x, b)` elementwise where `b` is either as long as `x` or one
/// row of `ne0` repeated over `x`'s rows.
fn broadcast(
    what: &'static str,
    x: &mut [f32],
    b: &[f32],
    ne0: usize,
    f: impl Fn(f32, f32) -> f32,
) -> Result<()> {
    check_rows(what, x.len(), ne0)?;
    if b.len() == x.len() {
        for (y, &v) in x.iter_mut().zip(b) {
            *y = f(*y, v);
        }
    } else if b.len() == ne0 {
        for row in x.chunks_exact_mut(ne0) {
            for (y, &v) in row.iter_mut().zip(b) {
                *y = f(*y, v);
            }
        }
    } else {
        return Err(GraphError::BadInput {
            what,
            msg: format!(
                "second operand has {} values; expected {} or one row of {ne0}",
                b.len(),
                x.len()
            ),
        });
    }
    Ok(())
}

/// `x += b`, with `b` either the same length as `x` or one row of `ne0`
/// broadcast over every row.
///
/// # Errors
/// [`GraphError::BadInput`] for any other length, or when `x` is not whole
/// rows of `ne0`.
pub fn add_inplace(x: &mut [f32], b: &[f32], ne0: usize) -> Result<()> {
    broadcast("add", x, b, ne0, |a, b| a + b)
}

/// `x *= b` elementwise, with the broadcast rule of [`add_inplace`].
///
/// # Errors
/// As [`add_inplace`].
pub fn mul_inplace(x: &mut [f32], b: &[f32], ne0: usize) -> Result<()> {
    broadcast("mul", x, b, ne0, |a, b| a * b)
}

/// `x *= s`.
pub fn scale_inplace(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// `x = tanh(x)`, as ggml's `ggml_vec_tanh_f32` (the C library's `tanhf`).
pub fn tanh_inplace(x: &mut [f32]) {
    for v in x {
        *v = v.tanh();
    }
}

pub use minfer_kernels::gelu::gelu_tanh;

/// `gate_out = gelu(gate_out) * up`, GELU as ggml's CPU backend computes
/// it (rounded through f16, see [`minfer_kernels::gelu`]), so that gemma's
/// FFN rounds as llama.cpp's. The direct reference, one value at a time;
/// the executor runs [`RowKernels::geglu`], which the kernel tests check
/// against it.
///
/// # Errors
/// [`GraphError::BadInput`] when the two lengths differ.
pub fn geglu_inplace(gate_out: &mut [f32], up: &[f32]) -> Result<()> {
    if up.len() != gate_out.len() {
        return Err(bad_len("geglu up", gate_out.len(), up.len()));
    }
    for (g, &u) in gate_out.iter_mut().zip(up) {
        *g = minfer_kernels::gelu::gelu_f16(*g) * u;
    }
    Ok(())
}

/// Softmax of each row of `ne0` values, in place, as ggml's `soft_max`
/// without mask: the row's max is subtracted, the exponentials are summed
/// in f64, and the row is scaled by `1 / sum` narrowed to f32 (see
/// [`RowKernels::softmax`]).
///
/// # Errors
/// [`GraphError::BadInput`] when `x` is not whole rows of `ne0`.
pub fn softmax_inplace(rows: RowKernels, x: &mut [f32], ne0: usize) -> Result<()> {
    check_rows("softmax", x.len(), ne0)?;
    for row in x.chunks_exact_mut(ne0) {
        rows.softmax(row);
    }
    Ok(())
}
