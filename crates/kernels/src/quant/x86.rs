//! The activation quantizers (Q8_0, Q8_1, Q8_K) on AVX2 and AVX-512: the
//! bytes of the scalar ones in `super::act`, block for block.
//!
//! Every product of a prefill quantizes its activations first, and the
//! scalar loops (a serial max with a branch per value for Q8_K) took a
//! twelfth of a 512-token prefill. The vector forms keep each rule:
//!
//! - the largest magnitude is a max reduction, which for finite values
//!   does not depend on the order; Q8_K's signed extreme is the value at
//!   the first lane that equals it, the one the scalar scan keeps;
//! - `v * id` and `iscale * v` are the same single roundings, then rounded
//!   half to even (`cvtps2dq` in the default mode, which is what the
//!   scalar magic-number rounding computes for these magnitudes, under
//!   128);
//! - the casts: Q8_0's saturating `as i8` is a saturating pack, Q8_K's
//!   `min(127)` then `as i8` the same pack (the quants are never below
//!   -127);
//! - the sums (Q8_1's `s`, Q8_K's `bsums`) are integer sums, exact in any
//!   order.
//!
//! A block with a NaN or an infinity goes to the scalar code, whose max
//! and casts define what such a block gets.

use std::arch::x86_64::*;

use crate::blocks::{f32_to_f16, BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K};
use crate::dot::x86::hsum_i32;

/// The exponent bits of an f32: all set for NaN and the infinities.
const EXP: i32 = 0x7F80_0000;

/// Whether every lane of `v` is finite.
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn finite16(v: __m512) -> bool {
    // SAFETY: registers only; the caller's features.
    unsafe {
        let e = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(EXP));
        _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(EXP)) == 0
    }
}

/// Sixteen values rounded half to even, as i32.
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn round16(v: __m512) -> __m512i {
    // SAFETY: registers only; the caller's features.
    unsafe { _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v) }
}

/// The Q8_0 (`SUM = false`) or Q8_1 quants of one block of 32 values:
/// the quants, `amax / 127` and the sum of the rounded values; `None`
/// when a value is not finite.
///
/// # Safety
/// AVX-512 F and BW; `x` holds at least [`QK`] values.
#[inline(always)]
unsafe fn block32_512(x: &[f32], qs: &mut [i8; QK]) -> Option<(f32, i32)> {
    // SAFETY: `x` holds 32 values and `qs` 32 bytes; the caller's features.
    unsafe {
        let p = x.as_ptr();
        let (a, b) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
        if !(finite16(a) && finite16(b)) {
            return None;
        }
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
        let d = amax / 127.0;
        let id = _mm512_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let qa = round16(_mm512_mul_ps(a, id));
        let qb = round16(_mm512_mul_ps(b, id));
        let q = qs.as_mut_ptr() as *mut __m128i;
        _mm_storeu_si128(q, _mm512_cvtsepi32_epi8(qa));
        _mm_storeu_si128(q.add(1), _mm512_cvtsepi32_epi8(qb));
        Some((d, _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb))))
    }
}

/// [`super::act::quantize_row_q8_0`] on AVX-512, the same bytes.
///
/// # Safety
/// The CPU has AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn q8_0_512(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK values; the caller's features.
        match unsafe { block32_512(x, &mut y.qs) } {
            Some((d, _)) => y.d = f32_to_f16(d),
            None => super::act::quantize_row_q8_0(x, std::slice::from_mut(y)),
        }
    }
}

/// [`super::act::quantize_row_q8_1`] on AVX-512, the same bytes.
///
/// # Safety
/// The CPU has AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn q8_1_512(src: &[f32], dst: &mut [BlockQ8_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK values; the caller's features.
        match unsafe { block32_512(x, &mut y.qs) } {
            Some((d, sum)) => {
                y.d = f32_to_f16(d);
                y.s = f32_to_f16(d * sum as f32);
            }
            None => super::act::quantize_row_q8_1(x, std::slice::from_mut(y)),
        }
    }
}

/// [`super::act::quantize_row_q8_k`] on AVX-512, the same bytes.
///
/// # Safety
/// The CPU has AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn q8_k_512(src: &[f32], dst: &mut [BlockQ8K]) {
    const N: usize = QK_K / 16;
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK_K = 16 * N values, `qs` QK_K bytes;
        // the caller's features.
        unsafe {
            let p = x.as_ptr();
            let v: [__m512; N] = std::array::from_fn(|i| _mm512_loadu_ps(p.add(16 * i)));
            let mut m = _mm512_setzero_ps();
            let mut finite = true;
            for v in &v {
                finite &= finite16(*v);
                m = _mm512_max_ps(m, _mm512_abs_ps(*v));
            }
            let amax = _mm512_reduce_max_ps(m);
            if !finite || amax == 0.0 {
                super::act::quantize_row_q8_k(x, std::slice::from_mut(y));
                continue;
            }
            let at = _mm512_set1_ps(amax);
            let first = v.iter().enumerate().find_map(|(i, v)| {
                let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(*v), at);
                (hit != 0).then(|| 16 * i + hit.trailing_zeros() as usize)
            });
            // The max is one of the lanes, so some lane equals it.
            let max = x[first.unwrap_or(0)];
            let iscale = -127.0 / max;
            let s = _mm512_set1_ps(iscale);
            let q = y.qs.as_mut_ptr() as *mut __m128i;
            for (i, v) in v.iter().enumerate() {
                let r = _mm512_min_epi32(round16(_mm512_mul_ps(s, *v)), _mm512_set1_epi32(127));
                _mm_storeu_si128(q.add(i), _mm512_cvtsepi32_epi8(r));
                y.bsums[i] = _mm512_reduce_add_epi32(r) as i16;
            }
            y.d = 1.0 / iscale;
        }
    }
}

