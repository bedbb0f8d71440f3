//! AVX2's side of the tile driver ([`super::driver`]), for CPUs without
//! AVX-512 VNNI, and the helpers its families' kernels share.
//!
//! A 256-bit register holds half a group: the same four quants of eight
//! rows. Each block is therefore taken as two register parts (rows `0..8`,
//! then `8..16`), the lower and upper 32 bytes of every 64-byte chunk, so
//! the bytes are still read in file order. Without `vpdpbusd`, a byte dot
//! product is `vpmaddubsw` (unsigned quant times signed activation, pairs
//! summed into i16, saturating) then `vpmaddwd` against ones or a weight
//! (pairs of i16 into i32); each family's notes say why its i16 steps stay
//! exact. With AVX-VNNI (`Avx2<true>`) the byte products fuse into
//! `vpdpbusd` where the family says so.
//!
//! Everything here needs AVX2, FMA and F16C; the dispatcher only hands
//! these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::driver::{Simd, PREFETCH};
use crate::blocks::KVALUES_IQ4NL;

/// AVX2, with (`V`) or without AVX-VNNI: two register parts of eight rows.
pub(super) struct Avx2<const V: bool>;

impl<const V: bool> Simd for Avx2<V> {
    type F = __m256;
    const SPLIT: bool = true;

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: the caller's precondition; registers only.
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: the caller's precondition; registers only.
        unsafe { _mm256_add_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn store(dst: *mut f32, v: __m256) {
        // SAFETY: the caller's precondition: AVX, room for eight floats.
        unsafe { _mm256_storeu_ps(dst, v) }
    }

    #[inline(always)]
    unsafe fn hint(p: *const u8) {
        // SAFETY: prefetches are hints that never fault, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
    }

    #[inline(always)]
    unsafe fn block_hint<const T: usize>(gb: *const u8, bytes: usize, _t0: usize) {
        // As on AVX-512, a lone token outruns the hardware prefetcher;
        // prefill tiles reuse the group from the caches.
        let mut line = if T <= 2 { 0 } else { usize::MAX };
        while line < bytes {
            // SAFETY: a hint, see `hint`; `wrapping_add` keeps the pointer
            // arithmetic defined.
            unsafe { Self::hint(gb.wrapping_add(PREFETCH + line)) };
            line += 64;
        }
    }
}

/// `(b & 0x10) | q`.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn put_fifth(b: __m256i, q: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe { _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi8(0x10)), q) }
}

/// Half `h` of the eight registers [`super::avx512::nibble_quants`] makes:
/// 4- or 5-bit quants of rows `8h..8h + 8` from the four 64-byte nibble
/// chunks at `qs` and, with `FIFTH`, the 64 bytes of fifth bits at `qh`.
///
/// # Safety
/// AVX2; 256 bytes from `qs` and, with `FIFTH`, 64 from `qh` are readable;
/// `h < 2`.
#[inline(always)]
pub(super) unsafe fn nibble_quants<const FIFTH: bool>(
    qs: *const u8,
    qh: *const u8,
    h: usize,
) -> [__m256i; 8] {
    // SAFETY: the loads read 32 bytes at `64 c + 32 h` (and `32 h` of the
    // fifth bits), inside the ranges the caller guarantees.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut q = [_mm256_setzero_si256(); 8];
        for c in 0..4 {
            let x = _mm256_loadu_si256(qs.add(64 * c + 32 * h) as *const _);
            q[c] = _mm256_and_si256(x, m4);
            q[c + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4);
        }
        if FIFTH {
            let x = _mm256_loadu_si256(qh.add(32 * h) as *const _);
            q[0] = put_fifth(_mm256_slli_epi32::<4>(x), q[0]);
            q[1] = put_fifth(_mm256_slli_epi32::<3>(x), q[1]);
            q[2] = put_fifth(_mm256_slli_epi32::<2>(x), q[2]);
            q[3] = put_fifth(_mm256_slli_epi32::<1>(x), q[3]);
            q[4] = put_fifth(x, q[4]);
            q[5] = put_fifth(_mm256_srli_epi32::<1>(x), q[5]);
            q[6] = put_fifth(_mm256_srli_epi32::<2>(x), q[6]);
            q[7] = put_fifth(_mm256_srli_epi32::<3>(x), q[7]);
        }
        q
    }
}

