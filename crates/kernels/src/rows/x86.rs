//! The AVX + F16C path. Every function requires both features, which the
//! callers check through [`RowKernels`](super::RowKernels); lengths are checked by the
//! callers too, so the loops only index within the slices.

use std::arch::x86_64::*;

use super::base::{combine, half_to_f32, Rows};
use crate::error::KernelError;

/// Rows ahead of the one being read that the loops ask the caches for:
/// a decode step deep in a context reads its cache from DRAM, and the
/// hardware prefetchers stop at page edges (a 4 KiB page holds eight
/// rows of 512 bytes), so without the hint each page waited on memory.
pub(super) const AHEAD: usize = 16;

/// The fewest rows for which a loop asks for the rows ahead: a call over
/// this many streams rows that are not in L1 (a lone query's walk over
/// its window), while the attention walker's blocks (64 keys) are read by
/// several queries from L1, where the hints would only cost issue slots.
const FAR_ROWS: usize = 128;

/// Whether a loop over `rows` asks for the rows ahead.
#[inline(always)]
pub(super) fn far<T>(rows: &Rows<'_, T>) -> bool {
    rows.idx.len() >= FAR_ROWS
}

/// Asks for row `rows.idx[j]` (its first `len` values), if there is one
/// inside the data.
#[inline(always)]
pub(super) fn prefetch_row<T>(rows: &Rows<'_, T>, j: usize, len: usize) {
    let Some(&i) = rows.idx.get(j) else {
        return;
    };
    let Ok(r) = rows.row(i, len) else {
        return;
    };
    let p = r.as_ptr().cast::<i8>();
    let bytes = std::mem::size_of_val(r);
    let mut at = 0;
    while at < bytes {
        // SAFETY: SSE is part of x86_64; a prefetch is a hint that never
        // faults, and `at < bytes` keeps the address inside the row.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(at)) };
        at += 64;
    }
}

/// Eight halves as f32.
///
/// # Safety
/// The CPU has AVX and F16C, and `x` holds at least eight values.
#[inline]
#[target_feature(enable = "avx,f16c")]
unsafe fn load_f16(x: &[u16]) -> __m256 {
    debug_assert!(x.len() >= 8);
    // SAFETY: the caller passes at least eight values; the load is
    // unaligned.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(x.as_ptr().cast()) })
}

/// Eight f32 values.
///
/// # Safety
/// As [`load_f16`].
#[inline]
#[target_feature(enable = "avx,f16c")]
unsafe fn load_f32(x: &[f32]) -> __m256 {
    debug_assert!(x.len() >= 8);
    // SAFETY: as in `load_f16`.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Converts `src` into `dst`, as far as the shorter one reaches.
///
/// # Safety
/// The CPU has AVX and F16C.
#[target_feature(enable = "avx,f16c")]
pub(super) unsafe fn f16_to_f32(src: &[u16], dst: &mut [f32]) {
    let mut s = src.chunks_exact(8);
    let mut d = dst.chunks_exact_mut(8);
    for (x, y) in (&mut s).zip(&mut d) {
        // SAFETY: both chunks hold eight values.
        unsafe { _mm256_storeu_ps(y.as_mut_ptr(), load_f16(x)) };
    }
    for (y, &x) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *y = half_to_f32(x);
    }
}

/// Decodes `blocks` into `dst` (32 values a block): each value `q * d`,
/// the conversions exact and the product one rounding, as the scalar
/// decode takes it. `wide` takes sixteen lanes a step (AVX-512 F).
///
/// # Safety
/// The CPU has AVX2 and F16C, and AVX-512 F with `wide`; `dst` holds
/// `32 * blocks.len()` values.
#[target_feature(enable = "avx,avx2,f16c")]
pub(super) unsafe fn q8_0_to_f32(blocks: &[crate::blocks::BlockQ8_0], dst: &mut [f32], wide: bool) {
    if wide {
        // SAFETY: the caller's contract.
        unsafe { q8_0_to_f32_16(blocks, dst) };
        return;
    }
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(32)) {
        // SAFETY: each load reads 8 of the block's 32 quants, each store
        // writes 8 of the chunk's 32 values.
        unsafe {
            let d = _mm256_set1_ps(crate::blocks::f16_to_f32(b.d));
            for k in 0..4 {
                let q = _mm_loadl_epi64(b.qs.as_ptr().add(8 * k).cast());
                let x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
                _mm256_storeu_ps(y.as_mut_ptr().add(8 * k), _mm256_mul_ps(x, d));
            }
        }
    }
}

