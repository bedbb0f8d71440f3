//! AVX-512 dot products, with a VNNI variant of each (`vpdpbusd` replaces
//! the `maddubs` + `madd` pair) chosen once when the CPU has it.
//!
//! Legacy types process two blocks per 512-bit register; the K-quants keep
//! 256-bit registers (their sub-block scales change every 32 quants) and
//! gain from VNNI and the wider register file. Results are bit-exact with
//! the scalar reference for the same reason as on AVX2: the integer sums
//! are exact and the float operations are the reference's.

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::scalar::{self, k_combine, Acc4};
use crate::blocks::*;

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

/// Unsigned × signed bytes, four neighbouring products per i32 lane.
#[inline(always)]
unsafe fn dot_u8i8_512<const VNNI: bool>(x: __m512i, y: __m512i) -> __m512i {
    if VNNI {
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y)
    } else {
        _mm512_madd_epi16(_mm512_maddubs_epi16(x, y), _mm512_set1_epi16(1))
    }
}

/// Signed × signed bytes (activations never hold -128).
#[inline(always)]
unsafe fn dot_i8_512<const VNNI: bool>(x: __m512i, y: __m512i) -> __m512i {
    let ax = _mm512_abs_epi8(x);
    let neg = _mm512_movepi8_mask(x);
    let sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    dot_u8i8_512::<VNNI>(ax, sy)
}

#[inline(always)]
unsafe fn dot_u8i8_256<const VNNI: bool>(x: __m256i, y: __m256i) -> __m256i {
    if VNNI {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y)
    } else {
        _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
    }
}

#[inline(always)]
unsafe fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

#[inline(always)]
unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
    let b = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
    let m = _mm_set1_epi8(0x0F);
    _mm256_set_m128i(
        _mm_and_si128(_mm_srli_epi16::<4>(b), m),
        _mm_and_si128(b, m),
    )
}

#[inline(always)]
unsafe fn q5_bytes(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    let bits = _mm256_movm_epi8(u32::from_le_bytes(qh));
    _mm256_or_si256(nibbles(qs), _mm256_and_si256(bits, _mm256_set1_epi8(0x10)))
}

#[inline(always)]
unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