/// Whether every lane of `v` is finite.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn finite8(v: __m256) -> bool {
    // SAFETY: registers only; the caller's features.
    unsafe {
        let e = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(EXP));
        _mm256_movemask_epi8(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(EXP))) == 0
    }
}

/// `|v|`.
///
/// # Safety
/// AVX.
#[inline(always)]
unsafe fn abs8(v: __m256) -> __m256 {
    // SAFETY: registers only; the caller's features.
    unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), v) }
}

/// The largest lane of `v` (no NaNs).
///
/// # Safety
/// AVX.
#[inline(always)]
unsafe fn hmax8(v: __m256) -> f32 {
    // SAFETY: registers only; the caller's features.
    unsafe {
        let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_movehdup_ps(m));
        _mm_cvtss_f32(m)
    }
}

/// Eight values rounded half to even, as i32.
///
/// # Safety
/// AVX.
#[inline(always)]
unsafe fn round8(v: __m256) -> __m256i {
    // SAFETY: registers only; the caller's features (the default rounding
    // mode is to nearest, ties to even).
    unsafe { _mm256_cvtps_epi32(v) }
}

/// 32 i32 values packed to i8 with signed saturation, in order.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn pack32(q: [__m256i; 4]) -> __m256i {
    // SAFETY: registers only; the caller's features.
    unsafe {
        // The packs work per 128-bit lane, which leaves the four groups of
        // four in the order 0, 2, 4, 6, 1, 3, 5, 7: the permute undoes it.
        let lo = _mm256_packs_epi32(q[0], q[1]);
        let hi = _mm256_packs_epi32(q[2], q[3]);
        let b = _mm256_packs_epi16(lo, hi);
        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }
}

/// [`block32_512`] on AVX2.
///
/// # Safety
/// AVX2; `x` holds at least [`QK`] values.
#[inline(always)]
unsafe fn block32_256(x: &[f32], qs: &mut [i8; QK]) -> Option<(f32, i32)> {
    // SAFETY: `x` holds 32 values and `qs` 32 bytes; the caller's features.
    unsafe {
        let p = x.as_ptr();
        let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(p.add(8 * i)));
        if !v.iter().all(|v| finite8(*v)) {
            return None;
        }
        let m = v
            .iter()
            .fold(_mm256_setzero_ps(), |m, v| _mm256_max_ps(m, abs8(*v)));
        let amax = hmax8(m);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        let q: [__m256i; 4] = std::array::from_fn(|i| round8(_mm256_mul_ps(v[i], id)));
        _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, pack32(q));
        let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        Some((d, hsum_i32(sum)))
    }
}

/// [`super::act::quantize_row_q8_0`] on AVX2, the same bytes.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn q8_0_256(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK values; the caller's features.
        match unsafe { block32_256(x, &mut y.qs) } {
            Some((d, _)) => y.d = f32_to_f16(d),
            None => super::act::quantize_row_q8_0(x, std::slice::from_mut(y)),
        }
    }
}

/// [`super::act::quantize_row_q8_1`] on AVX2, the same bytes.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn q8_1_256(src: &[f32], dst: &mut [BlockQ8_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK values; the caller's features.
        match unsafe { block32_256(x, &mut y.qs) } {
            Some((d, sum)) => {
                y.d = f32_to_f16(d);
                y.s = f32_to_f16(d * sum as f32);
            }
            None => super::act::quantize_row_q8_1(x, std::slice::from_mut(y)),
        }
    }
}

/// [`super::act::quantize_row_q8_k`] on AVX2, the same bytes.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn q8_k_256(src: &[f32], dst: &mut [BlockQ8K]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        // SAFETY: the chunk holds QK_K values, read eight at a time below
        // QK_K; `qs` holds QK_K bytes; the caller's features.
        unsafe {
            let p = x.as_ptr();
            let mut m = _mm256_setzero_ps();
            let mut finite = true;
            for i in (0..QK_K).step_by(8) {
                let v = _mm256_loadu_ps(p.add(i));
                finite &= finite8(v);
                m = _mm256_max_ps(m, abs8(v));
            }
            let amax = hmax8(m);
            if !finite || amax == 0.0 {
                super::act::quantize_row_q8_k(x, std::slice::from_mut(y));
                continue;
            }
            let at = _mm256_set1_ps(amax);
            let first = (0..QK_K).step_by(8).find_map(|i| {
                let v = abs8(_mm256_loadu_ps(p.add(i)));
                let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, at));
                (hit != 0).then(|| i + hit.trailing_zeros() as usize)
            });
            // The max is one of the values, so some lane equals it.
            let max = x[first.unwrap_or(0)];
            let iscale = -127.0 / max;
            let s = _mm256_set1_ps(iscale);
            let top = _mm256_set1_epi32(127);
            for (g, out) in y.qs.chunks_exact_mut(32).enumerate() {
                let q: [__m256i; 4] = std::array::from_fn(|i| {
                    let v = _mm256_loadu_ps(p.add(32 * g + 8 * i));
                    _mm256_min_epi32(round8(_mm256_mul_ps(s, v)), top)
                });
                _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, pack32(q));
                y.bsums[2 * g] = hsum_i32(_mm256_add_epi32(q[0], q[1])) as i16;
                y.bsums[2 * g + 1] = hsum_i32(_mm256_add_epi32(q[2], q[3])) as i16;
            }
            y.d = 1.0 / iscale;
        }
    }
}
