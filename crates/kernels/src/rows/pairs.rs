//! The AVX2 forms of the multi-head attention loops: two heads per call,
//! which is what sixteen 256-bit registers hold. Each row chunk is loaded
//! and converted once for both heads, and each head gets exactly the
//! one-head loops' operations (see `super::heads`).

use std::arch::x86_64::*;

use super::base::Rows;
use super::x86::{far, prefetch_row, AHEAD};

/// Eight halves at `p` as f32.
///
/// # Safety
/// The CPU has AVX and F16C; eight values are readable at `p`.
#[inline(always)]
unsafe fn load8(p: *const u16) -> __m256 {
    // SAFETY: the caller's contract; an unaligned 16-byte load, widened
    // exactly.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
}

/// Scores of two query heads (`qs`, `hd` values each) against the rows,
/// eight rows at a time, into `scores[g * stride + j]`; per row and head,
/// lane `l` sums `q[c + l] * row[c + l]` over `c` in steps of eight (a
/// fused multiply-add) and the lanes are combined by the shared tree.
/// The rows are taken four at a time so that both heads' sums fit the
/// registers. Returns how many rows (a multiple of eight) it scored.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `hd` is a positive multiple of eight,
/// `qs` holds `2 * hd` values, every row is readable with `hd` values,
/// and `scores` holds `stride + rows.idx.len()` values.
#[target_feature(enable = "avx,avx2,fma,f16c")]
pub(super) unsafe fn dot_pair(
    qs: &[f32],
    hd: usize,
    rows: &Rows<'_, u16>,
    scale: f32,
    scores: &mut [f32],
    stride: usize,
) -> usize {
    let n8 = rows.idx.len() / 8 * 8;
    for j0 in (0..n8).step_by(8) {
        // SAFETY: the features are the caller's; every row is readable with
        // `hd` values and the loads read eight values at `c < hd` of a row
        // or of a head of `qs`; the stores write eight scores at
        // `g * stride + j0`, inside `scores`.
        unsafe {
            let r: [*const u16; 8] = std::array::from_fn(|k| {
                rows.row(rows.idx[j0 + k], hd)
                    .map_or(std::ptr::null(), <[u16]>::as_ptr)
            });
            if far(rows) {
                for k in 0..8 {
                    prefetch_row(rows, j0 + AHEAD + k, hd);
                }
            }
            let mut sums = [[_mm256_setzero_ps(); 8]; 2];
            for quad in 0..2 {
                let mut acc = [[_mm256_setzero_ps(); 4]; 2];
                for c in (0..hd).step_by(8) {
                    let k: [__m256; 4] = std::array::from_fn(|p| load8(r[4 * quad + p].add(c)));
                    for (g, acc) in acc.iter_mut().enumerate() {
                        let q = _mm256_loadu_ps(qs.as_ptr().add(g * hd + c));
                        for (a, k) in acc.iter_mut().zip(&k) {
                            *a = _mm256_fmadd_ps(q, *k, *a);
                        }
                    }
                }
                for (s, acc) in sums.iter_mut().zip(&acc) {
                    s[4 * quad..4 * quad + 4].copy_from_slice(acc);
                }
            }
            for (g, s) in sums.iter().enumerate() {
                let v = _mm256_mul_ps(_mm256_set1_ps(scale), super::x86::combine8(*s));
                _mm256_storeu_ps(scores.as_mut_ptr().add(g * stride + j0), v);
            }
        }
    }
    n8
}

/// `outs[g] += Σ_j weights[g * stride + j] · row_j` for two heads (`outs`
/// holds two heads of `hd` values), 32 outputs of each head at a time:
/// each row chunk is converted once for both, and each output element gets
/// the one-head loop's fused multiply-add per row, in row order.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `hd` is a positive multiple of 32,
/// every row is readable with `hd` values, `outs` holds `2 * hd` values and
/// `weights` holds `stride + rows.idx.len()`.
#[target_feature(enable = "avx,avx2,fma,f16c")]
pub(super) unsafe fn axpy_pair(
    weights: &[f32],
    stride: usize,
    rows: &Rows<'_, u16>,
    outs: &mut [f32],
    hd: usize,
) {
    for c0 in (0..hd).step_by(32) {
        // SAFETY: the features are the caller's; loads and stores touch
        // eight values at `c0 + 8 v < hd` of a row or of a head of `outs`;
        // the weight reads at `g * stride + j` lie inside `weights`.
        unsafe {
            let at = |g: usize, v: usize| g * hd + c0 + 8 * v;
            let mut acc: [[__m256; 4]; 2] = std::array::from_fn(|g| {
                std::array::from_fn(|v| _mm256_loadu_ps(outs.as_ptr().add(at(g, v))))
            });
            // The first pass over the rows asks for the rows ahead.
            let ahead = c0 == 0 && far(rows);
            for (j, &i) in rows.idx.iter().enumerate() {
                if ahead {
                    prefetch_row(rows, j + AHEAD, hd);
                }
                let Ok(r) = rows.row(i, hd) else {
                    // Checked by the caller.
                    continue;
                };
                let x: [__m256; 4] = std::array::from_fn(|v| load8(r.as_ptr().add(c0 + 8 * v)));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let w = _mm256_set1_ps(*weights.get_unchecked(g * stride + j));
                    for (a, x) in acc.iter_mut().zip(&x) {
                        *a = _mm256_fmadd_ps(w, *x, *a);
                    }
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                for (v, a) in acc.iter().enumerate() {
                    _mm256_storeu_ps(outs.as_mut_ptr().add(at(g, v)), *a);
                }
            }
        }
    }
}
