//! Helpers shared by the AVX2 and AVX-512 dot products: loading and
//! unpacking blocks, reducing lanes, and the block loops themselves, which
//! are generic over the one primitive the two levels do differently — the
//! byte dot product of a 32-quant run, scaled per 16-quant half.
//!
//! Everything here is `#[inline(always)]` and carries no target feature of
//! its own: it is compiled inside the `#[target_feature]` functions that
//! call it.
//!
//! # Safety
//!
//! The functions here are `unsafe` because they execute AVX2 (and F16C)
//! instructions without checking the CPU. Every caller is an AVX2 or
//! AVX-512 kernel, a `#[target_feature(enable = "avx2,fma,f16c", ...)]`
//! function that the dispatcher (`Kernels`) only hands out after
//! `SimdLevel::is_supported` confirmed those features, so that precondition
//! holds wherever they are used. Memory is read through references,
//! bounds-checked indexing, or [`load32`] at offsets inside a block field;
//! the `SAFETY` comments give the arithmetic.

use std::arch::x86_64::*;

use super::scalar::{k_combine, Acc4};
use crate::blocks::*;

/// Four f16 values to f32 (exact).
///
/// # Safety
/// The CPU must support F16C.
#[inline(always)]
pub(super) unsafe fn f16x4(a: F16Bits, b: F16Bits, c: F16Bits, d: F16Bits) -> __m128 {
    // SAFETY: F16C is the caller's precondition (the rest is SSE2); registers
    // only.
    unsafe {
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
}

/// Reduces four blocks' eight i32 lanes each to their four exact totals.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(super) unsafe fn block_totals(p0: __m256i, p1: __m256i, p2: __m256i, p3: __m256i) -> __m128i {
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe {
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
    }
}

/// Horizontal sum of eight i32 lanes.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn hsum_i32(v: __m256i) -> i32 {
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
        _mm_cvtsi128_si32(s)
    }
}

/// 32 nibbles of a 16-byte block: low nibbles, then high nibbles.
///
/// # Safety
/// The CPU must support AVX.
#[inline(always)]
pub(super) unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
    // SAFETY: AVX is the caller's precondition. The load reads the 16 bytes
    // of `qs`, a reference (unaligned load).
    unsafe {
        let b = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
        let m = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(b, m);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), m);
        _mm256_set_m128i(hi, lo)
    }
}

/// Expands 32 bits into 32 bytes, 0xFF where the bit is set (byte `k`
/// from bit `k`).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(super) unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe {
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
}

/// The 5-bit quants of a Q5_0/Q5_1 block (nibbles plus the bit from `qh`).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
pub(super) unsafe fn q5_bytes(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition, which covers both helpers;
    // memory is only read through `qs`.
    unsafe {
        let high = _mm256_and_si256(
            bits_to_bytes(u32::from_le_bytes(qh)),
            _mm256_set1_epi8(0x10),
        );
        _mm256_or_si256(nibbles(qs), high)
    }
}

