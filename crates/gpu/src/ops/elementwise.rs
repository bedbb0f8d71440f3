//! Elementwise and row-wise f32 ops: RMS norm, add and mul (with one-row
//! broadcast), scale, SiLU, tanh, SwiGLU, GeGLU and softmax.
//!
//! Each op computes what the CPU backend computes, in its order of
//! operations, so that the values feeding the next quantized product are
//! the same:
//! - add, mul and scale are single IEEE operations: the CPU's bits;
//! - SiLU, SwiGLU and softmax use the CPU's exp (glibc's expf algorithm),
//!   its f64 steps carried in double-f32; tanh and GeGLU the C library's
//!   tanhf (fdlibm's f32 code, step for step); divisions and square roots
//!   are corrected to the IEEE result (Vulkan allows 2.5 ulp);
//! - the f64 sums of RMS norm and softmax are double-f32 sums (about 48
//!   bits) in a fixed order that depends on the row length alone.
//!
//! On lavapipe every op gives the CPU's bits on every test input
//! (millions of values, exp and tanh on sampled bit patterns of their
//! whole range). Differences remain possible where the CPU's f64 value
//! and the double-f32 one fall on different sides of an f32 rounding
//! midpoint (estimated under one value in 10^5), with a C library whose
//! tanhf is not fdlibm's (recent glibc releases take CORE-MATH's
//! correctly rounded one: then 1 ulp on a fraction of tanh values), and
//! on devices that flush subnormal values to zero. WGSL's own `exp` and `tanh` are far
//! from this: on lavapipe 64 and 2,048 ulp from the CPU at worst.
//!
//! Why each step is written as it is (in particular why every float
//! result passes through `opq`: Mesa's compiler otherwise rewrites
//! `(a + b) - a` into `b`, which silently undoes compensated sums) is
//! said in `shaders/ew_*.wgsl`; `tests/ops_elementwise.rs` measures the
//! differences.
//!
//! Elementwise kernels run one value per invocation over a 2-D grid of
//! 256-lane workgroups ([`groups_for`]), so `n` may pass 65,535 × 256; row
//! kernels run one 256-lane workgroup per row (a grid over x and y past
//! 65,535 rows).

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch, Kernel};
use crate::ops::groups_for;
use crate::Gpu;
use std::sync::Arc;

/// Which binary op [`binary_inplace`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a * b`.
    Mul,
}

/// Lanes per workgroup of every kernel here (`WG` in ew_common.wgsl).
const WG: u64 = 256;

/// The shared part every kernel is compiled with.
macro_rules! ew_source {
    ($($file:literal),*) => {
        concat!(include_str!("../shaders/ew_common.wgsl"), $(include_str!($file)),*)
    };
}

/// A flat kernel (one value per invocation): the shared part, the files
/// given (the last defines `apply`) and the shared entry point.
macro_rules! ew_flat_source {
    ($($file:literal),*) => {
        ew_source!($($file,)* "../shaders/ew_flat_main.wgsl")
    };
}

const SRC_BINARY: &str = ew_flat_source!("../shaders/ew_binary.wgsl");
const SRC_SCALE: &str = ew_flat_source!("../shaders/ew_scale.wgsl");
const SRC_SILU: &str = ew_flat_source!(
    "../shaders/ew_expf.wgsl",
    "../shaders/ew_silu_fn.wgsl",
    "../shaders/ew_silu.wgsl"
);
const SRC_SWIGLU: &str = ew_flat_source!(
    "../shaders/ew_expf.wgsl",
    "../shaders/ew_silu_fn.wgsl",
    "../shaders/ew_swiglu.wgsl"
);
const SRC_TANH: &str = ew_flat_source!("../shaders/ew_tanhf.wgsl", "../shaders/ew_tanh.wgsl");
const SRC_GEGLU: &str = ew_flat_source!("../shaders/ew_tanhf.wgsl", "../shaders/ew_geglu.wgsl");
const SRC_RMS_NORM: &str = ew_source!("../shaders/ew_rms_norm.wgsl");
const SRC_SOFTMAX: &str = ew_source!("../shaders/ew_expf.wgsl", "../shaders/ew_softmax.wgsl");