#[inline(always)]
unsafe fn block_totals(p01: __m512i, p23: __m512i) -> __m128i {
    let (p0, p1) = (
        _mm512_castsi512_si256(p01),
        _mm512_extracti64x4_epi64::<1>(p01),
    );
    let (p2, p3) = (
        _mm512_castsi512_si256(p23),
        _mm512_extracti64x4_epi64::<1>(p23),
    );
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// The legacy-type driver: `pair(i)` gives the lanes of blocks `i` and
/// `i + 1` in one register.
#[inline(always)]
unsafe fn legacy_driver(
    nb: usize,
    pair: impl Fn(usize) -> __m512i,
    scales: impl Fn(usize) -> (F16Bits, F16Bits),
    extra: Option<&dyn Fn(usize) -> (F16Bits, F16Bits)>,
    tail: impl Fn(usize) -> f32,
) -> f32 {
    let mut acc = _mm_setzero_ps();
    let groups = nb / 4;
    for g in 0..groups {
        let i = 4 * g;
        let tot = block_totals(pair(i), pair(i + 2));
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

#[inline(always)]
unsafe fn q4_0<const V: bool>(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let eight = _mm512_set1_epi8(8);
    legacy_driver(
        w.len(),
        |i| {
            let x = _mm512_sub_epi8(join(nibbles(&w[i].qs), nibbles(&w[i + 1].qs)), eight);
            dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
        },
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q4_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[inline(always)]
unsafe fn q4_1<const V: bool>(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    legacy_driver(
        w.len(),
        |i| {
            let x = join(nibbles(&w[i].qs), nibbles(&w[i + 1].qs));
            dot_u8i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
        },
        |i| (w[i].d, a[i].d),
        Some(&|i| (w[i].m, a[i].s)),
        |i| scalar::dot_q4_1(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[inline(always)]
unsafe fn q5_0<const V: bool>(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let sixteen = _mm512_set1_epi8(16);
    legacy_driver(
        w.len(),
        |i| {
            let x = join(
                q5_bytes(&w[i].qs, w[i].qh),
                q5_bytes(&w[i + 1].qs, w[i + 1].qh),
            );
            let x = _mm512_sub_epi8(x, sixteen);
            dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
        },
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q5_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[inline(always)]
unsafe fn q8_0<const V: bool>(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    legacy_driver(
        w.len(),
        |i| {
            let x = join(load32(&w[i].qs), load32(&w[i + 1].qs));
            dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
        },
        |i| (w[i].d, a[i].d),
        None,
        |i| scalar::dot_q8_0(&w[i..i + 1], &a[i..i + 1]),
    )
}

#[inline(always)]
fn q45k_msum(scales: &[u8; 12], y: &BlockQ8K) -> (i32, [i32; 8]) {
    let mut msum = 0i32;
    let mut sc = [0i32; 8];
    for (j, s) in sc.iter_mut().enumerate() {
        let (scale, m) = k_scale_min(j, scales);
        *s = scale as i32;
        msum += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
    }
    (msum, sc)
}

/// One 32-quant sub-block product scaled by `scale`, added to `sumi`.
#[inline(always)]
unsafe fn scaled<const V: bool>(sumi: __m256i, q: __m256i, y: *const i8, scale: i32) -> __m256i {
    let yv = _mm256_loadu_si256(y as *const __m256i);
    let p = dot_u8i8_256::<V>(q, yv);
    _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, _mm256_set1_epi32(scale)))
}

#[inline(always)]
unsafe fn q4_k<const V: bool>(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (msum, sc) = q45k_msum(&x.scales, y);
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * j) as *const __m256i);
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            sumi = scaled::<V>(sumi, lo, y.qs.as_ptr().add(64 * j), sc[2 * j]);
            sumi = scaled::<V>(sumi, hi, y.qs.as_ptr().add(64 * j + 32), sc[2 * j + 1]);
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

#[inline(always)]
unsafe fn q5_k<const V: bool>(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
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
            sumi = scaled::<V>(sumi, lo, y.qs.as_ptr().add(64 * j), sc[2 * j]);
            sumi = scaled::<V>(sumi, hi, y.qs.as_ptr().add(64 * j + 32), sc[2 * j + 1]);
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

#[inline(always)]
unsafe fn q6_k<const V: bool>(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
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
                let p = dot_u8i8_256::<V>(*qk, yv);
                // Lanes 0-3 belong to sub-block `sub`, lanes 4-7 to `sub + 1`.
                let s = _mm256_set_m128i(
                    _mm_set1_epi32(x.scales[sub + 1] as i32),
                    _mm_set1_epi32(x.scales[sub] as i32),
                );
                sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, s));
            }
        }
        let isum = hsum_i32(sumi) - 32 * offset;
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, isum, 0.0, 0);
    }
    acc
}

macro_rules! variants {
    ($name:ident, $vnni:ident, $body:ident, $wt:ty, $at:ty) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$wt], a: &[$at]) -> f32 {
            $body::<false>(w, a)
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub unsafe fn $vnni(w: &[$wt], a: &[$at]) -> f32 {
            $body::<true>(w, a)
        }
    };
}

variants!(dot_q4_0, dot_q4_0_vnni, q4_0, BlockQ4_0, BlockQ8_0);
variants!(dot_q4_1, dot_q4_1_vnni, q4_1, BlockQ4_1, BlockQ8_1);
variants!(dot_q5_0, dot_q5_0_vnni, q5_0, BlockQ5_0, BlockQ8_0);
variants!(dot_q8_0, dot_q8_0_vnni, q8_0, BlockQ8_0, BlockQ8_0);
variants!(dot_q4_k, dot_q4_k_vnni, q4_k, BlockQ4K, BlockQ8K);
variants!(dot_q5_k, dot_q5_k_vnni, q5_k, BlockQ5K, BlockQ8K);
variants!(dot_q6_k, dot_q6_k_vnni, q6_k, BlockQ6K, BlockQ8K);
