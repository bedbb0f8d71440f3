//! The AVX-512 VNNI products over interleaved IQ4_XS, Q3_K and Q2_K (see
//! [`super::layout_k23`]).
//!
//! # IQ4_XS
//!
//! Per 32-quant sub-block, four 64-byte loads give eight registers of
//! sixteen rows' codebook indices; one `vpshufb` each turns them into the
//! codebook values shifted to unsigned bytes (`kv + 128`, the top bit
//! flipped; AVX-512 has no `vpsignb` for the signed product). Each token
//! of the tile takes eight `vpdpbusd` (i32 sums, no saturation) starting
//! from `-128 * bsum`, which takes the shift back out exactly, then one
//! multiply by the sixteen rows' sub-block scales. The super-block's
//! integer sum is the reference's (at most `256 * 127 * 127 * 32 < 2^28`
//! in magnitude), and so is the float step: `acc + ((d · yd) · isum − 0)`
//! per super-block, in order.
//!
//! # Q3_K and Q2_K
//!
//! As Q6_K in [`super::avx512_k`]: per 16-quant sub-block, four registers
//! of sixteen rows' unsigned quants, four `vpdpbusd` per token, then one
//! multiply by the rows' sub-block scales. The second sums, which do not
//! depend on the quants (Q3_K's `Σ_s sc_s · (-4 · bsum_s)`, Q2_K's
//! `Σ_s min_s · bsum_s`), are taken after the sub-block loop, two
//! sub-blocks per `vpdpwssd` (the operands fit an i16: see
//! [`super::avx2_k23`]). The integers are the reference's, and the float
//! step is `acc + ((d · yd) · isum − (dmin · yd) · msum)` (Q3_K's minimum
//! term zero).
//!
//! Everything here needs AVX-512 F, BW and VNNI plus F16C; the dispatcher
//! only hands these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx512::{dot, nibble_quants};
use super::layout_k23::{
    IQ4XS_D_AT, IQ4XS_GROUP_BLOCK, IQ4XS_SC_AT, IQ4XS_SUB_BYTES, Q2K_D_AT, Q2K_GROUP_BLOCK,
    Q2K_SC_AT, Q3K_D_AT, Q3K_GROUP_BLOCK, Q3K_PAIR_BYTES, Q3K_SC_AT,
};
use super::tile::{pair16, Acts, Tile, GROUP, TILE};
use crate::blocks::KVALUES_IQ4NL;