/// The uniform block of ew_common.wgsl: `n, ne0, rows, op, f, zero` and
/// padding. `zero` must stay 0: the shaders OR it into values to keep the
/// driver from fusing or rewriting their float operations.
fn params(n: u32, ne0: u32, rows: u32, op: u32, f: f32) -> Vec<u32> {
    vec![n, ne0, rows, op, f.to_bits(), 0, 0, 0]
}

/// Bytes `r` binds.
fn bound_bytes(r: &BufRange) -> u64 {
    r.size
        .unwrap_or_else(|| r.buffer.size().saturating_sub(r.offset))
}

/// Checks that `r` holds `values` f32 and that they fit one binding.
fn check(gpu: &Gpu, what: &str, r: &BufRange, values: u64) -> Result<()> {
    let need = values * 4;
    let have = bound_bytes(r);
    if have < need {
        return Err(GpuError::Buffer {
            what: what.to_string(),
            msg: format!("{values} f32 values need {need} bytes, the range binds {have}"),
        });
    }
    if need > gpu.max_binding() {
        return Err(GpuError::Buffer {
            what: what.to_string(),
            msg: format!(
                "{need} bytes, the device's largest binding is {}",
                gpu.max_binding()
            ),
        });
    }
    Ok(())
}

/// Checks a row shape: `ne0` > 0 and `ne0 * rows` within u32.
fn rows_len(what: &str, ne0: u32, rows: u32) -> Result<u32> {
    if ne0 == 0 {
        return Err(GpuError::Buffer {
            what: what.to_string(),
            msg: "rows of 0 values".into(),
        });
    }
    ne0.checked_mul(rows).ok_or_else(|| GpuError::Buffer {
        what: what.to_string(),
        msg: format!("{rows} rows of {ne0} values pass 2^32"),
    })
}

/// One elementwise dispatch of `kernel` over `n` values.
fn flat(kernel: Arc<Kernel>, p: Vec<u32>, buffers: Vec<BufRange>, n: u32) -> Vec<Dispatch> {
    vec![Dispatch {
        kernel,
        params: p,
        buffers,
        groups: groups_for(u64::from(n), WG),
    }]
}

/// `out[r] = x[r] / sqrt(mean(x[r]²) + eps)` for `rows` rows of `ne0`.
///
/// `x` and `out` are different buffers (or disjoint ranges).
///
/// # Errors
/// [`GpuError::Buffer`] when a range is too short or `ne0` is 0;
/// [`GpuError::Shader`] if the kernel does not compile.
pub fn rms_norm(
    gpu: &Gpu,
    x: &BufRange,
    out: &BufRange,
    ne0: u32,
    rows: u32,
    eps: f32,
) -> Result<Vec<Dispatch>> {
    let n = rows_len("rms_norm", ne0, rows)?;
    check(gpu, "rms_norm input", x, n.into())?;
    check(gpu, "rms_norm output", out, n.into())?;
    if rows == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![Dispatch {
        kernel: gpu.kernel("ew_rms_norm", SRC_RMS_NORM)?,
        params: params(n, ne0, rows, 0, eps),
        buffers: vec![x.clone(), out.clone()],
        groups: groups_for(rows.into(), 1),
    }])
}

/// `a = a (op) b` over `rows` rows of `ne0`; `b` has `b_rows` rows, which
/// is 1 (broadcast over every row of `a`) or `rows`.
///
/// `b` must be a different buffer from `a` (it is bound read-only).
///
/// # Errors
/// [`GpuError::Buffer`] for another `b_rows`, a short range or `ne0` 0;
/// [`GpuError::Shader`] if the kernel does not compile.
pub fn binary_inplace(
    gpu: &Gpu,
    op: BinaryOp,
    a: &BufRange,
    b: &BufRange,
    ne0: u32,
    rows: u32,
    b_rows: u32,
) -> Result<Vec<Dispatch>> {
    let n = rows_len("add/mul", ne0, rows)?;
    if b_rows != 1 && b_rows != rows {
        return Err(GpuError::Buffer {
            what: "add/mul second operand".into(),
            msg: format!("{b_rows} rows; expected 1 or {rows}"),
        });
    }
    check(gpu, "add/mul first operand", a, n.into())?;
    check(
        gpu,
        "add/mul second operand",
        b,
        u64::from(ne0) * u64::from(b_rows),
    )?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let code = match op {
        BinaryOp::Add => 0,
        BinaryOp::Mul => 1,
    };
    Ok(flat(
        gpu.kernel("ew_binary", SRC_BINARY)?,
        params(n, ne0, b_rows, code, 0.0),
        vec![a.clone(), b.clone()],
        n,
    ))
}

