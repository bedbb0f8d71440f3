//! The shared floor of the row routines: the gathered-row view, the path
//! value, the scalar conversion and the fixed combining order. Every
//! sibling (and `mod.rs`) builds on these, so they live below all of them
//! and name none of them.

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
    /// A set of one row, the whole of `data`: a row decoded into a buffer,
    /// handed to the row loops so that it gets their arithmetic.
    pub fn one(data: &'a [T]) -> Self {
        Rows {
            data,
            stride: data.len(),
            offset: 0,
            idx: &[0],
        }
    }

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

/// Checks that `count` runs of `end` values, `step` apart (the last
/// ending at `(count - 1) * step + end`), fit in a buffer of `len` values.
pub(super) fn check_spaced(
    what: &'static str,
    count: usize,
    step: usize,
    end: usize,
    len: usize,
) -> Result<(), KernelError> {
    let need = count.checked_sub(1).map_or(0, |c| c * step + end);
    if len < need {
        return Err(KernelError::BadLength {
            what,
            expected: need,
            got: len,
        });
    }
    Ok(())
}

/// The f16/f32 row routines at one instruction-set path. A value with a
/// SIMD path can only be made on a CPU that supports it, which is what
/// makes its calls sound; every path gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowKernels {
    /// AVX2, FMA and F16C.
    pub(super) simd: bool,
    /// AVX-512 F as well (only with `simd`).
    pub(super) wide: bool,
}
