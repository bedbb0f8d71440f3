//! Elementwise and row-wise f32 ops: RMS norm, add and mul (with one-row
//! broadcast), scale, SiLU, tanh, SwiGLU, GeGLU and softmax.

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::Gpu;

/// Which binary op [`binary_inplace`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a * b`.
    Mul,
}

/// `out[r] = x[r] / sqrt(mean(x[r]²) + eps)` for `rows` rows of `ne0`.
pub fn rms_norm(
    _gpu: &Gpu,
    _x: &BufRange,
    _out: &BufRange,
    _ne0: u32,
    _rows: u32,
    _eps: f32,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("rms_norm".into()))
}

/// `a = a (op) b` over `rows` rows of `ne0`; `b` has `b_rows` rows, which
/// is 1 (broadcast over every row of `a`) or `rows`.
pub fn binary_inplace(
    _gpu: &Gpu,
    _op: BinaryOp,
    _a: &BufRange,
    _b: &BufRange,
    _ne0: u32,
    _rows: u32,
    _b_rows: u32,
) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("add/mul".into()))
}

/// `x = x * s` over `n` values.
pub fn scale_inplace(_gpu: &Gpu, _x: &BufRange, _n: u32, _s: f32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("scale".into()))
}

/// `x = x * sigmoid(x)` over `n` values.
pub fn silu_inplace(_gpu: &Gpu, _x: &BufRange, _n: u32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("silu".into()))
}

/// `x = tanh(x)` over `n` values.
pub fn tanh_inplace(_gpu: &Gpu, _x: &BufRange, _n: u32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("tanh".into()))
}

/// `gate = silu(gate) * up` over `n` values.
pub fn swiglu_inplace(_gpu: &Gpu, _gate: &BufRange, _up: &BufRange, _n: u32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("swiglu".into()))
}

/// `gate = gelu(gate) * up` over `n` values, GELU as the CPU backend
/// computes it.
pub fn geglu_inplace(_gpu: &Gpu, _gate: &BufRange, _up: &BufRange, _n: u32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("geglu".into()))
}

/// Softmax of each of `rows` rows of `ne0`, in place.
pub fn softmax_inplace(_gpu: &Gpu, _x: &BufRange, _ne0: u32, _rows: u32) -> Result<Vec<Dispatch>> {
    Err(GpuError::Unsupported("softmax".into()))
}
