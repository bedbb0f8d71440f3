//! Softmax with one definition for every path, over either of two
//! exponentials.
//!
//! [`Exact`] is the C library's (`crate::activation::exp`, glibc's `expf`
//! bit for bit): the softmax of a graph (a router's expert weights) keeps
//! the bits of the libm call, and the GPU's softmax reproduces them.
//!
//! [`Poly`] is attention's. There a softmax takes `e^(x - max)` once per
//! score, and glibc's algorithm (an f64 table and polynomial, two f64
//! registers per sixteen values) was a sixth of the time of a prompt
//! deep in a context. [`poly_exp`] is Cephes' degree-5 polynomial in f32
//! after a two-part `ln 2` reduction (as the GPU's attention computes
//! it), every step an IEEE operation or a fused multiply-add, within two
//! ulp of `e^x` for `x ≤ 0` (the tests check it).
//!
//! Either way the scalar and SIMD forms give the same bits, and the
//! exponentials are summed in f64 over eight interleaved partial sums.

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts: `n · LN2_HI` is exact for the `n` that occur, and
/// `LN2_LO` carries the rest.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// The polynomial's coefficients, highest first (Cephes' `expf`): `e^r ≈
/// 1 + r + r² · (P0 + P1 r + … + P5 r⁵)`, `P5 = 1/2` the lowest.
const P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];
/// Below this, the exponential is taken as zero. It keeps `2^n` a normal
/// f32 (`n ≥ -126`); `e^-87` is 1.6e-38 of the row's largest term, which
/// no sum of a softmax can show.
const LOW: f32 = -87.0;

/// Attention's exponential: `e^x` for `x ≤ 0` (a positive `x` is taken
/// as 0, NaN stays NaN, below −87 the result is 0).
#[inline]
pub fn poly_exp(x: f32) -> f32 {
    let x = if 0.0 < x { 0.0 } else { x };
    if x < LOW {
        return 0.0;
    }
    let n = (x * LOG2E).round_ties_even();
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    let mut p = P[0];
    for c in &P[1..] {
        p = p.mul_add(r, *c);
    }
    let y = p.mul_add(r * r, r + 1.0);
    // `n` is an integer in -126..=0 here (NaN gives 0, and a NaN `y`).
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// An exponential in the three forms the softmax paths take, bit for bit
/// the same.
pub trait Exp {
    /// One value.
    fn one(x: f32) -> f32;

    /// Eight lanes.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn lanes8(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256;

    /// Sixteen lanes.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe fn lanes16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512;
}

/// glibc's `expf` ([`crate::activation::exp`]).
pub struct Exact;

impl Exp for Exact {
    #[inline(always)]
    fn one(x: f32) -> f32 {
        crate::activation::exp(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes8(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's precondition is the callee's.
        unsafe { crate::activation::x86::exp8(x) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        // SAFETY: the caller's precondition is the callee's.
        unsafe { crate::activation::x86_512::exp16(x) }
    }
}

/// Attention's [`poly_exp`].
pub struct Poly;

impl Exp for Poly {
    #[inline(always)]
    fn one(x: f32) -> f32 {
        poly_exp(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes8(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's precondition is the callee's.
        unsafe { x86::poly8(x) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn lanes16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        // SAFETY: the caller's precondition is the callee's.
        unsafe { x86_512::poly16(x) }
    }
}

/// Combines eight partial f64 sums in the fixed tree every softmax path
/// (and attention's softmax with a sink) uses.
#[inline(always)]
pub fn combine_f64(s: &[f64; 8]) -> f64 {
    ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

/// Softmax of `row` in place: the maximum is subtracted, the exponentials
/// (`E`) are summed in f64 (value `i` into partial sum
/// `i % 8`, combined as `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 +
/// s7))`), and the row is scaled by `1 / sum` narrowed to f32.
pub fn softmax_scalar<E: Exp>(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sums = [0.0f64; 8];
    for (i, v) in row.iter_mut().enumerate() {
        *v = E::one(*v - max);
        sums[i % 8] += f64::from(*v);
    }
    scale(row, inverse(&sums));
}

/// `1 / sum`, narrowed to f32: the factor of every path's last step.
fn inverse(sums: &[f64; 8]) -> f32 {
    (1.0 / combine_f64(sums)) as f32
}

/// `row *= inv`, value by value.
fn scale(row: &mut [f32], inv: f32) {
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// The AVX2 form: eight values a step; lane `l` of the two f64
/// accumulators is partial sum `l`.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::*;

    /// Eight lanes of [`poly_exp`], bit for bit.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    pub(super) unsafe fn poly8(x: __m256) -> __m256 {
        // SAFETY: the caller's precondition; registers only.
        unsafe {
            // `min(0, x)` returns `x` for a NaN, as `poly_exp`'s test does.
            let x = _mm256_min_ps(_mm256_setzero_ps(), x);
            let low = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(LOW));
            let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
            );
            let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
            let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
            let mut p = _mm256_set1_ps(P[0]);
            for c in &P[1..] {
                p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
            }
            let y = _mm256_fmadd_ps(
                p,
                _mm256_mul_ps(r, r),
                _mm256_add_ps(r, _mm256_set1_ps(1.0)),
            );
            let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
            let y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)));
            _mm256_andnot_ps(low, y)
        }
    }

    /// [`softmax_scalar`](super::softmax_scalar), eight at a time.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax<E: Exp>(row: &mut [f32]) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let n = row.len();
        let mut lo = _mm256_setzero_pd();
        let mut hi = _mm256_setzero_pd();
        let mv = _mm256_set1_ps(max);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `i + 8 <= n`; unaligned accesses.
            unsafe {
                let e = E::lanes8(_mm256_sub_ps(_mm256_loadu_ps(row.as_ptr().add(i)), mv));
                _mm256_storeu_ps(row.as_mut_ptr().add(i), e);
                lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
                hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
            }
            i += 8;
        }
        let mut sums = [0.0f64; 8];
        // SAFETY: `sums` holds eight f64.
        unsafe {
            _mm256_storeu_pd(sums.as_mut_ptr(), lo);
            _mm256_storeu_pd(sums.as_mut_ptr().add(4), hi);
        }
        for (k, v) in row[i..].iter_mut().enumerate() {
            *v = E::one(*v - max);
            sums[k] += f64::from(*v);
        }
        let inv = inverse(&sums);
        let iv = _mm256_set1_ps(inv);
        let mut c = row.chunks_exact_mut(8);
        for v in &mut c {
            // SAFETY: the chunk holds eight values.
            unsafe {
                _mm256_storeu_ps(
                    v.as_mut_ptr(),
                    _mm256_mul_ps(_mm256_loadu_ps(v.as_ptr()), iv),
                )
            };
        }
        scale(c.into_remainder(), inv);
    }
}