/// [`q8_0_to_f32`], sixteen lanes a step.
///
/// # Safety
/// As [`q8_0_to_f32`], with AVX-512 F.
#[target_feature(enable = "avx512f,avx,avx2,f16c")]
unsafe fn q8_0_to_f32_16(blocks: &[crate::blocks::BlockQ8_0], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(32)) {
        // SAFETY: each load reads 16 of the block's 32 quants, each store
        // writes 16 of the chunk's 32 values.
        unsafe {
            let d = _mm512_set1_ps(crate::blocks::f16_to_f32(b.d));
            for k in 0..2 {
                let q = _mm_loadu_si128(b.qs.as_ptr().add(16 * k).cast());
                let x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
                _mm512_storeu_ps(y.as_mut_ptr().add(16 * k), _mm512_mul_ps(x, d));
            }
        }
    }
}

/// Converts `src` into `dst` (nearest even), as far as the shorter one
/// reaches.
///
/// # Safety
/// The CPU has AVX and F16C.
#[target_feature(enable = "avx,f16c")]
pub(super) unsafe fn f32_to_f16(src: &[f32], dst: &mut [u16]) {
    let mut s = src.chunks_exact(8);
    let mut d = dst.chunks_exact_mut(8);
    for (x, y) in (&mut s).zip(&mut d) {
        // SAFETY: both chunks hold eight values. The rounding is an
        // immediate (nearest even), independent of MXCSR.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(load_f32(x));
            _mm_storeu_si128(y.as_mut_ptr().cast(), h);
        }
    }
    for (y, &x) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *y = u16::from_le_bytes(crate::blocks::f32_to_f16(x));
    }
}

/// Eight row elements as f32, for the element types of the rows.
trait Load8: Sized {
    /// # Safety
    /// The CPU has AVX and F16C, and `x` holds at least eight values.
    unsafe fn load8(x: &[Self]) -> __m256;
}

impl Load8 for f32 {
    #[inline(always)]
    unsafe fn load8(x: &[f32]) -> __m256 {
        // SAFETY: the caller's contract is `load_f32`'s.
        unsafe { load_f32(x) }
    }
}

impl Load8 for u16 {
    #[inline(always)]
    unsafe fn load8(x: &[u16]) -> __m256 {
        // SAFETY: the caller's contract is `load_f16`'s.
        unsafe { load_f16(x) }
    }
}

