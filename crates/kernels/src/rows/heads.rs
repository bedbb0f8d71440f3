//! The attention loops for several query heads that read the same rows
//! (the heads of one KV group): every head gets exactly what the one-head
//! routines give it, but each row is loaded and converted once for up to
//! four heads (AVX-512; eight for the weighted sum, 32 outputs of each at
//! a time) or two (AVX2), and the heads' running sums are independent
//! chains that keep the vector units busy where one head's sums would wait
//! on each other.

use super::base::{check_spaced, RowKernels, Rows};
use crate::error::KernelError;

/// Heads one call of the wide kernels takes (four heads' sums fill 16 of
/// the 32 AVX-512 registers).
const MAX_HEADS: usize = 4;

/// Heads one call of the weighted sum takes when a group has more than
/// [`MAX_HEADS`]: 32 outputs of eight heads fill 16 registers.
const WIDE_HEADS: usize = 8;

/// Calls `$f::<$t, H>($args)` with the const head count `H` equal to
/// `$n`: one of the listed counts, or the last for any other. The wide
/// kernels take the head count as a const so that each head's sums stay in
/// registers.
#[cfg(target_arch = "x86_64")]
macro_rules! by_heads {
    ($t:ty, $n:expr, [$($h:literal),+; $last:literal], $f:ident $args:tt) => {
        match $n {
            $($h => $f::<$t, $h> $args,)+
            _ => $f::<$t, $last> $args,
        }
    };
}

/// Checks the shapes shared by the multi-head loops and returns the head
/// count: `values` is whole heads of `hd` values, and each head's `n`
/// per-row values lie `stride` apart in a buffer of `spaced` values.
pub(super) fn check_heads(
    values: usize,
    hd: usize,
    n: usize,
    stride: usize,
    spaced: usize,
) -> Result<usize, KernelError> {
    if hd == 0 || !values.is_multiple_of(hd) {
        let hd = hd.max(1);
        return Err(KernelError::BadLength {
            what: "whole heads",
            expected: values / hd * hd + hd,
            got: values,
        });
    }
    if stride < n {
        return Err(KernelError::BadLength {
            what: "per-head stride",
            expected: n,
            got: stride,
        });
    }
    let heads = values / hd;
    check_spaced("per-head buffer", heads, stride, n, spaced)?;
    Ok(heads)
}

/// Whether every row of `rows` is readable with `n` values: what lets the
/// SIMD loops skip per-row checks.
#[cfg(target_arch = "x86_64")]
fn readable<T>(rows: &Rows<'_, T>, n: usize) -> bool {
    rows.all_readable(n)
}

