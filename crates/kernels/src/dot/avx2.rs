//! AVX2 dot products. Each reproduces the arithmetic of its scalar
//! reference in `scalar.rs` exactly (see the module doc there): integer
//! sums per block, then the same float operations in the same order.
//!
//! Every function here requires AVX2, FMA and F16C; the dispatcher only
//! hands them out after checking the CPU.

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::scalar::{self, k_combine, Acc4};
use crate::blocks::*;

/// Four f16 values to f32 (exact).
#[inline(always)]
unsafe fn f16x4(a: F16Bits, b: F16Bits, c: F16Bits, d: F16Bits) -> __m128 {
    let v = _mm_setr_epi16(
        u16::from_le_bytes(a) as i16,
        u16::from_le_bytes(b) as i16,
        u16::from_le_bytes(c) as i16,
        u16::from_le_bytes(d) as i16,
        0,
        0,
        0,
        0,
    );
    _mm_cvtph_ps(v)
}

/// Signed × signed byte dot into eight i32 lanes (each lane the sum of four
/// neighbouring products). `y` must not hold -128, which activations never
/// do: the quantizers produce values in [-127, 127].
#[inline(always)]
unsafe fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let p16 = _mm256_maddubs_epi16(ax, sy);
    _mm256_madd_epi16(p16, _mm256_set1_epi16(1))
}

/// Unsigned × signed byte dot into eight i32 lanes.
#[inline(always)]
unsafe fn dot_u8i8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
}

/// Reduces four blocks' lanes to their four exact totals.
#[inline(always)]
unsafe fn block_totals(p0: __m256i, p1: __m256i, p2: __m256i, p3: __m256i) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// Horizontal sum of eight i32 lanes.
#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// 32 nibbles of a 16-byte block: low nibbles, then high nibbles.
#[inline(always)]
unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
    let b = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
    let m = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(b, m);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), m);
    _mm256_set_m128i(hi, lo)
}

/// Expands 32 bits into 32 bytes, 0xFF where the bit is set.
#[inline(always)]
unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0x0000000000000000,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    let mask = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, mask), _mm256_set1_epi64x(-1))
}