/// The four activation bytes at `y`, broadcast.
///
/// # Safety
/// AVX; four bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn bcast4(y: *const u8) -> __m256i {
    // SAFETY: reads `y..y + 4`, the caller's guarantee.
    unsafe { _mm256_set1_epi32((y as *const i32).read_unaligned()) }
}

/// `init + Σ q·y` over 32 quants per lane: register `k` of `q` against
/// activation bytes `y + 4k`, broadcast. With `V` (AVX-VNNI) each register
/// is one `vpdpbusd`, in two independent chains, exact for any unsigned
/// quant byte; without, quants of at most 31 give four products per i16
/// lane (exact, see the module notes), then one widening per four
/// registers. Integer sums, so both
/// give the same integers.
///
/// # Safety
/// AVX2 (and AVX-VNNI with `V`); 32 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot32_small<const V: bool>(
    q: &[__m256i; 8],
    y: *const u8,
    init: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        if V {
            let mut c = [init, _mm256_setzero_si256()];
            for (k, q) in q.iter().enumerate() {
                c[k % 2] = _mm256_dpbusd_avx_epi32(c[k % 2], *q, bcast4(y.add(4 * k)));
            }
            _mm256_add_epi32(c[0], c[1])
        } else {
            // Half by half, each i16 sum widened as soon as it is complete:
            // one sum live instead of the two of `dot32_by`, which keeps a
            // tall tile's running sums in the sixteen registers. With both
            // halves live the legacy tiles ran at a third to a half of this
            // speed from four tokens on (`tile_levels`, plain AVX2, Intel
            // Xeon, thread CPU time).
            let ones = _mm256_set1_epi16(1);
            let mut wide = init;
            for (half, q) in q.chunks_exact(4).enumerate() {
                let mut p = _mm256_setzero_si256();
                for (k, q) in q.iter().enumerate() {
                    let y = bcast4(y.add(16 * half + 4 * k));
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(*q, y));
                }
                wide = _mm256_add_epi32(wide, _mm256_madd_epi16(p, ones));
            }
            wide
        }
    }
}

/// `init + w · Σ q·y`, as [`dot32_small`] but widened by `vpmaddwd`
/// against `w`, a lane's weight twice as i16: that multiplies each pair of
/// i16 sums by the weight and adds them, exactly while
/// `2 * |w| * 31,496` fits an i32 (any i16 weight does). Both halves stay
/// live until one [`madd2_add`]: the K-quant tiles' form (the legacy tiles
/// widen half by half, see [`dot32_small`]), the same
/// with or without AVX-VNNI (see [`madd2_add`]).
///
/// # Safety
/// AVX2; 32 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot32_by(
    q: &[__m256i; 8],
    y: *const u8,
    w: __m256i,
    init: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        let mut p = [_mm256_setzero_si256(); 2];
        for (half, (q, p)) in q.chunks_exact(4).zip(&mut p).enumerate() {
            for (k, q) in q.iter().enumerate() {
                let y = bcast4(y.add(16 * half + 4 * k));
                *p = _mm256_add_epi16(*p, _mm256_maddubs_epi16(*q, y));
            }
        }
        madd2_add(init, p[0], p[1], w)
    }
}

/// `acc + vpmaddwd(p, w)`: one `vpdpwssd` with `V` (AVX-VNNI), two
/// instructions without; the same integers.
///
/// # Safety
/// AVX2 (and AVX-VNNI with `V`).
#[inline(always)]
pub(super) unsafe fn madd_add<const V: bool>(acc: __m256i, p: __m256i, w: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        if V {
            _mm256_dpwssd_avx_epi32(acc, p, w)
        } else {
            _mm256_add_epi32(acc, _mm256_madd_epi16(p, w))
        }
    }
}

