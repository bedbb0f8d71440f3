//! The AVX-512 VNNI product over the interleaved layout.
//!
//! Per block, the sixteen rows' quants are unpacked once into eight
//! registers (quants `4k..4k + 4` of every row in register `k`); each token
//! of the tile then takes eight `vpdpbusd` against its own four activation
//! bytes broadcast, leaving the sixteen exact block sums in sixteen lanes.
//! The integer start value carries the quant offset (`-offset * sum(y)`),
//! so the sums equal the reference's signed ones. The float steps are the
//! reference's, lane by lane: `(dw * da) * isum` (plus `m * s`), added to
//! running sum `b % 4`, combined as `(s0 + s2) + (s1 + s3)` at the end.
//!
//! Everything here needs AVX-512 F, BW and VNNI plus F16C; the dispatcher
//! only hands these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::layout::Format;
use super::tile::{Acts, Tile, GROUP, TILE};
use crate::blocks::{KVALUES_IQ4NL, KVALUES_MXFP4};

/// The eight quant registers of one group-block at `gb`. With `CB`
/// (IQ4_NL, or MXFP4 with `E8`) the nibbles index the codebook, looked up
/// as unsigned bytes `value + 128` (the format's offset) so that
/// `vpdpbusd` takes them.
///
/// # Safety
/// AVX-512 F/BW; `gb` must point at a whole group-block of format `F`.
#[inline(always)]
unsafe fn unpack<const NIB: bool, const FIFTH: bool, const CB: bool, const E8: bool>(
    f: &Format,
    gb: *const u8,
) -> [__m512i; 8] {
    // SAFETY: the loads read inside the group-block (quant chunks at
    // `64 * c`, fifth bits at `qh_at`), whose size the caller guarantees;
    // the codebook load reads its 16 bytes.
    unsafe {
        if !NIB {
            let mut q = [_mm512_setzero_si512(); 8];
            for (k, q) in q.iter_mut().enumerate() {
                *q = _mm512_loadu_si512(gb.add(64 * k) as *const _);
            }
            return q;
        }
        let mut q = nibble_quants::<FIFTH>(gb, gb.add(f.qh_at()));
        if CB {
            let book = if E8 { &KVALUES_MXFP4 } else { &KVALUES_IQ4NL };
            let table = _mm512_broadcast_i32x4(_mm_add_epi8(
                _mm_loadu_si128(book.as_ptr() as *const _),
                _mm_set1_epi8(-128),
            ));
            for q in &mut q {
                *q = _mm512_shuffle_epi8(table, *q);
            }
        }
        q
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

/// Sixteen E8M0 scale bytes widened to their f32 values halved, exactly
/// as [`crate::blocks::e8m0_to_f32_half`]: `(e - 1) << 23` as float bits,
/// and for `e` 0 and 1 the subnormals `0x0020_0000 << e`.
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
pub(super) unsafe fn e8m0_half(e: __m128i) -> __m512 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let e = _mm512_cvtepu8_epi32(e);
        let normal = _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, _mm512_set1_epi32(1)));
        let small = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
        let tiny = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
        _mm512_castsi512_ps(_mm512_mask_blend_epi32(tiny, normal, small))
    }
}

/// `init + Σ q·y` over `4 R` quants per lane (32 for the blocks of the
/// legacy types and Q4_K/Q5_K, 16 for the sub-blocks of Q6_K, Q3_K and
/// Q2_K): register `k` of `q` against the four activation bytes at
/// `y + 4k`, broadcast. Two chains, the even registers and the odd ones,
/// so that a lone token does not wait on `R` dependent multiply-adds (the
/// i32 sums are exact, so the split does not change them). `R` is even.
///
/// # Safety
/// AVX-512 F and VNNI; `4 R` bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot<const R: usize>(q: &[__m512i; R], y: *const u8, init: __m512i) -> __m512i {
    // SAFETY: the caller's contract; the loads read `y..y + 4 R`.
    unsafe {
        let mut i0 = init;
        let mut i1 = _mm512_setzero_si512();
        for k in 0..R / 2 {
            let y0 = _mm512_set1_epi32((y.add(8 * k) as *const i32).read_unaligned());
            let y1 = _mm512_set1_epi32((y.add(8 * k + 4) as *const i32).read_unaligned());
            i0 = _mm512_dpbusd_epi32(i0, q[2 * k], y0);
            i1 = _mm512_dpbusd_epi32(i1, q[2 * k + 1], y1);
        }
        _mm512_add_epi32(i0, i1)
    }
}