/// `T` tokens from `t0` against one IQ4_XS group of `nb` super-blocks.
///
/// # Safety
/// AVX-512 F/BW/VNNI and F16C; `group` holds `nb` IQ4_XS group-blocks and
/// `acts` covers tokens `t0..t0 + T` (Q8_K, eight starts per block).
#[inline(always)]
unsafe fn tile_t<const T: usize>(nb: usize, group: &[u8], acts: &Acts, t0: usize) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * IQ4XS_GROUP_BLOCK` with `b < nb`:
    // sub-block `j`'s nibbles at `256 j` (256 bytes), its scales 16 bytes
    // at `IQ4XS_SC_AT + 16 j`, the `d` 32 bytes at `IQ4XS_D_AT`; the
    // activation reads at `32 j + 4 m` (at most 252) lie inside 256 quants;
    // the codebook load reads its 16 bytes.
    unsafe {
        debug_assert!(group.len() >= nb * IQ4XS_GROUP_BLOCK);
        let book = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const _);
        let book_u = _mm512_broadcast_i32x4(_mm_xor_si128(book, _mm_set1_epi8(-128)));
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * IQ4XS_GROUP_BLOCK);
            let mut isum = [_mm512_setzero_si512(); T];
            for j in 0..8 {
                if t0 == 0 && acts.ahead != 0 {
                    for line in (0..IQ4XS_SUB_BYTES).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(IQ4XS_SUB_BYTES * j + line + acts.ahead) as *const i8,
                        );
                    }
                }
                let base = gb.add(IQ4XS_SUB_BYTES * j);
                let mut q = nibble_quants::<false>(base, base);
                // A loop, not `map`: a closure would not inherit the
                // caller's target features.
                for q in q.iter_mut() {
                    *q = _mm512_shuffle_epi8(book_u, *q);
                }
                let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(
                    gb.add(IQ4XS_SC_AT + GROUP * j) as *const _
                ));
                for (t, isum) in isum.iter_mut().enumerate() {
                    let tok = t0 + t;
                    let y = acts.quants(tok, b).as_ptr().add(32 * j);
                    let start = _mm512_set1_epi32(acts.inits(tok, b)[j]);
                    let sub = dot(&q, y, start);
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(IQ4XS_D_AT) as *const _));
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

/// The VNNI kernel for interleaved IQ4_XS.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI and F16C; `group` holds
/// `nb` IQ4_XS group-blocks and `acts` covers tokens `t0..t0 + nt` (Q8_K,
/// eight starts per block).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn tile_iq4xs(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height_wide!(nt, tile_t::<_>(nb, group, acts, t0)) }
}

/// The four quant registers of sub-block `s` of a Q3_K or (`MIN`) Q2_K
/// group-block at `gb`: register `m` holds quants `4m..4m + 4` of the
/// sub-block of all sixteen rows, unsigned.
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole group-block of the type, `s < 16`.
#[inline(always)]
unsafe fn unpack_q23k<const MIN: bool>(gb: *const u8, s: usize) -> [__m512i; 4] {
    // SAFETY: the loads read 64 bytes at `64 s` (Q2_K) or at
    // `192 (s / 2) + 64 (s % 2)` and `192 (s / 2) + 128` (Q3_K), inside the
    // group-block's chunks for `s < 16`.
    unsafe {
        let (l_at, h_at) = if MIN {
            (64 * s, 0)
        } else {
            let p = Q3K_PAIR_BYTES * (s / 2);
            (p + 64 * (s % 2), p + 128)
        };
        let l = _mm512_loadu_si512(gb.add(l_at) as *const _);
        let m3 = _mm512_set1_epi8(3);
        // 16-bit shifts: the bits a byte takes from its neighbour land
        // outside the mask.
        let mut q = [
            _mm512_and_si512(l, m3),
            _mm512_and_si512(_mm512_srli_epi16::<2>(l), m3),
            _mm512_and_si512(_mm512_srli_epi16::<4>(l), m3),
            _mm512_and_si512(_mm512_srli_epi16::<6>(l), m3),
        ];
        if !MIN {
            // Third bit `4 (s % 2) + m` of each byte to bit 2.
            let x = _mm512_loadu_si512(gb.add(h_at) as *const _);
            let hi = if s.is_multiple_of(2) {
                [
                    _mm512_slli_epi16::<2>(x),
                    _mm512_slli_epi16::<1>(x),
                    x,
                    _mm512_srli_epi16::<1>(x),
                ]
            } else {
                [
                    _mm512_srli_epi16::<2>(x),
                    _mm512_srli_epi16::<3>(x),
                    _mm512_srli_epi16::<4>(x),
                    _mm512_srli_epi16::<5>(x),
                ]
            };
            let m4 = _mm512_set1_epi8(4);
            for (q, hi) in q.iter_mut().zip(hi) {
                // (hi & 4) | q
                *q = _mm512_ternarylogic_epi32::<0xEA>(hi, m4, *q);
            }
        }
        q
    }
}

/// The sixteen rows' values of sub-blocks `2k` and `2k + 1` (register
/// `k`), row `r`'s lane holding `2k`'s in its low i16 and `2k + 1`'s in its
/// high one: Q3_K's signed scales, Q2_K's mins (high nibbles).
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole group-block of the type.
#[inline(always)]
unsafe fn q23k_pairs<const MIN: bool>(gb: *const u8) -> [__m512i; 8] {
    // SAFETY: the loads read 16 bytes at `sc_at + 16 s` (`s < 16`), inside
    // the group-block's scales.
    unsafe {
        let at = if MIN { Q2K_SC_AT } else { Q3K_SC_AT };
        let mut out = [_mm512_setzero_si512(); 8];
        for (k, out) in out.iter_mut().enumerate() {
            let mut lo = _mm_loadu_si128(gb.add(at + GROUP * 2 * k) as *const _);
            let mut hi = _mm_loadu_si128(gb.add(at + GROUP * (2 * k + 1)) as *const _);
            if MIN {
                let m = _mm_set1_epi8(0x0F);
                lo = _mm_and_si128(_mm_srli_epi16::<4>(lo), m);
                hi = _mm_and_si128(_mm_srli_epi16::<4>(hi), m);
            }
            let both = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
            *out = if MIN {
                _mm512_cvtepu8_epi16(both)
            } else {
                _mm512_cvtepi8_epi16(both)
            };
        }
        out
    }
}

/// `T` tokens from `t0` against one Q3_K or (`MIN`) Q2_K group of `nb`
/// super-blocks.
///
/// # Safety
/// AVX-512 F/BW/VNNI and F16C; `group` holds `nb` group-blocks of the type
/// and `acts` covers tokens `t0..t0 + T` (Q8_K, sixteen starts per block).
#[inline(always)]
unsafe fn tile_q23k_t<const T: usize, const MIN: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * gbytes` with `b < nb`: the scale loads
    // read 16 bytes at `sc_at + 16 s`, the `d` (and `dmin`) 32 at `d_at`
    // (and `d_at + 32`); the activation reads at `16 s + 4 m` (at most 252)
    // lie inside 256 quants.
    unsafe {
        let gbytes = if MIN {
            Q2K_GROUP_BLOCK
        } else {
            Q3K_GROUP_BLOCK
        };
        let (sc_at, d_at) = if MIN {
            (Q2K_SC_AT, Q2K_D_AT)
        } else {
            (Q3K_SC_AT, Q3K_D_AT)
        };
        debug_assert!(group.len() >= nb * gbytes);
        let mut acc = [_mm512_setzero_ps(); T];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * gbytes);
            let mut isum = [_mm512_setzero_si512(); T];
            for s in 0..16usize {
                if t0 == 0 && acts.ahead != 0 && s.is_multiple_of(4) {
                    let mut line = (gbytes / 4) * (s / 4);
                    while line < (gbytes / 4) * (s / 4 + 1) {
                        _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(line + acts.ahead) as *const i8);
                        line += 64;
                    }
                }
                let q = unpack_q23k::<MIN>(gb, s);
                let sc = _mm_loadu_si128(gb.add(sc_at + GROUP * s) as *const _);
                let sc = if MIN {
                    _mm512_cvtepu8_epi32(_mm_and_si128(sc, _mm_set1_epi8(0x0F)))
                } else {
                    _mm512_cvtepi8_epi32(sc)
                };
                for (t, isum) in isum.iter_mut().enumerate() {
                    let y = acts.quants(t0 + t, b).as_ptr().add(16 * s);
                    let sub = dot(&q, y, _mm512_setzero_si512());
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                }
            }
            let pairs = q23k_pairs::<MIN>(gb);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at) as *const _));
            let dm = if MIN {
                _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at + 2 * GROUP) as *const _))
            } else {
                _mm512_setzero_ps()
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                let i = acts.inits(t0 + t, b);
                let mut second = _mm512_setzero_si512();
                for (k, p) in pairs.iter().enumerate() {
                    let pair = _mm512_set1_epi32(pair16(i[2 * k], i[2 * k + 1]));
                    second = _mm512_dpwssd_epi32(second, *p, pair);
                }
                let (isum, msum) = if MIN {
                    (isum[t], second)
                } else {
                    (_mm512_add_epi32(isum[t], second), _mm512_setzero_si512())
                };
                let yd = _mm512_set1_ps(acts.d(t0 + t, b));
                // Q3_K's minimum term is `0 · 0`, as the reference's.
                let v = _mm512_sub_ps(
                    _mm512_mul_ps(_mm512_mul_ps(dw, yd), _mm512_cvtepi32_ps(isum)),
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

/// The VNNI kernel for interleaved Q3_K (`min` false) and Q2_K.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI and F16C; `group` holds `nb`
/// group-blocks of the type and `acts` covers tokens `t0..t0 + nt` (Q8_K,
/// sixteen starts per block).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub unsafe fn tile_q23k(
    min: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe {
        if min {
            by_height_wide!(nt, tile_q23k_t::<_, true>(nb, group, acts, t0))
        } else {
            by_height_wide!(nt, tile_q23k_t::<_, false>(nb, group, acts, t0))
        }
    }
}
