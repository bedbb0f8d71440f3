//! The AVX-512 VNNI product over interleaved Q6_K (see
//! [`super::layout_k`]).
//!
//! Per 16-quant sub-block, three 64-byte loads give four registers of
//! sixteen rows' 6-bit quants; each token of the tile takes four
//! `vpdpbusd` starting from `-32 * bsum` (the offset, exactly), then one
//! multiply by the sixteen rows' sub-block scales. The super-block's
//! integer sum is the reference's, and so are the float steps:
//! `acc + (d * yd) * isum` per super-block, in order.
//!
//! Everything here needs AVX-512 F, BW and VNNI plus F16C; the dispatcher
//! only hands these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx512::dot;
use super::layout_k::{
    q45k_d_at, q45k_group_block, q45k_sc_at, q45k_sub_bytes, Q6K_D_AT, Q6K_GROUP_BLOCK, Q6K_SC_AT,
};
use super::tile::{pair16, prefetch, Acts, Tile, GROUP, TILE};

/// `(hi & mask) | lo`. A function rather than a closure: closures do not
/// inherit the caller's target features, so their intrinsics would not
/// inline.
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn put(hi: __m512i, mask: __m512i, lo: __m512i) -> __m512i {
    // SAFETY: the caller's precondition; registers only.
    unsafe { _mm512_ternarylogic_epi32::<0xEA>(hi, mask, lo) }
}

/// The four quant registers of sub-block `s` of the group-block at `gb`.
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole Q6_K group-block and `s < 16`.
#[inline(always)]
unsafe fn unpack_sub(gb: *const u8, s: usize) -> [__m512i; 4] {
    // SAFETY: the three loads read bytes `192 s..192 s + 192`, inside the
    // group-block's 3,072 bytes of quants for `s < 16`.
    unsafe {
        let base = gb.add(192 * s);
        let a = _mm512_loadu_si512(base as *const _);
        let b = _mm512_loadu_si512(base.add(64) as *const _);
        let h = _mm512_loadu_si512(base.add(128) as *const _);
        let m4 = _mm512_set1_epi8(0x0F);
        let m30 = _mm512_set1_epi8(0x30);
        [
            put(_mm512_slli_epi32::<4>(h), m30, _mm512_and_si512(a, m4)),
            put(_mm512_slli_epi32::<2>(h), m30, _mm512_and_si512(b, m4)),
            put(h, m30, _mm512_and_si512(_mm512_srli_epi16::<4>(a), m4)),
            put(
                _mm512_srli_epi32::<2>(h),
                m30,
                _mm512_and_si512(_mm512_srli_epi16::<4>(b), m4),
            ),
        ]
    }
}