/// An in-place unary kernel over `n` values.
fn unary(
    gpu: &Gpu,
    name: &'static str,
    src: &str,
    x: &BufRange,
    n: u32,
    f: f32,
) -> Result<Vec<Dispatch>> {
    check(gpu, name, x, n.into())?;
    if n == 0 {
        return Ok(Vec::new());
    }
    Ok(flat(
        gpu.kernel(name, src)?,
        params(n, n, 1, 0, f),
        vec![x.clone()],
        n,
    ))
}

/// An in-place gated kernel `gate = f(gate) * up` over `n` values.
fn gated(
    gpu: &Gpu,
    name: &'static str,
    src: &str,
    gate: &BufRange,
    up: &BufRange,
    n: u32,
) -> Result<Vec<Dispatch>> {
    check(gpu, name, gate, n.into())?;
    check(gpu, name, up, n.into())?;
    if n == 0 {
        return Ok(Vec::new());
    }
    Ok(flat(
        gpu.kernel(name, src)?,
        params(n, n, 1, 0, 0.0),
        vec![gate.clone(), up.clone()],
        n,
    ))
}

/// `x = x * s` over `n` values.
///
/// # Errors
/// [`GpuError::Buffer`] when `x` is too short; [`GpuError::Shader`] if the
/// kernel does not compile.
pub fn scale_inplace(gpu: &Gpu, x: &BufRange, n: u32, s: f32) -> Result<Vec<Dispatch>> {
    unary(gpu, "ew_scale", SRC_SCALE, x, n, s)
}

/// `x = x * sigmoid(x)` over `n` values.
///
/// # Errors
/// As [`scale_inplace`].
pub fn silu_inplace(gpu: &Gpu, x: &BufRange, n: u32) -> Result<Vec<Dispatch>> {
    unary(gpu, "ew_silu", SRC_SILU, x, n, 0.0)
}

/// `x = tanh(x)` over `n` values.
///
/// # Errors
/// As [`scale_inplace`].
pub fn tanh_inplace(gpu: &Gpu, x: &BufRange, n: u32) -> Result<Vec<Dispatch>> {
    unary(gpu, "ew_tanh", SRC_TANH, x, n, 0.0)
}

/// `gate = silu(gate) * up` over `n` values (`up` a different buffer).
///
/// # Errors
/// As [`scale_inplace`], for either range.
pub fn swiglu_inplace(gpu: &Gpu, gate: &BufRange, up: &BufRange, n: u32) -> Result<Vec<Dispatch>> {
    gated(gpu, "ew_swiglu", SRC_SWIGLU, gate, up, n)
}

/// `gate = gelu(gate) * up` over `n` values, GELU as the CPU backend
/// computes it (ggml's f16 table: input and result rounded to f16).
///
/// # Errors
/// As [`scale_inplace`], for either range.
pub fn geglu_inplace(gpu: &Gpu, gate: &BufRange, up: &BufRange, n: u32) -> Result<Vec<Dispatch>> {
    gated(gpu, "ew_geglu", SRC_GEGLU, gate, up, n)
}

/// Softmax of each of `rows` rows of `ne0`, in place.
///
/// # Errors
/// [`GpuError::Buffer`] when `x` is too short or `ne0` is 0;
/// [`GpuError::Shader`] if the kernel does not compile.
pub fn softmax_inplace(gpu: &Gpu, x: &BufRange, ne0: u32, rows: u32) -> Result<Vec<Dispatch>> {
    let n = rows_len("softmax", ne0, rows)?;
    check(gpu, "softmax", x, n.into())?;
    if rows == 0 {
        return Ok(Vec::new());
    }
    Ok(vec![Dispatch {
        kernel: gpu.kernel("ew_softmax", SRC_SOFTMAX)?,
        params: params(n, ne0, rows, 0, 0.0),
        buffers: vec![x.clone()],
        groups: groups_for(rows.into(), 1),
    }])
}
