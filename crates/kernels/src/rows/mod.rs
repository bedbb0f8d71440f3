//! Rows of f16 values (raw IEEE half bits, as a half-precision KV cache
//! stores them) and of f32 values: bulk conversion between the two, and
//! the two loops attention runs over a cache, the scores of one query
//! against a gathered set of rows and the weighted sum of such rows.
//!
//! Every routine has a scalar reference and an x86 path that converts eight
//! halves per instruction (F16C) and does eight f32 lanes per instruction
//! (AVX); the weighted sum also has a sixteen-lane AVX-512 form. All give
//! the same bits:
//! - f16 → f32 is exact;
//! - f32 → f16 rounds to nearest even in both (checked against a
//!   bit-level reference by the tests);
//! - the dot products keep eight partial sums, lane `l` taking the
//!   elements `l, l + 8, …`, combined in the fixed order of
//!   [`dot_f32`]; every step is one fused multiply-add (`f32::mul_add`
//!   in the scalar code, `vfmadd` in the vector code);
//! - the weighted sums fuse each step too, one rounding per row and
//!   element, in row order;
//!
//! which on Intel's cores, where multiplies and adds share the FMA ports,
//! halves the arithmetic of both; so vector and scalar code round
//! identically. The scalar code is the reference and the fallback: where
//! the build has no FMA, its `mul_add` is a libm call.
//!
//! NaN stays NaN on both paths; its payload is not part of the contract.
//!
//! The path is a [`RowKernels`] value, chosen once and passed around; the
//! free functions use [`RowKernels::detect`], which probes the CPU on first
//! use only.

use std::sync::OnceLock;

mod base;
mod cols;
mod heads;

use base::{combine, half_to_f32};
pub use base::{RowKernels, Rows};
pub use heads::HeadRows;
#[cfg(target_arch = "x86_64")]
mod pairs;
#[cfg(target_arch = "x86_64")]
mod wide;

use crate::blocks::{f32_to_f16, BlockQ8_0, QK};
use crate::error::{check_len, KernelError};
use crate::simd::SimdLevel;

/// The scalar dot product of `a` with `b` (converted by `conv`), in the
/// order documented on [`dot_f32`]. Both slices must have the same length.
#[inline(always)]
fn dot_with<T: Copy>(a: &[f32], b: &[T], conv: impl Fn(T) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..8 {
            acc[l] = x[l].mul_add(conv(y[l]), acc[l]);
        }
    }
    for (l, (x, &y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        acc[l] = x.mul_add(conv(y), acc[l]);
    }
    combine(&acc)
}

/// The scalar scores of [`RowKernels::dot_rows_f32`] and its f16 form,
/// row elements converted by `conv`.
#[inline(always)]
fn dot_rows_with<T: Copy>(
    q: &[f32],
    rows: Rows<'_, T>,
    scale: f32,
    scores: &mut [f32],
    conv: impl Fn(T) -> f32 + Copy,
) -> Result<(), KernelError> {
    for (s, &i) in scores.iter_mut().zip(rows.idx) {
        *s = scale * dot_with(q, rows.row(i, q.len())?, conv);
    }
    Ok(())
}

/// The scalar weighted sum of [`RowKernels::axpy_rows_f32`] and its f16
/// form, row elements converted by `conv`: one fused multiply-add per
/// element and row (a libm call where the build has no FMA: this is the
/// reference and the fallback, not the fast path).
#[inline(always)]
fn axpy_rows_with<T: Copy>(
    weights: &[f32],
    rows: Rows<'_, T>,
    out: &mut [f32],
    conv: impl Fn(T) -> f32,
) -> Result<(), KernelError> {
    let n = out.len();
    for (&w, &i) in weights.iter().zip(rows.idx) {
        for (o, &x) in out.iter_mut().zip(rows.row(i, n)?) {
            *o = w.mul_add(conv(x), *o);
        }
    }
    Ok(())
}

/// f32 dot product with eight independent partial sums: lane `l` adds
/// `a[i] * b[i]` for `i = l, l + 8, …` in increasing `i`, and the lanes are
/// combined as `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`. The
/// result depends only on the inputs, and the compiler keeps the partial
/// sums in vector registers. Only the first `min(a.len(), b.len())`
/// elements are used.
///
/// This is the scalar reference of [`RowKernels::dot_rows_f32`] and
/// [`RowKernels::dot_rows_f16`].
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    dot_with(&a[..n], &b[..n], |x| x)
}

