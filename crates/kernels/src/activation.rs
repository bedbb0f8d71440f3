//! `exp`, SiLU and SwiGLU with one definition for every path.
//!
//! The exponential is the algorithm of glibc's `expf` (ARM's optimized
//! routines: `x · 32/ln 2` split into an integer and a remainder in f64, a
//! 32-entry table of `2^(i/32)`, a cubic polynomial, one rounding to f32),
//! with the fused multiply-adds of glibc's FMA build, so it gives the
//! C library's bits: checked against glibc's `expf` on all 2^32 inputs.
//! That keeps the results of the libm calls it replaces, while the SIMD
//! form computes eight at a time. Every step is an IEEE operation or a
//! fused multiply-add, so the scalar code here and the SIMD code give the
//! same bits; the tests compare them. The softmax has an exponential of
//! its own (see [`crate::softmax`]).

/// `2^(i/32)` as f64 bits, minus `i << 52 >> 5` (glibc's `__exp2f_data`).
const TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];
/// `32 / ln 2`.
const INV_LN2_N: f64 = f64::from_bits(0x3ff7_1547_652b_82fe) * 32.0;
/// `1.5 · 2^52`: adding it rounds an f64 to an integer.
const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// The polynomial, scaled for the 32-step table.
const C0: f64 = f64::from_bits(0x3fac_6af8_4b91_2394) / 32768.0;
const C1: f64 = f64::from_bits(0x3fce_bfce_50fa_c4f3) / 1024.0;
const C2: f64 = f64::from_bits(0x3fe6_2e42_ff0c_52d6) / 32.0;
/// Above this, `e^x` overflows f32 (`log(2^128)`, rounded down).
const OVERFLOW: f32 = f32::from_bits(0x42b1_7217);
/// Below this, `e^x` rounds to zero (`log(2^-150)`, rounded up).
const UNDERFLOW: f32 = f32::from_bits(0xc2cf_f1b4);
/// The top 12 bits of |x| from which the special cases are checked (88).
const TOP_SPECIAL: u32 = 0x42b;

/// `e^x` as glibc's `expf` computes it (correctly rounded but for rare
/// cases; NaN stays NaN, overflow gives infinity, underflow zero).
#[inline]
pub fn exp(x: f32) -> f32 {
    let abstop = (x.to_bits() >> 20) & 0x7ff;
    if abstop >= TOP_SPECIAL {
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= 0x7f8 {
            return x + x;
        }
        if x > OVERFLOW {
            return f32::INFINITY;
        }
        if x < UNDERFLOW {
            return 0.0;
        }
    }
    let xd = f64::from(x);
    let z = INV_LN2_N * xd;
    let kd = z + SHIFT;
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TAB[(ki % 32) as usize].wrapping_add(ki << 47));
    let y = C0.mul_add(r, C1).mul_add(r * r, C2.mul_add(r, 1.0));
    (y * s) as f32
}

/// `x · sigmoid(x)`, as `x / (1 + e^-x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `gate = silu(gate) · up`, element by element.
pub fn swiglu_scalar(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// `x = silu(x)`.
pub fn silu_scalar(x: &mut [f32]) {
    for v in x {
        *v = silu(*v);
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::*;

    /// Four lanes of [`exp`](super::exp) without its special cases.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    unsafe fn exp4(x: __m128) -> __m128 {
        // SAFETY: the caller's precondition; the gather reads `TAB` at
        // indices masked to 0..32.
        unsafe {
            let xd = _mm256_cvtps_pd(x);
            let n = _mm256_set1_pd(INV_LN2_N);
            let shift = _mm256_set1_pd(SHIFT);
            let kd = _mm256_add_pd(_mm256_mul_pd(n, xd), shift);
            let ki = _mm256_castpd_si256(kd);
            let kd = _mm256_sub_pd(kd, shift);
            let r = _mm256_fmsub_pd(n, xd, kd);
            let idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
            let t = _mm256_i64gather_epi64::<8>(TAB.as_ptr() as *const i64, idx);
            let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
            let p = _mm256_fmadd_pd(_mm256_set1_pd(C0), r, _mm256_set1_pd(C1));
            let q = _mm256_fmadd_pd(_mm256_set1_pd(C2), r, _mm256_set1_pd(1.0));
            let y = _mm256_fmadd_pd(p, _mm256_mul_pd(r, r), q);
            _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
        }
    }

    /// Eight lanes of [`exp`](super::exp), bit for bit: lanes that need a
    /// special case (|x| ≥ 88, infinities, NaN) send all eight through
    /// the scalar function.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    pub unsafe fn exp8(x: __m256) -> __m256 {
        // SAFETY: the caller's precondition; `lanes` holds eight values.
        unsafe {
            let top = _mm256_and_si256(
                _mm256_srli_epi32::<20>(_mm256_castps_si256(x)),
                _mm256_set1_epi32(0x7ff),
            );
            let special = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(TOP_SPECIAL as i32 - 1));
            if _mm256_movemask_epi8(special) != 0 {
                let mut lanes = [0.0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), x);
                for v in &mut lanes {
                    *v = super::exp(*v);
                }
                return _mm256_loadu_ps(lanes.as_ptr());
            }
            let lo = exp4(_mm256_castps256_ps128(x));
            let hi = exp4(_mm256_extractf128_ps::<1>(x));
            _mm256_set_m128(hi, lo)
        }
    }

    /// Eight lanes of [`silu`](super::silu).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    unsafe fn silu8(x: __m256) -> __m256 {
        // SAFETY: the caller's precondition; registers only.
        unsafe {
            let neg = _mm256_xor_ps(x, _mm256_set1_ps(-0.0));
            _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), exp8(neg)))
        }
    }

    /// [`swiglu_scalar`](super::swiglu_scalar), eight at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn swiglu(gate: &mut [f32], up: &[f32]) {
        let n = gate.len().min(up.len());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `i + 8 <= n` for both slices; unaligned accesses.
            unsafe {
                let g = _mm256_loadu_ps(gate.as_ptr().add(i));
                let u = _mm256_loadu_ps(up.as_ptr().add(i));
                _mm256_storeu_ps(gate.as_mut_ptr().add(i), _mm256_mul_ps(silu8(g), u));
            }
            i += 8;
        }
        super::swiglu_scalar(&mut gate[i..n], &up[i..n]);
    }

    /// [`silu_scalar`](super::silu_scalar), eight at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn silu(x: &mut [f32]) {
        let mut c = x.chunks_exact_mut(8);
        for v in &mut c {
            // SAFETY: the chunk holds eight values.
            unsafe { _mm256_storeu_ps(v.as_mut_ptr(), silu8(_mm256_loadu_ps(v.as_ptr()))) };
        }
        super::silu_scalar(c.into_remainder());
    }
}

