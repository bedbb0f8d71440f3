//! AVX-512 VNNI's side of the tile driver ([`super::driver`]) and the
//! helpers its families' kernels share.
//!
//! A 512-bit register holds a whole group: the same four quants of all
//! sixteen rows, so a block is one register part, each token's products
//! are `vpdpbusd` (i32 sums, no saturation) and the sixteen exact sums end
//! in sixteen lanes without horizontal sums.
//!
//! Everything here needs AVX-512 F, BW and VNNI plus F16C; the dispatcher
//! only hands these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::driver::{Simd, PREFETCH};

/// AVX-512 F/BW/VNNI: one register part of sixteen rows.
pub(super) struct Avx512;

impl Simd for Avx512 {
    type F = __m512;
    const SPLIT: bool = false;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: the caller's precondition; registers only.
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: the caller's precondition; registers only.
        unsafe { _mm512_add_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn store(dst: *mut f32, v: __m512) {
        // SAFETY: the caller's precondition: AVX-512 F, room for sixteen
        // floats.
        unsafe { _mm512_storeu_ps(dst, v) }
    }

    #[inline(always)]
    unsafe fn hint(p: *const u8) {
        // SAFETY: prefetches are hints that never fault, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
    }

    #[inline(always)]
    unsafe fn block_hint<const T: usize>(gb: *const u8, bytes: usize, t0: usize) {
        // The first tile of a group reads it from memory, faster than the
        // hardware prefetcher alone follows (see `PREFETCH`): ask for the
        // group-block `PREFETCH` bytes ahead. Later tiles find it cached.
        let mut line = if t0 == 0 { 0 } else { usize::MAX };
        while line < bytes {
            // SAFETY: a hint, see `hint`; `wrapping_add` keeps the pointer
            // arithmetic defined.
            unsafe { Self::hint(gb.wrapping_add(PREFETCH + line)) };
            line += 64;
        }
    }
}

/// Eight registers of 4- or 5-bit quants from four 64-byte chunks of
/// nibbles at `qs` (register `c` the low nibbles of chunk `c`, register
/// `c + 4` the high ones) and, with `FIFTH`, 64 bytes of fifth bits at
/// `qh` laid out as the legacy types and Q5_K store them (bit `k` of each
/// byte belongs to register `k`). Shared by the legacy and Q4_K/Q5_K
/// kernels.
///
/// # Safety
/// AVX-512 F/BW; 256 bytes from `qs` and, with `FIFTH`, 64 from `qh` are
/// readable.
#[inline(always)]
pub(super) unsafe fn nibble_quants<const FIFTH: bool>(
    qs: *const u8,
    qh: *const u8,
) -> [__m512i; 8] {
    // SAFETY: the loads read the ranges the caller guarantees.
    unsafe {
        let m4 = _mm512_set1_epi8(0x0F);
        let mut q = [_mm512_setzero_si512(); 8];
        for c in 0..4 {
            let x = _mm512_loadu_si512(qs.add(64 * c) as *const _);
            q[c] = _mm512_and_si512(x, m4);
            q[c + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4);
        }
        if FIFTH {
            let h = _mm512_loadu_si512(qh as *const _);
            let m10 = _mm512_set1_epi8(0x10);
            let bits = [
                _mm512_slli_epi32::<4>(h),
                _mm512_slli_epi32::<3>(h),
                _mm512_slli_epi32::<2>(h),
                _mm512_slli_epi32::<1>(h),
                h,
                _mm512_srli_epi32::<1>(h),
                _mm512_srli_epi32::<2>(h),
                _mm512_srli_epi32::<3>(h),
            ];
            for (q, b) in q.iter_mut().zip(bits) {
                // (b & 0x10) | q
                *q = _mm512_ternarylogic_epi32::<0xEA>(b, m10, *q);
            }
        }
        q
    }
}

/// `init + Σ q·y` over 32 quants per lane: register `k` of `q` against
/// the four activation bytes at `y + 4k`, broadcast. Two chains of four,
/// so that a lone token does not wait on eight dependent multiply-adds.
///
/// # Safety
/// AVX-512 F and VNNI; 32 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot32(q: &[__m512i; 8], y: *const u8, init: __m512i) -> __m512i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        let mut i0 = init;
        let mut i1 = _mm512_setzero_si512();
        for k in 0..4 {
            let y0 = _mm512_set1_epi32((y.add(8 * k) as *const i32).read_unaligned());
            let y1 = _mm512_set1_epi32((y.add(8 * k + 4) as *const i32).read_unaligned());
            i0 = _mm512_dpbusd_epi32(i0, q[2 * k], y0);
            i1 = _mm512_dpbusd_epi32(i1, q[2 * k + 1], y1);
        }
        _mm512_add_epi32(i0, i1)
    }
}

/// `acc + ((dw · yd) · isum − 0)`, lane by lane: the reference's float
/// step of a type without a minimum (it subtracts the zero term).
///
/// # Safety
/// The module's features.
#[inline(always)]
pub(super) unsafe fn step(acc: __m512, dw: __m512, yd: f32, isum: __m512i) -> __m512 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let d = _mm512_mul_ps(dw, _mm512_set1_ps(yd));
        let v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum));
        // The reference subtracts the (zero) minimum term.
        let v = _mm512_sub_ps(v, _mm512_setzero_ps());
        _mm512_add_ps(acc, v)
    }
}

/// `acc + ((dw · yd) · isum − (dm · yd) · msum)`, lane by lane: the
/// reference's float step of a type with a minimum (Q3_K's is `0 · 0`).
///
/// # Safety
/// The module's features.
#[inline(always)]
pub(super) unsafe fn step_min(
    acc: __m512,
    dw: __m512,
    dm: __m512,
    yd: f32,
    isum: __m512i,
    msum: __m512i,
) -> __m512 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let yd = _mm512_set1_ps(yd);
        let v = _mm512_sub_ps(
            _mm512_mul_ps(_mm512_mul_ps(dw, yd), _mm512_cvtepi32_ps(isum)),
            _mm512_mul_ps(_mm512_mul_ps(dm, yd), _mm512_cvtepi32_ps(msum)),
        );
        _mm512_add_ps(acc, v)
    }
}