/// Whether the CPU has what the SIMD path needs (AVX2, FMA and F16C).
fn simd_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU also has AVX-512 F, for the 16-lane weighted sum.
fn wide_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        simd_supported() && is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl RowKernels {
    /// The portable reference path.
    pub const SCALAR: RowKernels = RowKernels {
        simd: false,
        wide: false,
    };

    /// The fastest path of this CPU. The CPU is probed on the first call
    /// only; later calls read a cached value.
    pub fn detect() -> Self {
        static DETECTED: OnceLock<RowKernels> = OnceLock::new();
        *DETECTED.get_or_init(|| RowKernels {
            simd: simd_supported(),
            wide: wide_supported(),
        })
    }

    /// The path of an instruction set chosen at start-up (validated
    /// against the CPU, so its flags hold).
    pub fn for_isa(isa: crate::Isa) -> Self {
        RowKernels {
            simd: isa.avx2(),
            wide: isa.avx512(),
        }
    }

    /// The path of `level` on this CPU, through [`crate::Isa`]: the scalar
    /// reference for [`SimdLevel::Scalar`], AVX2 without AVX-512 for
    /// [`SimdLevel::Avx2`]; a level the CPU lacks gives the best it has.
    pub fn for_level(level: SimdLevel) -> Self {
        Self::for_isa(crate::Isa::new(level).unwrap_or_else(|_| crate::Isa::detect()))
    }

    /// Every path this CPU supports, scalar first (for tests and
    /// benchmarks).
    pub fn supported() -> Vec<Self> {
        let mut v = vec![Self::SCALAR];
        let best = Self::detect();
        if best.simd {
            v.push(RowKernels {
                wide: false,
                ..best
            });
        }
        if best.wide {
            v.push(best);
        }
        v
    }

    /// Whether this is the SIMD path.
    pub fn is_simd(self) -> bool {
        self.simd
    }

    /// Whether this is the AVX-512 path, the one whose 32 registers let
    /// [`dot_cols_heads`](RowKernels::dot_cols_heads) score sixteen rows
    /// for several heads at once: on it, widening a block into columns
    /// pays for itself once a few queries read the block; on AVX2 (sixteen
    /// registers, eight rows of one head at a time) the column loop is no
    /// faster than the row loops.
    pub fn is_wide(self) -> bool {
        self.wide
    }

    /// Converts f16 bits to f32 (exact).
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when the lengths differ; nothing is
    /// written then.
    pub fn f16_to_f32(self, src: &[u16], dst: &mut [f32]) -> Result<(), KernelError> {
        check_len("f16 to f32 row", src.len(), dst.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is only set when the CPU has AVX2, FMA and F16C.
            unsafe { x86::f16_to_f32(src, dst) };
            return Ok(());
        }
        for (y, &x) in dst.iter_mut().zip(src) {
            *y = half_to_f32(x);
        }
        Ok(())
    }

    /// Decodes Q8_0 blocks to f32, `32 * blocks.len()` values (or fewer
    /// whole blocks if `dst` is shorter): each value the exact product
    /// `q * d` of [`crate::dequant::dequantize_q8_0`], eight or sixteen at
    /// a time.
    pub fn q8_0_to_f32(self, blocks: &[BlockQ8_0], dst: &mut [f32]) {
        let n = blocks.len().min(dst.len() / QK);
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is only set when the CPU has AVX2, FMA and F16C
            // (and `wide` when it has AVX-512 F too); `n` blocks fit `dst`.
            unsafe { x86::q8_0_to_f32(&blocks[..n], &mut dst[..n * QK], self.wide) };
            return;
        }
        crate::dequant::dequantize_q8_0(&blocks[..n], dst);
    }

    /// Converts f32 to f16 bits, rounding to nearest even.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when the lengths differ; nothing is
    /// written then.
    pub fn f32_to_f16(self, src: &[f32], dst: &mut [u16]) -> Result<(), KernelError> {
        check_len("f32 to f16 row", src.len(), dst.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_to_f32`.
            unsafe { x86::f32_to_f16(src, dst) };
            return Ok(());
        }
        for (y, &x) in dst.iter_mut().zip(src) {
            *y = u16::from_le_bytes(f32_to_f16(x));
        }
        Ok(())
    }

    /// `gate = silu(gate) * up` (see [`crate::activation`]), as far as the
    /// shorter slice reaches.
    pub fn swiglu(self, gate: &mut [f32], up: &[f32]) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is only set when the CPU has AVX2 and FMA.
            unsafe { crate::activation::x86::swiglu(gate, up) };
            return;
        }
        crate::activation::swiglu_scalar(gate, up);
    }

    /// `gate = gelu(gate) * up` with GELU rounded through f16 as ggml's
    /// CPU backend does (see [`crate::gelu`]), as far as the shorter slice
    /// reaches.
    pub fn geglu(self, gate: &mut [f32], up: &[f32]) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is only set when the CPU has AVX2, FMA and F16C.
            unsafe { crate::gelu::x86::geglu(gate, up) };
            return;
        }
        crate::gelu::geglu_scalar(gate, up);
    }

    /// `x = silu(x)` (see [`crate::activation`]).
    pub fn silu(self, x: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `swiglu`.
            unsafe { crate::activation::x86::silu(x) };
            return;
        }
        crate::activation::silu_scalar(x);
    }

    /// Softmax of one row in place, with glibc's `expf` (see
    /// [`crate::softmax::softmax_scalar`] for the order of the sums).
    pub fn softmax(self, row: &mut [f32]) {
        self.softmax_with::<crate::softmax::Exact>(row);
    }

    /// [`softmax`](RowKernels::softmax) with attention's exponential
    /// ([`crate::softmax::poly_exp`]).
    pub fn attn_softmax(self, row: &mut [f32]) {
        self.softmax_with::<crate::softmax::Poly>(row);
    }

    fn softmax_with<E: crate::softmax::Exp>(self, row: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2 and FMA.
            unsafe { crate::softmax::x86_512::softmax::<E>(row) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `swiglu`.
            unsafe { crate::softmax::x86::softmax::<E>(row) };
            return;
        }
        crate::softmax::softmax_scalar::<E>(row);
    }

    /// `scores[j] = scale * dot(q, row j)` for every row of `rows`, each
    /// row `q.len()` long and each dot product as [`dot_f32`] computes it.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when `scores` is not one value per row,
    /// [`KernelError::RowOutOfRange`] when a row is negative or reaches
    /// past `rows.data`; the scores before that row are written.
    pub fn dot_rows_f32(
        self,
        q: &[f32],
        rows: Rows<'_, f32>,
        scale: f32,
        scores: &mut [f32],
    ) -> Result<(), KernelError> {
        check_len("row scores", rows.idx.len(), scores.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_to_f32`.
            return unsafe { x86::dot_rows_f32(q, rows, scale, scores) };
        }
        dot_rows_with(q, rows, scale, scores, |x| x)
    }

    /// As [`dot_rows_f32`](RowKernels::dot_rows_f32) over rows of f16 bits,
    /// each converted exactly to f32 first.
    ///
    /// # Errors
    /// As [`dot_rows_f32`](RowKernels::dot_rows_f32).
    pub fn dot_rows_f16(
        self,
        q: &[f32],
        rows: Rows<'_, u16>,
        scale: f32,
        scores: &mut [f32],
    ) -> Result<(), KernelError> {
        check_len("row scores", rows.idx.len(), scores.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_to_f32`.
            return unsafe { x86::dot_rows_f16(q, rows, scale, scores) };
        }
        dot_rows_with(q, rows, scale, scores, half_to_f32)
    }

    /// `out[e] += weights[j] * row_j[e]` for every row of `rows` in order,
    /// each row `out.len()` long: one multiply and one add per element and
    /// row, so the sum for each element runs over the rows in order.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when `weights` is not one value per row,
    /// [`KernelError::RowOutOfRange`] when a row is negative or reaches
    /// past `rows.data`; the rows before that one have been added.
    pub fn axpy_rows_f32(
        self,
        weights: &[f32],
        rows: Rows<'_, f32>,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        check_len("row weights", rows.idx.len(), weights.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.wide && wide::fits(weights, &rows, out.len()) {
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2 and F16C; `fits` is the loop's bounds contract.
            unsafe { wide::axpy64(weights, rows, out) };
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_to_f32`.
            return unsafe { x86::axpy_rows_f32(weights, rows, out) };
        }
        axpy_rows_with(weights, rows, out, |x| x)
    }

    /// As [`axpy_rows_f32`](RowKernels::axpy_rows_f32) over rows of f16
    /// bits, each converted exactly to f32 first.
    ///
    /// # Errors
    /// As [`axpy_rows_f32`](RowKernels::axpy_rows_f32).
    pub fn axpy_rows_f16(
        self,
        weights: &[f32],
        rows: Rows<'_, u16>,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        check_len("row weights", rows.idx.len(), weights.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.wide && wide::fits(weights, &rows, out.len()) {
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2 and F16C; `fits` is the loop's bounds contract.
            unsafe { wide::axpy64(weights, rows, out) };
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_to_f32`.
            return unsafe { x86::axpy_rows_f16(weights, rows, out) };
        }
        axpy_rows_with(weights, rows, out, half_to_f32)
    }
}

/// Converts f16 bits to f32 (exact) on the fastest path of this CPU; see
/// [`RowKernels::f16_to_f32`].
///
/// # Errors
/// [`KernelError::BadLength`] when the lengths differ.
#[inline]
pub fn f16_to_f32_row(src: &[u16], dst: &mut [f32]) -> Result<(), KernelError> {
    RowKernels::detect().f16_to_f32(src, dst)
}

/// Converts f32 to f16 bits, rounding to nearest even, on the fastest path
/// of this CPU; see [`RowKernels::f32_to_f16`].
///
/// # Errors
/// [`KernelError::BadLength`] when the lengths differ.
#[inline]
pub fn f32_to_f16_row(src: &[f32], dst: &mut [u16]) -> Result<(), KernelError> {
    RowKernels::detect().f32_to_f16(src, dst)
}

/// The AVX + F16C path.
#[cfg(target_arch = "x86_64")]
mod x86;