/// One block for every token of the tile, added to running sums `acc`.
///
/// # Safety
/// As [`tile`]; `b` must be below the row's block count.
#[inline(always)]
unsafe fn block<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
>(
    f: &Format,
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    acc: &mut [__m512; T],
) {
    // SAFETY: the CPU features are the caller's precondition; the scale
    // loads read 32 bytes at `d_at` and `m_at` (16 at `d_at` for E8M0),
    // inside the group-block, and
    // `quants` gives 32 bytes of which the broadcasts read `4k..4k + 4`.
    unsafe {
        // The first tile of a group reads it from memory, on some cores
        // faster than the hardware prefetcher alone follows (see
        // `Acts::ahead`): ask for the group-block that far ahead. Later
        // tiles find it cached.
        let mut line = if t0 == 0 && acts.ahead != 0 {
            0
        } else {
            usize::MAX
        };
        while line < f.group_block_bytes() {
            _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(acts.ahead + line) as *const i8);
            line += 64;
        }
        let q = unpack::<NIB, FIFTH, CB, E8>(f, gb);
        let dw = if E8 {
            e8m0_half(_mm_loadu_si128(gb.add(f.d_at()) as *const _))
        } else {
            _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(f.d_at()) as *const _))
        };
        let mw = if MIN {
            _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(f.m_at()) as *const _))
        } else {
            _mm512_setzero_ps()
        };
        for (t, acc) in acc.iter_mut().enumerate() {
            let tok = t0 + t;
            let y = acts.quants(tok, b).as_ptr();
            let isum = dot(&q, y, _mm512_set1_epi32(acts.init(tok, b)));
            let d = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d(tok, b)));
            let mut v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum));
            if MIN {
                v = _mm512_add_ps(v, _mm512_mul_ps(mw, _mm512_set1_ps(acts.s(tok, b))));
            }
            *acc = _mm512_add_ps(*acc, v);
        }
    }
}

/// `T` tokens from `t0` against one group of `nb` blocks.
///
/// # Safety
/// AVX-512 F/BW/VNNI and F16C; `group` holds `nb` group-blocks of `f`,
/// and `acts` covers tokens `t0..t0 + T` with `nb` blocks each.
#[inline(always)]
unsafe fn tile_t<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: as the function's contract; `block` gets `b < nb` and the
    // group-block at `b * gbytes`, inside `group` (`nb * gbytes` bytes).
    unsafe {
        let gbytes = f.group_block_bytes();
        debug_assert!(group.len() >= nb * gbytes);
        let base = group.as_ptr();
        let z = [_mm512_setzero_ps(); T];
        let mut acc = [z; 4];
        // Plain calls, no closure: a closure would not inherit this
        // function's target features and its intrinsics would not inline.
        let mut b = 0;
        while b + 4 <= nb {
            let [a0, a1, a2, a3] = &mut acc;
            block::<T, NIB, FIFTH, MIN, CB, E8>(f, base.add(b * gbytes), acts, t0, b, a0);
            block::<T, NIB, FIFTH, MIN, CB, E8>(f, base.add((b + 1) * gbytes), acts, t0, b + 1, a1);
            block::<T, NIB, FIFTH, MIN, CB, E8>(f, base.add((b + 2) * gbytes), acts, t0, b + 2, a2);
            block::<T, NIB, FIFTH, MIN, CB, E8>(f, base.add((b + 3) * gbytes), acts, t0, b + 3, a3);
            b += 4;
        }
        for (s, acc) in acc.iter_mut().enumerate().take(nb - b) {
            block::<T, NIB, FIFTH, MIN, CB, E8>(
                f,
                base.add((b + s) * gbytes),
                acts,
                t0,
                b + s,
                acc,
            );
        }
        let mut out = [[0.0f32; GROUP]; TILE];
        for (t, out) in out.iter_mut().enumerate().take(T) {
            let v = _mm512_add_ps(
                _mm512_add_ps(acc[0][t], acc[2][t]),
                _mm512_add_ps(acc[1][t], acc[3][t]),
            );
            _mm512_storeu_ps(out.as_mut_ptr(), v);
        }
        out
    }
}

/// Dispatches on the tile height for one format.
///
/// # Safety
/// As [`tile_t`], for `nt` tokens (1 to [`TILE`]).
#[inline(always)]
unsafe fn tile_n<
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: the caller's contract, for the tile height chosen.
    unsafe {
        by_height_wide!(
            nt,
            tile_t::<_, NIB, FIFTH, MIN, CB, E8>(f, nb, group, acts, t0)
        )
    }
}

/// The VNNI kernel for any interleaved format.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI and F16C; `group` holds `nb`
/// group-blocks of `f`, and `acts` covers tokens `t0..t0 + nt`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe {
        match (f.codebook, f.e8m0) {
            (true, true) => tile_n::<true, false, false, true, true>(f, nb, group, acts, t0, nt),
            (true, false) => tile_n::<true, false, false, true, false>(f, nb, group, acts, t0, nt),
            _ => by_legacy_format!(f, tile_n::<.., false, false>(f, nb, group, acts, t0, nt)),
        }
    }
}
