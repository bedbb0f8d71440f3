//! The AVX-512 form of the weighted sum over rows (attention's `Σ p_j v_j`):
//! sixteen f32 lanes per instruction instead of eight, with the same
//! separate multiply and add per element and row, in row order, so the
//! bits are those of the scalar and AVX2 loops.

use std::arch::x86_64::*;

use super::Rows;

/// Sixteen row elements as f32.
pub(super) trait Load16: Sized {
    /// # Safety
    /// The CPU has AVX-512 F (and F16C for halves); `x` points at sixteen
    /// readable values.
    unsafe fn load16(x: *const Self) -> __m512;
}

impl Load16 for f32 {
    #[inline(always)]
    unsafe fn load16(x: *const f32) -> __m512 {
        // SAFETY: the caller's contract; the load is unaligned.
        unsafe { _mm512_loadu_ps(x) }
    }
}

impl Load16 for u16 {
    #[inline(always)]
    unsafe fn load16(x: *const u16) -> __m512 {
        // SAFETY: the caller's contract; sixteen halves are 32 bytes,
        // converted exactly.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(x.cast())) }
    }
}

/// Whether [`axpy64`] can take the call: outputs a whole number of 64
/// values, one weight per row, every row readable.
pub(super) fn fits<T>(weights: &[f32], rows: &Rows<'_, T>, n: usize) -> bool {
    n > 0
        && n.is_multiple_of(64)
        && weights.len() == rows.idx.len()
        && rows.idx.iter().all(|&i| rows.row(i, n).is_ok())
}

/// `out += Σ_j weights[j] · row_j`, 64 outputs at a time held in four
/// registers over all the rows.
///
/// # Safety
/// The CPU has AVX-512 F and F16C, and [`fits`] holds for the call.
#[target_feature(enable = "avx512f,avx,f16c")]
pub(super) unsafe fn axpy64<T: Load16>(weights: &[f32], rows: Rows<'_, T>, out: &mut [f32]) {
    let n = out.len();
    let mut c0 = 0;
    while c0 < n {
        // SAFETY: the features are the caller's; loads and stores touch
        // sixteen values at `c0 + 16 v < n` of `out` and of each row, which
        // `fits` showed to hold `n` values.
        unsafe {
            let at = |v: usize| c0 + 16 * v;
            let mut acc: [__m512; 4] =
                std::array::from_fn(|v| _mm512_loadu_ps(out.as_ptr().add(at(v))));
            for (&w, &i) in weights.iter().zip(rows.idx) {
                let Ok(r) = rows.row(i, n) else {
                    // Checked by `fits`.
                    continue;
                };
                let wv = _mm512_set1_ps(w);
                for (v, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(wv, T::load16(r.as_ptr().add(at(v)))));
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(at(v)), *a);
            }
        }
        c0 += 64;
    }
}