#[inline(always)]
unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// Shared driver of the legacy types: `lanes(i)` gives block `i`'s eight
/// i32 lanes, `scales(i)` its two f16 scales; `extra(i)` an exact addend
/// (the minimum term) or zero. Tail blocks go through `tail(i)` (the
/// scalar per-block contribution) into the same partial sums.
#[inline(always)]
unsafe fn legacy_driver(
    nb: usize,
    lanes: impl Fn(usize) -> __m256i,
    scales: impl Fn(usize) -> (F16Bits, F16Bits),
    extra: Option<&dyn Fn(usize) -> (F16Bits, F16Bits)>,
    tail: impl Fn(usize) -> f32,
) -> f32 {
    let mut acc = _mm_setzero_ps();
    let groups = nb / 4;
    for g in 0..groups {
        let i = 4 * g;
        let tot = block_totals(lanes(i), lanes(i + 1), lanes(i + 2), lanes(i + 3));
        let (a0, b0) = scales(i);
        let (a1, b1) = scales(i + 1);
        let (a2, b2) = scales(i + 2);
        let (a3, b3) = scales(i + 3);
        let d = _mm_mul_ps(f16x4(a0, a1, a2, a3), f16x4(b0, b1, b2, b3));
        let mut v = _mm_mul_ps(d, _mm_cvtepi32_ps(tot));
        if let Some(extra) = extra {
            let (m0, s0) = extra(i);
            let (m1, s1) = extra(i + 1);
            let (m2, s2) = extra(i + 2);
            let (m3, s3) = extra(i + 3);
            v = _mm_add_ps(v, _mm_mul_ps(f16x4(m0, m1, m2, m3), f16x4(s0, s1, s2, s3)));
        }
        acc = _mm_add_ps(acc, v);
    }
    let mut parts = Acc4::default();
    _mm_storeu_ps(parts.0.as_mut_ptr(), acc);
    for i in 4 * groups..nb {
        parts.add(i, tail(i));
    }
    parts.total()
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let eight = _mm256_set1_epi8(8);
    legacy_driver(
        w.len(),
        |i| dot_i8(_mm256_sub_epi8(nibbles(&w[i].qs), eight), load32(&a[i].qs)),
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q4_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_1(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    legacy_driver(
        w.len(),
        |i| dot_u8i8(nibbles(&w[i].qs), load32(&a[i].qs)),
        |i| (w[i].d, a[i].d),
        Some(&|i| (w[i].m, a[i].s)),
        |i| scalar::dot_q4_1(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[inline(always)]
unsafe fn q5_bytes(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    let high = _mm256_and_si256(
        bits_to_bytes(u32::from_le_bytes(qh)),
        _mm256_set1_epi8(0x10),
    );
    _mm256_or_si256(nibbles(qs), high)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let sixteen = _mm256_set1_epi8(16);
    legacy_driver(
        w.len(),
        |i| {
            let x = _mm256_sub_epi8(q5_bytes(&w[i].qs, w[i].qh), sixteen);
            dot_i8(x, load32(&a[i].qs))
        },
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q5_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_1(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    legacy_driver(
        w.len(),
        |i| dot_u8i8(q5_bytes(&w[i].qs, w[i].qh), load32(&a[i].qs)),
        |i| (w[i].d, a[i].d),
        Some(&|i| (w[i].m, a[i].s)),
        |i| scalar::dot_q5_1(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    legacy_driver(
        w.len(),
        |i| dot_i8(load32(&w[i].qs), load32(&a[i].qs)),
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q8_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_iq4_nl(w: &[BlockIQ4NL], a: &[BlockQ8_0]) -> f32 {
    let table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i));
    legacy_driver(
        w.len(),
        |i| {
            let x = _mm256_shuffle_epi8(table, nibbles(&w[i].qs));
            dot_i8(x, load32(&a[i].qs))
        },
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_iq4_nl(&w[i..i + 1], &a[i..i + 1]),
    )
}

/// Sum over eight sub-blocks of `scale * min_sum` for Q4_K/Q5_K.
#[inline(always)]
fn q45k_msum(scales: &[u8; 12], y: &BlockQ8K) -> (i32, [i16; 8]) {
    let mut msum = 0i32;
    let mut sc = [0i16; 8];
    for (j, s) in sc.iter_mut().enumerate() {
        let (scale, m) = k_scale_min(j, scales);
        *s = scale as i16;
        msum += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
    }
    (msum, sc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (msum, sc) = q45k_msum(&x.scales, y);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * j) as *const __m256i);
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            let y0 = _mm256_loadu_si256(y.qs.as_ptr().add(64 * j) as *const __m256i);
            let y1 = _mm256_loadu_si256(y.qs.as_ptr().add(64 * j + 32) as *const __m256i);
            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y1),
                _mm256_set1_epi16(sc[2 * j + 1]),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = k_combine(
            acc,
            f16_to_f32(x.d) * y.d,
            hsum_i32(sumi),
            f16_to_f32(x.dmin) * y.d,
            msum,
        );
    }
    acc
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (msum, sc) = q45k_msum(&x.scales, y);
        let qh = _mm256_loadu_si256(x.qh.as_ptr() as *const __m256i);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * j) as *const __m256i);
            let h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32)), one);
            let h1 = _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32 + 1)),
                one,
            );
            let lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16::<4>(h0));
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4),
                _mm256_slli_epi16::<4>(h1),
            );
            let y0 = _mm256_loadu_si256(y.qs.as_ptr().add(64 * j) as *const __m256i);
            let y1 = _mm256_loadu_si256(y.qs.as_ptr().add(64 * j + 32) as *const __m256i);
            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y1),
                _mm256_set1_epi16(sc[2 * j + 1]),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = k_combine(
            acc,
            f16_to_f32(x.d) * y.d,
            hsum_i32(sumi),
            f16_to_f32(x.dmin) * y.d,
            msum,
        );
    }
    acc
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q6_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        // The -32 offset of every quant is applied once, through the
        // activation sums: sum((q - 32) * y) = sum(q * y) - 32 * sum(y).
        let mut offset = 0i32;
        for (s, b) in x.scales.iter().zip(&y.bsums) {
            offset += *s as i32 * *b as i32;
        }
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(x.ql.as_ptr().add(64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(x.ql.as_ptr().add(64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * n) as *const __m256i);
            let q = [
                _mm256_or_si256(
                    _mm256_and_si256(ql0, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), m2)),
                ),
            ];
            for (k, qk) in q.iter().enumerate() {
                let sub = 8 * n + 2 * k;
                let yv = _mm256_loadu_si256(y.qs.as_ptr().add(16 * sub) as *const __m256i);
                let scales = _mm256_set_m128i(
                    _mm_set1_epi16(x.scales[sub + 1] as i16),
                    _mm_set1_epi16(x.scales[sub] as i16),
                );
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(*qk, yv), scales);
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        let isum = hsum_i32(sumi) - 32 * offset;
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, isum, 0.0, 0);
    }
    acc
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_iq4_xs(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
    let table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i));
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = _mm256_setzero_si256();
        for ib in 0..8 {
            let qs: &[u8; 16] = x.qs[16 * ib..16 * ib + 16].try_into().unwrap_unchecked();
            let v = _mm256_shuffle_epi8(table, nibbles(qs));
            let yv = _mm256_loadu_si256(y.qs.as_ptr().add(32 * ib) as *const __m256i);
            let p = dot_i8(v, yv);
            let s = _mm256_set1_epi32(scalar::iq4xs_scale(x, ib));
            sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, s));
        }
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, hsum_i32(sumi), 0.0, 0);
    }
    acc
}

/// Float dot with eight FMA lanes (not bit-exact with the scalar order).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f32(w: &[f32], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let x = _mm256_loadu_ps(w.as_ptr().add(i + 8 * k));
            let y = _mm256_loadu_ps(a.as_ptr().add(i + 8 * k));
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    let mut sum = hsum_f32(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    for j in i..n {
        sum += w[j] * a[j];
    }
    sum
}

/// f16 weights × f32 activations with FMA lanes.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16(w: &[F16Bits], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let h = _mm_loadu_si128(w.as_ptr().add(i + 8 * k) as *const __m128i);
            let x = _mm256_cvtph_ps(h);
            let y = _mm256_loadu_ps(a.as_ptr().add(i + 8 * k));
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 16;
    }
    let mut sum = hsum_f32(_mm256_add_ps(acc[0], acc[1]));
    for j in i..n {
        sum += f16_to_f32(w[j]) * a[j];
    }
    sum
}

#[inline(always)]
unsafe fn hsum_f32(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}