/// The AVX-512 form of [`exp`]: sixteen values as two registers of eight
/// f64 lanes with its operations, the table read with two-register
/// permutes instead of a gather.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_512 {
    use std::arch::x86_64::*;

    use super::*;

    /// `TAB[idx]` for eight indices below 32.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline(always)]
    unsafe fn table(idx: __m512i) -> __m512i {
        // SAFETY: the caller's precondition; the loads read the 32 entries
        // of `TAB`, eight at a time.
        unsafe {
            let t = TAB.as_ptr().cast::<__m512i>();
            let lo =
                _mm512_permutex2var_epi64(_mm512_loadu_si512(t), idx, _mm512_loadu_si512(t.add(1)));
            let hi = _mm512_permutex2var_epi64(
                _mm512_loadu_si512(t.add(2)),
                idx,
                _mm512_loadu_si512(t.add(3)),
            );
            let upper = _mm512_test_epi64_mask(idx, _mm512_set1_epi64(16));
            _mm512_mask_blend_epi64(upper, lo, hi)
        }
    }

    /// Eight lanes of [`exp`](super::exp) without its special cases, in
    /// f64 (the operations of `super::x86`'s four-lane form).
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        // SAFETY: the caller's precondition; registers and `TAB` only.
        unsafe {
            let xd = _mm512_cvtps_pd(x);
            let n = _mm512_set1_pd(INV_LN2_N);
            let shift = _mm512_set1_pd(SHIFT);
            let kd = _mm512_add_pd(_mm512_mul_pd(n, xd), shift);
            let ki = _mm512_castpd_si512(kd);
            let kd = _mm512_sub_pd(kd, shift);
            let r = _mm512_fmsub_pd(n, xd, kd);
            let t = table(_mm512_and_si512(ki, _mm512_set1_epi64(31)));
            let s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64::<47>(ki)));
            let p = _mm512_fmadd_pd(_mm512_set1_pd(C0), r, _mm512_set1_pd(C1));
            let q = _mm512_fmadd_pd(_mm512_set1_pd(C2), r, _mm512_set1_pd(1.0));
            let y = _mm512_fmadd_pd(p, _mm512_mul_pd(r, r), q);
            _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
        }
    }

    /// The high eight lanes of `x`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline(always)]
    unsafe fn high(x: __m512) -> __m256 {
        // SAFETY: registers only.
        unsafe { _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x))) }
    }

    /// Sixteen lanes of [`exp`](super::exp), bit for bit: lanes that need
    /// a special case (|x| ≥ 88, infinities, NaN) send all sixteen through
    /// the scalar function.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline(always)]
    pub(crate) unsafe fn exp16(x: __m512) -> __m512 {
        // SAFETY: the caller's precondition; `lanes` holds sixteen values.
        unsafe {
            let top = _mm512_and_si512(
                _mm512_srli_epi32::<20>(_mm512_castps_si512(x)),
                _mm512_set1_epi32(0x7ff),
            );
            let special = _mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(TOP_SPECIAL as i32 - 1));
            if special != 0 {
                let mut lanes = [0.0f32; 16];
                _mm512_storeu_ps(lanes.as_mut_ptr(), x);
                for v in &mut lanes {
                    *v = super::exp(*v);
                }
                return _mm512_loadu_ps(lanes.as_ptr());
            }
            let lo = _mm512_castps256_ps512(exp8(_mm512_castps512_ps256(x)));
            let hi = _mm256_castps_pd(exp8(high(x)));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(_mm512_castps_pd(lo), hi))
        }
    }
}