/// 32 bytes from `p`.
///
/// # Safety
/// The CPU must support AVX, and the 32 bytes from `p` on must be readable
/// (no alignment needed).
#[inline(always)]
pub(super) unsafe fn load32<T>(p: *const T) -> __m256i {
    // SAFETY: both are the caller's preconditions; the load is unaligned.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// A legacy block's weight scale as stored, widened exactly to f32.
pub(super) trait WeightScale: Copy {
    /// Four scales as f32 lanes, equal to [`WeightScale::to_f32`] of each.
    ///
    /// # Safety
    /// The CPU must support F16C.
    unsafe fn x4(s: [Self; 4]) -> __m128;
    /// One scale.
    fn to_f32(self) -> f32;
}

impl WeightScale for F16Bits {
    #[inline(always)]
    unsafe fn x4(s: [Self; 4]) -> __m128 {
        // SAFETY: F16C is the caller's precondition.
        unsafe { f16x4(s[0], s[1], s[2], s[3]) }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_to_f32(self)
    }
}

/// MXFP4's E8M0 scale byte, read as [`e8m0_to_f32_half`] (the halved
/// scale that goes with the doubled [`KVALUES_MXFP4`]).
#[derive(Clone, Copy)]
pub(super) struct E8M0(pub u8);

impl WeightScale for E8M0 {
    #[inline(always)]
    unsafe fn x4(s: [Self; 4]) -> __m128 {
        // Four scalar conversions: the scale is one byte per 32 weights, so
        // a vector form would save little next to the block's byte dots.
        // SAFETY: SSE, part of every x86_64 CPU; registers only.
        unsafe { _mm_setr_ps(s[0].to_f32(), s[1].to_f32(), s[2].to_f32(), s[3].to_f32()) }
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        e8m0_to_f32_half(self.0)
    }
}

/// The legacy-type loop for one weight row against `T` activation rows,
/// each result bit-identical to the scalar reference for that pair.
///
/// `unpack(i)` prepares weight block `i` once; `pair(w, t, i)` gives its
/// eight i32 lanes against block `i` of activation row `t`. `dw(i)` is the
/// weight's scale (f16, or MXFP4's E8M0 byte; see [`WeightScale`]) and, with `MIN`, `m(i)` the factor of its exact
/// minimum term (Q4_1/Q5_1). `act4(t, i)` gives the activation scales `d`
/// and (with `MIN`) sums `s` of blocks `i..i + 4` of row `t` as f32 lanes,
/// `act1(t, i)` those of block `i` alone; both are the f16 values widened
/// exactly, read from the blocks or from a table made once per product.
/// Groups of four blocks go through one 4-lane vector per activation row,
/// which is the reference's interleaved order; the tail blocks take the
/// same float steps one lane at a time.
///
/// # Safety
/// The CPU must support AVX2 and F16C.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn legacy_rows<const T: usize, const MIN: bool, W: Copy, S: WeightScale>(
    nb: usize,
    unpack: impl Fn(usize) -> W,
    pair: impl Fn(W, usize, usize) -> __m256i,
    dw: impl Fn(usize) -> S,
    m: impl Fn(usize) -> F16Bits,
    act4: impl Fn(usize, usize) -> (__m128, __m128),
    act1: impl Fn(usize, usize) -> (f32, f32),
) -> [f32; T] {
    // SAFETY: AVX2 and F16C are the caller's precondition (the rest is SSE).
    // The stores write four lanes into the four f32 values of each `p.0`.
    unsafe {
        let mut acc = [_mm_setzero_ps(); T];
        let groups = nb / 4;
        for g in 0..groups {
            let i = 4 * g;
            let w = [unpack(i), unpack(i + 1), unpack(i + 2), unpack(i + 3)];
            let dwv = S::x4([dw(i), dw(i + 1), dw(i + 2), dw(i + 3)]);
            let mv = if MIN {
                f16x4(m(i), m(i + 1), m(i + 2), m(i + 3))
            } else {
                _mm_setzero_ps()
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                let tot = block_totals(
                    pair(w[0], t, i),
                    pair(w[1], t, i + 1),
                    pair(w[2], t, i + 2),
                    pair(w[3], t, i + 3),
                );
                let (dav, sv) = act4(t, i);
                let d = _mm_mul_ps(dwv, dav);
                let mut v = _mm_mul_ps(d, _mm_cvtepi32_ps(tot));
                if MIN {
                    v = _mm_add_ps(v, _mm_mul_ps(mv, sv));
                }
                *acc = _mm_add_ps(*acc, v);
            }
        }
        let mut parts: [Acc4; T] = std::array::from_fn(|_| Acc4::default());
        for (p, a) in parts.iter_mut().zip(&acc) {
            _mm_storeu_ps(p.0.as_mut_ptr(), *a);
        }
        for i in 4 * groups..nb {
            let w = unpack(i);
            let dwf = dw(i).to_f32();
            for (t, p) in parts.iter_mut().enumerate() {
                let isum = hsum_i32(pair(w, t, i));
                let (daf, sf) = act1(t, i);
                let mut v = (dwf * daf) * isum as f32;
                if MIN {
                    v += f16_to_f32(m(i)) * sf;
                }
                p.add(i, v);
            }
        }
        std::array::from_fn(|t| parts[t].total())
    }
}

/// Unsigned 32-quant run × 32 activations, the first 16 products scaled by
/// `lo`, the last 16 by `hi`, as eight i32 lanes (each the scaled sum of
/// four neighbouring products). The level-specific primitive.
pub(super) trait ScaledDot {
    /// The scaled product of one run.
    ///
    /// # Safety
    /// The CPU must support the instructions of the implementing level
    /// (AVX2, or AVX-512 F/BW/VL with VNNI for the VNNI variant).
    unsafe fn scaled(q: __m256i, y: __m256i, lo: i32, hi: i32) -> __m256i;
}