/// The AVX-512 form: sixteen values a step. Lane `l` of the one f64
/// accumulator is partial sum `l`, fed the values `l` and `l + 8` of each
/// step in that order, so the sums are [`softmax_scalar`]'s.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_512 {
    use std::arch::x86_64::*;

    use super::*;

    /// Sixteen lanes of [`poly_exp`], bit for bit.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline(always)]
    pub(super) unsafe fn poly16(x: __m512) -> __m512 {
        // SAFETY: the caller's precondition; registers only.
        unsafe {
            // `min(0, x)` returns `x` for a NaN, as `poly_exp`'s test does.
            let x = _mm512_min_ps(_mm512_setzero_ps(), x);
            let low = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(LOW));
            let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
            );
            let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
            let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
            let mut p = _mm512_set1_ps(P[0]);
            for c in &P[1..] {
                p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
            }
            let y = _mm512_fmadd_ps(
                p,
                _mm512_mul_ps(r, r),
                _mm512_add_ps(r, _mm512_set1_ps(1.0)),
            );
            // `y * 2^n` in one instruction: `n` is an integer in -126..=0
            // (or NaN, which stays NaN), so `2^n` is a normal f32 and the
            // scaling rounds exactly as the scalar multiply by it does
            // (only a subnormal result rounds at all).
            _mm512_maskz_mov_ps(!low, _mm512_scalef_ps(y, n))
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

    /// [`softmax_scalar`](super::softmax_scalar), sixteen at a time.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn softmax<E: Exp>(row: &mut [f32]) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let n = row.len();
        let mut sum = _mm512_setzero_pd();
        let mv = _mm512_set1_ps(max);
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: `i + 16 <= n`; unaligned accesses.
            unsafe {
                let e = E::lanes16(_mm512_sub_ps(_mm512_loadu_ps(row.as_ptr().add(i)), mv));
                _mm512_storeu_ps(row.as_mut_ptr().add(i), e);
                sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
                sum = _mm512_add_pd(sum, _mm512_cvtps_pd(high(e)));
            }
            i += 16;
        }
        let mut sums = [0.0f64; 8];
        // SAFETY: `sums` holds eight f64.
        unsafe { _mm512_storeu_pd(sums.as_mut_ptr(), sum) };
        // Value `i + k` goes to partial sum `(i + k) % 8`, `i` a multiple
        // of sixteen.
        for (k, v) in row[i..].iter_mut().enumerate() {
            *v = E::one(*v - max);
            sums[k % 8] += f64::from(*v);
        }
        let inv = inverse(&sums);
        let iv = _mm512_set1_ps(inv);
        let mut c = row.chunks_exact_mut(16);
        for v in &mut c {
            // SAFETY: the chunk holds sixteen values.
            unsafe {
                let p = v.as_mut_ptr();
                _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(p), iv));
            }
        }
        scale(c.into_remainder(), inv);
    }
}