/// Eight dot products of `q` with the rows `r` (each `q.len()` long, a
/// multiple of eight), each in the order of `super::dot_f32`: lane `l`
/// of row `k`'s accumulator sums its elements `l, l + 8, …`; the eight
/// accumulators are transposed so that one vector tree
/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))` combines all
/// eight rows at once. `out[k] = scale * dot(q, r[k])`.
///
/// # Safety
/// The CPU has AVX, FMA and F16C; `out` holds eight values.
#[inline]
#[target_feature(enable = "avx,fma,f16c")]
unsafe fn dot8<T: Load8>(q: &[f32], r: &[&[T]; 8], scale: f32, out: &mut [f32]) {
    // SAFETY: the caller's features; every load reads eight values at
    // `c < q.len()`, inside `q` and each row; `out` holds eight.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); 8];
        let mut c = 0;
        while c < q.len() {
            let qv = load_f32(&q[c..]);
            for (a, r) in acc.iter_mut().zip(r) {
                *a = _mm256_fmadd_ps(qv, T::load8(&r[c..]), *a);
            }
            c += 8;
        }
        let v = combine8(acc);
        _mm256_storeu_ps(out.as_mut_ptr(), _mm256_mul_ps(_mm256_set1_ps(scale), v));
    }
}

/// An 8×8 transpose: lane `k` of result `l` is lane `l` of `x[k]`.
///
/// # Safety
/// The CPU has AVX.
#[inline(always)]
pub(super) unsafe fn transpose8(x: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: register operations only; the caller has AVX.
    unsafe {
        let [a0, a1, a2, a3, a4, a5, a6, a7] = x;
        let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
        let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
        let (t4, t5) = (_mm256_unpacklo_ps(a4, a5), _mm256_unpackhi_ps(a4, a5));
        let (t6, t7) = (_mm256_unpacklo_ps(a6, a7), _mm256_unpackhi_ps(a6, a7));
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }
}

/// The dot products of eight rows from their eight-lane partial sums
/// (`acc[k]` for row `k`): transposed, then combined lane-wise by the
/// tree `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`, so lane `k`
/// of the result is row `k`'s sum in the order of `super::dot_f32`.
///
/// # Safety
/// The CPU has AVX.
#[inline]
#[target_feature(enable = "avx,f16c")]
pub(super) unsafe fn combine8(acc: [__m256; 8]) -> __m256 {
    // SAFETY: this function has AVX.
    let [l0, l1, l2, l3, l4, l5, l6, l7] = unsafe { transpose8(acc) };
    _mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(l0, l4), _mm256_add_ps(l2, l6)),
        _mm256_add_ps(_mm256_add_ps(l1, l5), _mm256_add_ps(l3, l7)),
    )
}

/// `out += Σ_j weights[j] · row_j`, 64 output values at a time kept in
/// registers over all the rows: the same fused multiply-add per element
/// and row, in row order, as the one-row-at-a-time loop.
///
/// # Safety
/// The CPU has AVX, FMA and F16C; `out.len()` is a multiple of 64 and
/// every row of `rows` (one per weight) is readable with `out.len()`
/// values.
#[inline]
#[target_feature(enable = "avx,fma,f16c")]
unsafe fn axpy64<T: Load8>(weights: &[f32], rows: Rows<'_, T>, out: &mut [f32]) {
    let n = out.len();
    let mut c0 = 0;
    while c0 < n {
        // SAFETY: the caller's features; loads and stores read eight
        // values at `c0 + 8v < n` of `out` and of each row.
        unsafe {
            let mut acc: [__m256; 8] = std::array::from_fn(|v| load_f32(&out[c0 + 8 * v..]));
            for (&w, &i) in weights.iter().zip(rows.idx) {
                let Ok(r) = rows.row(i, n) else {
                    // Checked by the caller.
                    continue;
                };
                let wv = _mm256_set1_ps(w);
                for (v, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(wv, T::load8(&r[c0 + 8 * v..]), *a);
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out[c0 + 8 * v..].as_mut_ptr(), *a);
            }
        }
        c0 += 64;
    }
}

/// Defines the dot and the weighted-sum loops for one row element type,
/// `$load` reading eight of them as f32 and `$conv` one.
macro_rules! row_loops {
    ($dot:ident, $dot_rows:ident, $axpy_rows:ident, $t:ty, $load:ident, $conv:expr) => {
        /// One dot product in the order of `super::dot_f32`; `a` and
        /// `b` have the same length (otherwise the longer one's extra
        /// elements are ignored).
        ///
        /// # Safety
        /// The CPU has AVX, FMA and F16C.
        #[inline]
        #[target_feature(enable = "avx,fma,f16c")]
        unsafe fn $dot(a: &[f32], b: &[$t]) -> f32 {
            let mut ca = a.chunks_exact(8);
            let mut cb = b.chunks_exact(8);
            let mut acc = _mm256_setzero_ps();
            for (x, y) in (&mut ca).zip(&mut cb) {
                // SAFETY: both chunks hold eight values. One fused
                // multiply-add per element, as in the scalar code.
                acc = unsafe { _mm256_fmadd_ps(load_f32(x), $load(y), acc) };
            }
            let mut lanes = [0.0f32; 8];
            // SAFETY: `lanes` holds eight values.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
            for (l, (x, &y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
                lanes[l] = x.mul_add($conv(y), lanes[l]);
            }
            combine(&lanes)
        }

        /// The SIMD form of `RowKernels::dot_rows_f32` and its f16
        /// form, scoring rows as far as `scores` reaches.
        ///
        /// # Safety
        /// The CPU has AVX, FMA and F16C.
        #[target_feature(enable = "avx,fma,f16c")]
        pub(super) unsafe fn $dot_rows(
            q: &[f32],
            rows: Rows<'_, $t>,
            scale: f32,
            scores: &mut [f32],
        ) -> Result<(), KernelError> {
            let n = q.len();
            let mut done = 0;
            if n > 0 && n.is_multiple_of(8) {
                // Eight rows at once: eight independent sums hide the
                // add latency that one dot product waits on.
                for (s8, i8) in scores.chunks_exact_mut(8).zip(rows.idx.chunks_exact(8)) {
                    let mut r: [&[$t]; 8] = [&[]; 8];
                    for (r, &i) in r.iter_mut().zip(i8) {
                        match rows.row(i, n) {
                            Ok(x) => *r = x,
                            // The one-row loop below writes the scores
                            // before the bad row and reports it.
                            Err(_) => break,
                        }
                    }
                    if r.iter().any(|r| r.len() != n) {
                        break;
                    }
                    // SAFETY: the caller's features; every row and `q`
                    // hold `n` values, a multiple of eight.
                    unsafe { dot8(q, &r, scale, s8) };
                    done += 8;
                }
            }
            for (s, &i) in scores.iter_mut().zip(rows.idx).skip(done) {
                let r = rows.row(i, q.len())?;
                // SAFETY: the caller's features; `r` is `q.len()` long.
                *s = scale * unsafe { $dot(q, r) };
            }
            Ok(())
        }

        /// The SIMD form of `RowKernels::axpy_rows_f32` and its f16
        /// form, adding rows as far as `weights` reaches.
        ///
        /// # Safety
        /// The CPU has AVX, FMA and F16C.
        #[target_feature(enable = "avx,fma,f16c")]
        pub(super) unsafe fn $axpy_rows(
            weights: &[f32],
            rows: Rows<'_, $t>,
            out: &mut [f32],
        ) -> Result<(), KernelError> {
            let n = out.len();
            if n > 0
                && n.is_multiple_of(64)
                && weights.len() == rows.idx.len()
                && rows.all_readable(n)
            {
                // SAFETY: the caller's features; every row holds `n`
                // values, a multiple of 64.
                unsafe { axpy64(weights, rows, out) };
                return Ok(());
            }
            for (&w, &i) in weights.iter().zip(rows.idx) {
                let r = rows.row(i, n)?;
                let wv = _mm256_set1_ps(w);
                let mut co = out.chunks_exact_mut(8);
                let mut cr = r.chunks_exact(8);
                for (o, x) in (&mut co).zip(&mut cr) {
                    // SAFETY: both chunks hold eight values; one fused
                    // multiply-add per element, as in the scalar code.
                    unsafe {
                        let y = _mm256_fmadd_ps(wv, $load(x), load_f32(o));
                        _mm256_storeu_ps(o.as_mut_ptr(), y);
                    }
                }
                for (o, &x) in co.into_remainder().iter_mut().zip(cr.remainder()) {
                    *o = w.mul_add($conv(x), *o);
                }
            }
            Ok(())
        }
    };
}

row_loops!(
    dot_f32,
    dot_rows_f32,
    axpy_rows_f32,
    f32,
    load_f32,
    |x: f32| x
);
row_loops!(
    dot_f16,
    dot_rows_f16,
    axpy_rows_f16,
    u16,
    load_f16,
    half_to_f32
);