/// `acc + vpmaddwd(p0, w) + vpmaddwd(p1, w)`, the two products summed
/// before they meet `acc`, so a running sum waits on one add per call.
/// Two `vpmaddwd` side by side, not a `vpdpwssd` after a `vpmaddwd`, even
/// under AVX-VNNI: the fused form chains the two (ten cycles instead of
/// six) and measured 4-8 % slower in the K-quant tiles on an Intel Xeon
/// with AVX-VNNI (`tile_levels`, thread CPU time).
///
/// # Safety
/// AVX2.
#[inline(always)]
pub(super) unsafe fn madd2_add(acc: __m256i, p0: __m256i, p1: __m256i, w: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let both = _mm256_add_epi32(_mm256_madd_epi16(p0, w), _mm256_madd_epi16(p1, w));
        _mm256_add_epi32(acc, both)
    }
}

/// IQ4_NL's sixteen codebook values in both 128-bit lanes, for
/// `vpshufb`.
///
/// # Safety
/// AVX2.
#[inline(always)]
pub(super) unsafe fn codebook() -> __m256i {
    // SAFETY: the caller's precondition; the load reads the 16-byte table.
    unsafe {
        let t = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const _);
        _mm256_broadcastsi128_si256(t)
    }
}

/// `acc + sc · Σ q·y` over one 16-quant sub-block: register `m` of `q`
/// against activation bytes `y + 4m`, four products per i16 lane (at most
/// `4 * 63 * 127 = 32,004`, exact), each pair of i16 sums widened by
/// `vpmaddwd` against `sc2`, the row's sub-block scale in both i16 halves
/// of its lane (so no `vpmulld`: at most `2 * 32,004 * 128` per lane).
///
/// # Safety
/// AVX2; 16 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot16_by(
    q: &[__m256i; 4],
    y: *const u8,
    sc2: __m256i,
    acc: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 16`.
    unsafe {
        let p0 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[0], bcast4(y)),
            _mm256_maddubs_epi16(q[1], bcast4(y.add(4))),
        );
        let p1 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[2], bcast4(y.add(8))),
            _mm256_maddubs_epi16(q[3], bcast4(y.add(12))),
        );
        madd2_add(acc, p0, p1, sc2)
    }
}

/// Eight signed bytes from `p` (one per row), each sign-extended into
/// both i16 halves of its row's i32 lane: the `vpmaddwd` weight that
/// scales a lane's pair of i16 sums.
///
/// # Safety
/// AVX2; 8 bytes from `p` are readable.
#[inline(always)]
pub(super) unsafe fn twice_signed(p: *const u8) -> __m256i {
    // SAFETY: the load reads `p..p + 8`, the caller's guarantee.
    unsafe {
        let x = _mm_loadl_epi64(p as *const _);
        _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, x))
    }
}

/// `acc + ((dw · yd) · isum − 0)`, lane by lane: the reference's float
/// step of a type without a minimum (it subtracts the zero term).
///
/// # Safety
/// The module's features.
#[inline(always)]
pub(super) unsafe fn step(acc: __m256, dw: __m256, yd: f32, isum: __m256i) -> __m256 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let d = _mm256_mul_ps(dw, _mm256_set1_ps(yd));
        let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
        // The reference subtracts the (zero) minimum term.
        let v = _mm256_sub_ps(v, _mm256_setzero_ps());
        _mm256_add_ps(acc, v)
    }
}

/// `acc + ((dw · yd) · isum − (dm · yd) · msum)`, lane by lane: the
/// reference's float step of a type with a minimum (Q3_K's is `0 · 0`).
///
/// # Safety
/// The module's features.
#[inline(always)]
pub(super) unsafe fn step_min(
    acc: __m256,
    dw: __m256,
    dm: __m256,
    yd: f32,
    isum: __m256i,
    msum: __m256i,
) -> __m256 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let yd = _mm256_set1_ps(yd);
        let v = _mm256_sub_ps(
            _mm256_mul_ps(_mm256_mul_ps(dw, yd), _mm256_cvtepi32_ps(isum)),
            _mm256_mul_ps(_mm256_mul_ps(dm, yd), _mm256_cvtepi32_ps(msum)),
        );
        _mm256_add_ps(acc, v)
    }
}