/// The six-bit scales and mins of a Q4_K/Q5_K super-block's eight
/// sub-blocks.
#[inline(always)]
fn q45k_scales(scales: &[u8; 12]) -> ([i32; 8], [i32; 8]) {
    let mut sc = [0i32; 8];
    let mut mins = [0i32; 8];
    for j in 0..8 {
        let (s, m) = k_scale_min(j, scales);
        sc[j] = s as i32;
        mins[j] = m as i32;
    }
    (sc, mins)
}

/// The exact minimum term `sum(min * activation sums)` of one super-block.
#[inline(always)]
fn q45k_msum(mins: &[i32; 8], y: &BlockQ8K) -> i32 {
    let mut msum = 0i32;
    for (j, m) in mins.iter().enumerate() {
        msum += m * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
    }
    msum
}

/// The low and high nibble runs of 64-quant chunk `j` of a Q4_K/Q5_K block,
/// with the fifth bits from `qh` when given.
///
/// # Safety
/// The CPU must support AVX2, and `j` must be below 4.
#[inline(always)]
unsafe fn k_chunk(qs: &[u8; 128], qh: Option<__m256i>, j: usize) -> (__m256i, __m256i) {
    debug_assert!(j < 4);
    // SAFETY: AVX2 and `j < 4` are the caller's preconditions, so the load
    // reads bytes `32 * j..32 * j + 32`, inside the 128 of `qs`.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let q = load32(qs.as_ptr().add(32 * j));
        let mut lo = _mm256_and_si256(q, m4);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
        if let Some(qh) = qh {
            let one = _mm256_set1_epi8(1);
            let h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32)), one);
            let h1 = _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32 + 1)),
                one,
            );
            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(h0));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h1));
        }
        (lo, hi)
    }
}

/// Q4_K/Q5_K super-blocks of one weight row against `T` activation rows.
/// Each super-block is unpacked once; every pair gets the reference's
/// exact integer sums and the same float steps.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D` (see
/// [`ScaledDot::scaled`]).
#[inline(always)]
unsafe fn q45k_rows<'w, D: ScaledDot, const T: usize>(
    n_blocks: usize,
    block: impl Fn(
        usize,
    ) -> (
        &'w [u8; 12],
        &'w [u8; 128],
        Option<&'w [u8; 32]>,
        F16Bits,
        F16Bits,
    ),
    a: [&[BlockQ8K]; T],
) -> [f32; T] {
    // SAFETY: the CPU features are the caller's preconditions. Every load
    // reads 32 bytes inside a block field: `qh` (32 bytes) whole, and the
    // activation quants (256 bytes) at `64 * j` and `64 * j + 32` for `j`
    // in 0..4, the last ending at byte 256. `k_chunk` gets `j` in 0..4.
    unsafe {
        let mut acc = [0.0f32; T];
        for b in 0..n_blocks {
            // The closure only picks fields: intrinsics inside it would not
            // inherit the caller's target features and would not inline.
            let (scales, qs, qh, d, dmin) = block(b);
            let qh = qh.map(|h| load32(h.as_ptr()));
            let (sc, mins) = q45k_scales(scales);
            let mut sumi = [_mm256_setzero_si256(); T];
            for j in 0..4 {
                let (lo, hi) = k_chunk(qs, qh, j);
                let (s0, s1) = (sc[2 * j], sc[2 * j + 1]);
                for (t, sumi) in sumi.iter_mut().enumerate() {
                    let y = &a[t][b];
                    let p0 = D::scaled(lo, load32(y.qs.as_ptr().add(64 * j)), s0, s0);
                    let p1 = D::scaled(hi, load32(y.qs.as_ptr().add(64 * j + 32)), s1, s1);
                    *sumi = _mm256_add_epi32(*sumi, _mm256_add_epi32(p0, p1));
                }
            }
            let (d, dmin) = (f16_to_f32(d), f16_to_f32(dmin));
            for ((acc, sumi), a) in acc.iter_mut().zip(&sumi).zip(&a) {
                let y = &a[b];
                *acc = k_combine(
                    *acc,
                    d * y.d,
                    hsum_i32(*sumi),
                    dmin * y.d,
                    q45k_msum(&mins, y),
                );
            }
        }
        acc
    }
}