/// `T` tokens from `t0` against one group of `nb` super-blocks.
///
/// # Safety
/// AVX-512 F/BW/VNNI and F16C; `group` holds `nb` Q6_K group-blocks and
/// `acts` covers tokens `t0..t0 + T` (Q8_K, sixteen starts per block).
#[inline(always)]
unsafe fn tile_t<const T: usize>(nb: usize, group: &[u8], acts: &Acts, t0: usize) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * Q6K_GROUP_BLOCK` with `b < nb`, and the
    // activation reads at `16 s + 4 m` (at most 252) inside 256 quants.
    unsafe {
        debug_assert!(group.len() >= nb * Q6K_GROUP_BLOCK);
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * Q6K_GROUP_BLOCK);
            let mut isum = [_mm512_setzero_si512(); T];
            for s in 0..16 {
                if t0 == 0 && acts.ahead != 0 {
                    prefetch(gb.wrapping_add(192 * s + acts.ahead));
                }
                let q = unpack_sub(gb, s);
                let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(
                    gb.add(Q6K_SC_AT + GROUP * s) as *const _
                ));
                for (t, isum) in isum.iter_mut().enumerate() {
                    let tok = t0 + t;
                    let y = acts.quants(tok, b).as_ptr().add(16 * s);
                    let init = _mm512_set1_epi32(*acts.inits(tok, b).get_unchecked(s));
                    let sub = dot(&q, y, init);
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(Q6K_D_AT) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d(t0 + t, b)));
                let v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t]));
                // The reference subtracts the (zero) minimum term.
                let v = _mm512_sub_ps(v, _mm512_setzero_ps());
                *acc = _mm512_add_ps(*acc, v);
            }
        }
        let mut out = [[0.0f32; GROUP]; TILE];
        for (out, acc) in out.iter_mut().zip(&acc) {
            _mm512_storeu_ps(out.as_mut_ptr(), *acc);
        }
        out
    }
}

/// The VNNI kernel for interleaved Q6_K.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI and F16C; `group` holds `nb`
/// Q6_K group-blocks and `acts` covers tokens `t0..t0 + nt` (Q8_K, sixteen
/// starts per block).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn tile_q6k(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height_wide!(nt, tile_t::<_>(nb, group, acts, t0)) }
}

/// The eight quant registers of sub-block `j` of a Q4_K/Q5_K group-block
/// at `gb` (quants `4m..4m + 4` of the sub-block in register `m`).
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole group-block and `j < 8`.
#[inline(always)]
unsafe fn unpack_q45k<const FIFTH: bool>(gb: *const u8, j: usize) -> [__m512i; 8] {
    // SAFETY: the sub-block's chunks, `q45k_sub_bytes` bytes at
    // `j * q45k_sub_bytes` (nibbles, then the fifth bits at 256), lie
    // inside the group-block for `j < 8`.
    unsafe {
        let base = gb.add(q45k_sub_bytes(FIFTH) * j);
        super::avx512::nibble_quants::<FIFTH>(base, base.wrapping_add(256))
    }
}

/// The sixteen rows' 6-bit mins of sub-blocks `2k` and `2k + 1` (register
/// `k`) from the group-block's mins at `mn`, row `r`'s lane holding
/// `2k`'s in its low i16 and `2k + 1`'s in its high one: against a
/// broadcast pair of `bsum`s, one `vpdpwssd` takes two sub-blocks' min
/// terms, where one `vpmulld` (two micro-ops on Intel and AMD alike) per
/// sub-block and token took one.
///
/// # Safety
/// AVX-512 F/BW; the 128 bytes from `mn` (eight sub-blocks of sixteen
/// rows) are readable.
#[inline(always)]
unsafe fn q45k_min_pairs(mn: *const u8) -> [__m512i; 4] {
    // SAFETY: the loads read 16 bytes at `mn + 16 j` for `j < 8`.
    unsafe {
        let mut out = [_mm512_setzero_si512(); 4];
        for (k, out) in out.iter_mut().enumerate() {
            let lo = _mm_loadu_si128(mn.add(GROUP * 2 * k) as *const _);
            let hi = _mm_loadu_si128(mn.add(GROUP * (2 * k + 1)) as *const _);
            let both = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
            *out = _mm512_cvtepu8_epi16(both);
        }
        out
    }
}

/// `T` tokens from `t0` against one Q4_K/Q5_K group of `nb` super-blocks.
///
/// # Safety
/// AVX-512 F/BW/VNNI and F16C; `group` holds `nb` group-blocks and `acts`
/// covers tokens `t0..t0 + T` (Q8_K, eight sub-block sums per block).
#[inline(always)]
unsafe fn tile_q45k_t<const T: usize, const FIFTH: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * gbytes` with `b < nb`; activation reads
    // at `32 j + 4 m` (at most 252) inside 256 quants.
    unsafe {
        let gbytes = q45k_group_block(FIFTH);
        debug_assert!(group.len() >= nb * gbytes);
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * gbytes);
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..8 {
                if t0 == 0 && acts.ahead != 0 {
                    for line in (0..q45k_sub_bytes(FIFTH)).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(q45k_sub_bytes(FIFTH) * j + line + acts.ahead)
                                as *const i8,
                        );
                    }
                }
                let q = unpack_q45k::<FIFTH>(gb, j);
                let at = q45k_sc_at(FIFTH) + GROUP * j;
                let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(gb.add(at) as *const _));
                for (t, isum) in isum.iter_mut().enumerate() {
                    let y = acts.quants(t0 + t, b).as_ptr().add(32 * j);
                    let sub = dot(&q, y, _mm512_setzero_si512());
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                }
            }
            let mins = q45k_min_pairs(gb.add(q45k_sc_at(FIFTH) + 8 * GROUP));
            let d_at = q45k_d_at(FIFTH);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at) as *const _));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at + 2 * GROUP) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                // `msum = Σ_j min_j · bsum_j`, two sub-blocks per
                // `vpdpwssd`: exact in i32, so the reference's integer.
                let i = acts.inits(t0 + t, b);
                let mut msum = _mm512_setzero_si512();
                for (k, mn) in mins.iter().enumerate() {
                    let pair = _mm512_set1_epi32(pair16(i[2 * k], i[2 * k + 1]));
                    msum = _mm512_dpwssd_epi32(msum, *mn, pair);
                }
                let yd = _mm512_set1_ps(acts.d(t0 + t, b));
                let v = _mm512_sub_ps(
                    _mm512_mul_ps(_mm512_mul_ps(dw, yd), _mm512_cvtepi32_ps(isum[t])),
                    _mm512_mul_ps(_mm512_mul_ps(dm, yd), _mm512_cvtepi32_ps(msum)),
                );
                *acc = _mm512_add_ps(*acc, v);
            }
        }
        let mut out = [[0.0f32; GROUP]; TILE];
        for (out, acc) in out.iter_mut().zip(&acc) {
            _mm512_storeu_ps(out.as_mut_ptr(), *acc);
        }
        out
    }
}

/// The VNNI kernel for interleaved Q4_K (`fifth` false) and Q5_K.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI and F16C; `group` holds `nb`
/// group-blocks of the type and `acts` covers tokens `t0..t0 + nt` (Q8_K,
/// eight sub-block sums per block).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn tile_q45k(
    fifth: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe {
        if fifth {
            by_height_wide!(nt, tile_q45k_t::<_, true>(nb, group, acts, t0))
        } else {
            by_height_wide!(nt, tile_q45k_t::<_, false>(nb, group, acts, t0))
        }
    }
}