impl RowKernels {
    /// Scores of several query heads against the same rows: for head `g`
    /// of `qs` (heads of `hd` values, one after another),
    /// `scores[g * stride + j] = scale * dot(q_g, row_j)`, bit for bit what
    /// [`dot_rows_f16`](RowKernels::dot_rows_f16) gives that head.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when `qs` is not whole heads, `stride`
    /// is shorter than the rows or `scores` cannot hold every head's;
    /// [`KernelError::RowOutOfRange`] as for the one-head routine.
    pub fn dot_rows_f16_heads(
        self,
        qs: &[f32],
        hd: usize,
        rows: Rows<'_, u16>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        let heads = check_heads(qs.len(), hd, rows.idx.len(), stride, scores.len())?;
        let n = rows.idx.len();
        // Heads `..covered` have their rows `..done` scored already.
        let (mut covered, mut done) = (0, 0);
        #[cfg(target_arch = "x86_64")]
        if self.simd && !self.wide && hd.is_multiple_of(8) && readable(&rows, hd) {
            covered = heads / 2 * 2;
            for (c, q) in qs[..covered * hd].chunks_exact(2 * hd).enumerate() {
                let s = &mut scores[c * 2 * stride..];
                // SAFETY: `simd` is only set when the CPU has AVX2 and F16C;
                // the shapes were checked above and every row is readable.
                done = unsafe { super::pairs::dot_pair(q, hd, &rows, scale, s, stride) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(d) = self.dot_heads_wide(qs, hd, &rows, scale, scores, stride) {
            (covered, done) = (heads, d);
        }
        for g in 0..heads {
            let from = if g < covered { done } else { 0 };
            let rest = Rows {
                idx: &rows.idx[from..],
                ..rows
            };
            let s = &mut scores[g * stride + from..g * stride + n];
            self.dot_rows_f16(&qs[g * hd..(g + 1) * hd], rest, scale, s)?;
        }
        Ok(())
    }

    /// The AVX-512 scores of every head of `qs` over `rows`, as far as the
    /// wide kernel goes: the rows it scored (the same for every head), or
    /// `None` when this path or the shapes do not fit it. The shapes were
    /// checked by [`check_heads`].
    #[cfg(target_arch = "x86_64")]
    fn dot_heads_wide<T: super::wide::LoadPair>(
        self,
        qs: &[f32],
        hd: usize,
        rows: &Rows<'_, T>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Option<usize> {
        if !(self.wide && hd.is_multiple_of(8) && readable(rows, hd)) {
            return None;
        }
        let mut done = 0;
        for (c, q) in qs.chunks(MAX_HEADS * hd).enumerate() {
            let s = &mut scores[c * MAX_HEADS * stride..];
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2 and F16C; the caller checked the shapes and every row is
            // readable.
            done = unsafe {
                use super::wide::dot_heads;
                by_heads!(T, q.len() / hd, [1, 2, 3; 4], dot_heads(q, hd, rows, scale, s, stride))
            };
        }
        Some(done)
    }

    /// The weighted sums of several heads over the same rows: for head `g`
    /// of `outs` (heads of `hd` values, one after another),
    /// `out_g += Σ_j weights[g * stride + j] · row_j`, bit for bit what
    /// [`axpy_rows_f16`](RowKernels::axpy_rows_f16) gives that head.
    ///
    /// # Errors
    /// As [`dot_rows_f16_heads`](RowKernels::dot_rows_f16_heads), with
    /// `weights` in the place of the scores.
    pub fn axpy_rows_f16_heads(
        self,
        weights: &[f32],
        stride: usize,
        rows: Rows<'_, u16>,
        outs: &mut [f32],
        hd: usize,
    ) -> Result<(), KernelError> {
        let heads = check_heads(outs.len(), hd, rows.idx.len(), stride, weights.len())?;
        let n = rows.idx.len();
        #[cfg(target_arch = "x86_64")]
        if heads > MAX_HEADS && self.axpy_heads_wide(weights, stride, &rows, outs, hd) {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if self.wide && hd.is_multiple_of(64) && readable(&rows, hd) {
            for (c, o) in outs.chunks_mut(MAX_HEADS * hd).enumerate() {
                let w = &weights[c * MAX_HEADS * stride..];
                // SAFETY: as in `dot_rows_f16_heads`.
                unsafe {
                    use super::wide::axpy_heads;
                    by_heads!(u16, o.len() / hd, [1, 2, 3; 4], axpy_heads(w, stride, &rows, o, hd))
                }
            }
            return Ok(());
        }
        let mut covered = 0;
        #[cfg(target_arch = "x86_64")]
        if self.simd && hd.is_multiple_of(32) && readable(&rows, hd) {
            covered = heads / 2 * 2;
            for (c, o) in outs[..covered * hd].chunks_exact_mut(2 * hd).enumerate() {
                let w = &weights[c * 2 * stride..];
                // SAFETY: as in `dot_rows_f16_heads`.
                unsafe { super::pairs::axpy_pair(w, stride, &rows, o, hd) };
            }
        }
        for g in covered..heads {
            let w = &weights[g * stride..g * stride + n];
            self.axpy_rows_f16(w, rows, &mut outs[g * hd..(g + 1) * hd])?;
        }
        Ok(())
    }

    /// The AVX-512 weighted sum of up to eight heads a pass
    /// ([`axpy_heads32`](super::wide::axpy_heads32)), when this path has
    /// AVX-512 and the shapes fit it; `false` leaves the call to the
    /// caller's loops. The shapes were checked by [`check_heads`].
    #[cfg(target_arch = "x86_64")]
    fn axpy_heads_wide<T: super::wide::Load16>(
        self,
        weights: &[f32],
        stride: usize,
        rows: &Rows<'_, T>,
        outs: &mut [f32],
        hd: usize,
    ) -> bool {
        if !(self.wide && hd.is_multiple_of(32) && readable(rows, hd)) {
            return false;
        }
        for (c, o) in outs.chunks_mut(WIDE_HEADS * hd).enumerate() {
            let w = &weights[c * WIDE_HEADS * stride..];
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2 and F16C; the caller checked the shapes and every row is
            // readable with `hd` values.
            unsafe {
                use super::wide::axpy_heads32;
                by_heads!(T, o.len() / hd, [1, 2, 3, 4, 5, 6, 7; 8], axpy_heads32(w, stride, rows, o, hd))
            }
        }
        true
    }
}

/// The element types of the rows the multi-head loops read (raw f16 bits
/// and f32), so that attention is written once over both.
pub trait HeadRows: Copy {
    /// [`RowKernels::dot_rows_f16_heads`] for rows of this type.
    ///
    /// # Errors
    /// As [`RowKernels::dot_rows_f16_heads`].
    fn dot_heads(
        rk: RowKernels,
        qs: &[f32],
        hd: usize,
        rows: Rows<'_, Self>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError>;

    /// [`RowKernels::axpy_rows_f16_heads`] for rows of this type.
    ///
    /// # Errors
    /// As [`RowKernels::axpy_rows_f16_heads`].
    fn axpy_heads(
        rk: RowKernels,
        weights: &[f32],
        stride: usize,
        rows: Rows<'_, Self>,
        outs: &mut [f32],
        hd: usize,
    ) -> Result<(), KernelError>;

    /// Whether a value is narrower than f32 (f16), so that widening a
    /// block of rows once for several queries saves each of them the
    /// conversion.
    const NARROW: bool;

    /// The rows of `rows` (`hd` values each) as f32, one after another
    /// from the start of `out`. Exact.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when `out` cannot hold them;
    /// [`KernelError::RowOutOfRange`] when a row is negative or reaches
    /// past `rows.data`.
    fn widen_rows(
        rk: RowKernels,
        rows: Rows<'_, Self>,
        hd: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError>;

    /// [`RowKernels::f16_cols`] for rows of this type.
    ///
    /// # Errors
    /// As [`RowKernels::f16_cols`].
    fn cols(
        rk: RowKernels,
        rows: Rows<'_, Self>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> Result<(), KernelError>;
}

impl HeadRows for u16 {
    const NARROW: bool = true;

    fn widen_rows(
        rk: RowKernels,
        rows: Rows<'_, u16>,
        hd: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        widen_with(rows, hd, out, |src, dst| rk.f16_to_f32(src, dst))
    }

    fn dot_heads(
        rk: RowKernels,
        qs: &[f32],
        hd: usize,
        rows: Rows<'_, u16>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        rk.dot_rows_f16_heads(qs, hd, rows, scale, scores, stride)
    }

    fn axpy_heads(
        rk: RowKernels,
        weights: &[f32],
        stride: usize,
        rows: Rows<'_, u16>,
        outs: &mut [f32],
        hd: usize,
    ) -> Result<(), KernelError> {
        rk.axpy_rows_f16_heads(weights, stride, rows, outs, hd)
    }

    fn cols(
        rk: RowKernels,
        rows: Rows<'_, u16>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> Result<(), KernelError> {
        rk.f16_cols(rows, hd, cols, ld)
    }
}

/// f32 rows (an f32 cache, the exact reference layout, a block of f16
/// rows widened once for several queries, or one of Q8_0 rows decoded
/// once): scored and summed several heads at once on AVX-512.
impl HeadRows for f32 {
    const NARROW: bool = false;

    fn widen_rows(
        _: RowKernels,
        rows: Rows<'_, f32>,
        hd: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        widen_with(rows, hd, out, |src, dst| {
            dst.copy_from_slice(src);
            Ok(())
        })
    }

    fn dot_heads(
        rk: RowKernels,
        qs: &[f32],
        hd: usize,
        rows: Rows<'_, f32>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        let n = rows.idx.len();
        let heads = check_heads(qs.len(), hd, n, stride, scores.len())?;
        // Rows `..done` of every head are scored already.
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(d) = rk.dot_heads_wide(qs, hd, &rows, scale, scores, stride) {
            done = d;
        }
        let rest = Rows {
            idx: &rows.idx[done..],
            ..rows
        };
        for g in 0..heads {
            let s = &mut scores[g * stride + done..g * stride + n];
            rk.dot_rows_f32(&qs[g * hd..(g + 1) * hd], rest, scale, s)?;
        }
        Ok(())
    }

    fn axpy_heads(
        rk: RowKernels,
        weights: &[f32],
        stride: usize,
        rows: Rows<'_, f32>,
        outs: &mut [f32],
        hd: usize,
    ) -> Result<(), KernelError> {
        let n = rows.idx.len();
        let heads = check_heads(outs.len(), hd, n, stride, weights.len())?;
        #[cfg(target_arch = "x86_64")]
        if rk.axpy_heads_wide(weights, stride, &rows, outs, hd) {
            return Ok(());
        }
        for g in 0..heads {
            let w = &weights[g * stride..g * stride + n];
            rk.axpy_rows_f32(w, rows, &mut outs[g * hd..(g + 1) * hd])?;
        }
        Ok(())
    }

    fn cols(
        rk: RowKernels,
        rows: Rows<'_, f32>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> Result<(), KernelError> {
        rk.f32_cols(rows, hd, cols, ld)
    }
}

/// Row `j` of `rows` through `conv` into `out[j * hd..][..hd]`, after
/// checking that `out` holds them all.
fn widen_with<T>(
    rows: Rows<'_, T>,
    hd: usize,
    out: &mut [f32],
    conv: impl Fn(&[T], &mut [f32]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    check_spaced("widened rows", rows.idx.len(), hd, hd, out.len())?;
    if hd == 0 {
        return Ok(());
    }
    for (&i, dst) in rows.idx.iter().zip(out.chunks_exact_mut(hd)) {
        conv(rows.row(i, hd)?, dst)?;
    }
    Ok(())
}