/// Q4_K × Q8_K for `T` activation rows (all as long as `w`).
///
/// # Safety
/// As [`q45k_rows`].
#[inline(always)]
pub(super) unsafe fn q4_k<D: ScaledDot, const T: usize>(
    w: &[BlockQ4K],
    a: [&[BlockQ8K]; T],
) -> [f32; T] {
    // SAFETY: the caller meets `q45k_rows`' preconditions, which are
    // this function's.
    unsafe {
        q45k_rows::<D, T>(
            w.len(),
            |b| {
                let x = &w[b];
                (&x.scales, &x.qs, None, x.d, x.dmin)
            },
            a,
        )
    }
}

/// Q5_K × Q8_K for `T` activation rows (all as long as `w`).
///
/// # Safety
/// As [`q45k_rows`].
#[inline(always)]
pub(super) unsafe fn q5_k<D: ScaledDot, const T: usize>(
    w: &[BlockQ5K],
    a: [&[BlockQ8K]; T],
) -> [f32; T] {
    // SAFETY: the caller meets `q45k_rows`' preconditions, which are
    // this function's.
    unsafe {
        q45k_rows::<D, T>(
            w.len(),
            |b| {
                let x = &w[b];
                (&x.scales, &x.qs, Some(&x.qh), x.d, x.dmin)
            },
            a,
        )
    }
}

/// Q6_K × Q8_K for `T` activation rows (all as long as `w`). The -32
/// offset of every quant is applied once, through the activation sums:
/// `sum((q - 32) * y) = sum(q * y) - 32 * sum(y)`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D` (see
/// [`ScaledDot::scaled`]).
#[inline(always)]
pub(super) unsafe fn q6_k<D: ScaledDot, const T: usize>(
    w: &[BlockQ6K],
    a: [&[BlockQ8K]; T],
) -> [f32; T] {
    // SAFETY: the CPU features are the caller's preconditions. Every load
    // reads 32 bytes inside a block field, for `n` in 0..2 and `k` in 0..4:
    // `ql` (128 bytes) at `64 * n` and `64 * n + 32`, `qh` (64 bytes) at
    // `32 * n`, the activation quants (256 bytes) at `16 * sub` with
    // `sub = 8 * n + 2 * k` at most 14, ending at byte 256.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(3);
        let mut acc = [0.0f32; T];
        for (b, x) in w.iter().enumerate() {
            let mut sumi = [_mm256_setzero_si256(); T];
            for n in 0..2 {
                let ql0 = load32(x.ql.as_ptr().add(64 * n));
                let ql1 = load32(x.ql.as_ptr().add(64 * n + 32));
                let qh = load32(x.qh.as_ptr().add(32 * n));
                let high = |shift: __m128i| {
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srl_epi16(qh, shift), m2))
                };
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), high(_mm_cvtsi32_si128(0))),
                    _mm256_or_si256(_mm256_and_si256(ql1, m4), high(_mm_cvtsi32_si128(2))),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                        high(_mm_cvtsi32_si128(4)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                        high(_mm_cvtsi32_si128(6)),
                    ),
                ];
                for (t, sumi) in sumi.iter_mut().enumerate() {
                    let y = &a[t][b];
                    for (k, qk) in q.iter().enumerate() {
                        let sub = 8 * n + 2 * k;
                        let yv = load32(y.qs.as_ptr().add(16 * sub));
                        let (lo, hi) = (x.scales[sub] as i32, x.scales[sub + 1] as i32);
                        *sumi = _mm256_add_epi32(*sumi, D::scaled(*qk, yv, lo, hi));
                    }
                }
            }
            let d = f16_to_f32(x.d);
            for t in 0..T {
                let y = &a[t][b];
                let mut offset = 0i32;
                for (s, bs) in x.scales.iter().zip(&y.bsums) {
                    offset += *s as i32 * *bs as i32;
                }
                let isum = hsum_i32(sumi[t]) - 32 * offset;
                acc[t] = k_combine(acc[t], d * y.d, isum, 0.0, 0);
            }
        }
        acc
    }
}
