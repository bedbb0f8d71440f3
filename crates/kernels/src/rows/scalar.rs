//! The gathered rows the loops run over and the scalar reference loops
//! every path must match bit for bit.

use crate::blocks::f16_to_f32;
use crate::error::KernelError;

/// One f16 value (raw bits) as f32, the scalar reference conversion.
#[inline(always)]
pub(super) fn half_to_f32(x: u16) -> f32 {
    f16_to_f32(x.to_le_bytes())
}

/// Combines eight partial sums in the fixed order shared by every path.
#[inline(always)]
pub(super) fn combine(acc: &[f32; 8]) -> f32 {
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

/// The scalar dot product of `a` with `b` (converted by `conv`), in the
/// order documented on [`dot_f32`]. Both slices must have the same length.
#[inline(always)]
pub(super) fn dot_with<T: Copy>(a: &[f32], b: &[T], conv: impl Fn(T) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..8 {
            acc[l] += x[l] * conv(y[l]);
        }
    }
    for (l, (x, &y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        acc[l] += x * conv(y);
    }
    combine(&acc)
}

/// The scalar scores of [`RowKernels::dot_rows_f32`] and its f16 form,
/// row elements converted by `conv`.
#[inline(always)]
pub(super) fn dot_rows_with<T: Copy>(
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
/// form, row elements converted by `conv`.
#[inline(always)]
pub(super) fn axpy_rows_with<T: Copy>(
    weights: &[f32],
    rows: Rows<'_, T>,
    out: &mut [f32],
    conv: impl Fn(T) -> f32,
) -> Result<(), KernelError> {
    let n = out.len();
    for (&w, &i) in weights.iter().zip(rows.idx) {
        for (o, &x) in out.iter_mut().zip(rows.row(i, n)?) {
            *o += w * conv(x);
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

/// A gathered set of rows of a row-major matrix: row `j` of the set is
/// `data[idx[j] * stride + offset..][..len]`, where the row length `len`
/// comes from the operation (the query's or the output's length).
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a, T> {
    /// The matrix, row after row.
    pub data: &'a [T],
    /// Elements from one row of the matrix to the next.
    pub stride: usize,
    /// Where the wanted part starts inside each row.
    pub offset: usize,
    /// The matrix rows of the set, in order.
    pub idx: &'a [i32],
}

impl<'a, T> Rows<'a, T> {
    /// Whether every row of the set is readable with `len` values, the
    /// precondition of the SIMD loops that skip per-row checks. Row ends
    /// grow with the index, so the smallest index not being negative and
    /// the largest row ending inside `data` covers the set: one check
    /// instead of one per row.
    #[inline]
    pub(super) fn all_readable(&self, len: usize) -> bool {
        let (lo, hi) = self
            .idx
            .iter()
            .fold((i32::MAX, i32::MIN), |(l, h), &i| (l.min(i), h.max(i)));
        self.idx.is_empty() || (lo >= 0 && self.row(hi, len).is_ok())
    }

    /// Row `i` of the matrix, `len` values from the offset.
    #[inline(always)]
    pub(super) fn row(&self, i: i32, len: usize) -> Result<&'a [T], KernelError> {
        let out_of_range = || KernelError::RowOutOfRange {
            row: i.into(),
            len,
            data: self.data.len(),
        };
        let start = usize::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(self.stride))
            .and_then(|s| s.checked_add(self.offset))
            .ok_or_else(out_of_range)?;
        let end = start.checked_add(len).ok_or_else(out_of_range)?;
        self.data.get(start..end).ok_or_else(out_of_range)
    }
}
