//! The interleaved Q3_K and Q2_K products (see [`super::layout_k23`]),
//! per instruction set.
//!
//! # AVX2
//!
//! As Q6_K (see [`super::q6k_x86`]): per 16-quant sub-block four registers
//! of unsigned quants (Q3_K's `q + 4`, at most 7; Q2_K's at most 3), four
//! `vpmaddubsw` per token summed two by two in i16 (at most
//! `2 * 2 * 7 * 127 = 3,556`, exact), widened by `vpmaddwd` against the
//! sub-block scale (Q3_K's in `-32..32`, Q2_K's in `0..16`): at most
//! `2 * 3,556 * 32` per lane. After the sub-block loop, two sub-blocks per
//! `vpmaddwd`: Q3_K's `Σ_s sc_s · init_s` (`init_s = -4 · bsum_s`, at most
//! `4 * 16 * 127 = 8,128` in magnitude, an i16) and Q2_K's
//! `msum = Σ_s min_s · bsum_s` (`bsum_s` at most `2,032`). The super-block
//! sums are at most `256 * 4 * 127 * 32 < 2^22` in magnitude, so every
//! i32 step is exact and the integers are the reference's.
//!
//! # AVX-512 VNNI
//!
//! As Q6_K: per 16-quant sub-block, four registers of sixteen rows'
//! unsigned quants, four `vpdpbusd` per token, then one multiply by the
//! rows' sub-block scales. The second sums, which do not depend on the
//! quants, are taken after the sub-block loop, two sub-blocks per
//! `vpdpwssd` (the operands fit an i16, as above).
//!
//! The float step is the reference's in both:
//! `acc + ((d · yd) · isum − (dmin · yd) · msum)` (Q3_K's minimum term
//! zero), lane by lane.

use std::arch::x86_64::*;

use super::avx2::{dot16_by, madd_add, twice_signed, Avx2};
use super::avx512::Avx512;
use super::driver::{pair16, Block, KQuant, PREFETCH};
use super::layout_k23::{
    Q2K_D_AT, Q2K_GROUP_BLOCK, Q2K_SC_AT, Q3K_D_AT, Q3K_GROUP_BLOCK, Q3K_PAIR_BYTES, Q3K_SC_AT,
};
use super::shape::GROUP;
use super::{avx2, avx512};

/// Q3_K, or with `MIN` Q2_K.
pub(super) struct Q23K<const MIN: bool>;

impl<const MIN: bool, const V: bool> KQuant<Avx2<V>> for Q23K<MIN> {
    const GROUP_BLOCK: usize = q23k_group_block(MIN);
    type Sum = __m256i;

    /// `Σ_s sc_s · Σ u·y`: the scale rides in the `vpmaddwd` (see
    /// `avx2::dot16_by`).
    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, h0: usize) -> [[__m256i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the helpers get `s < 16` and `h < 2`,
        // and the activation reads at `16 s + 4 m` (at most 252) lie inside
        // 256 quants.
        unsafe {
            let gbytes = q23k_group_block(MIN);
            let mut isum = [[_mm256_setzero_si256(); T]; N];
            for s in 0..16usize {
                // A few tokens outrun the hardware prefetcher; a tile of
                // prefill finds the group cached, where the hint costs little.
                if h0 == 0 && s.is_multiple_of(4) {
                    let mut line = (gbytes / 4) * (s / 4);
                    while line < (gbytes / 4) * (s / 4 + 1) {
                        _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(line + PREFETCH) as *const i8);
                        line += 64;
                    }
                }
                for (n, isum) in isum.iter_mut().enumerate() {
                    let h = h0 + n;
                    let q = unpack_avx2::<MIN>(gb, s, h);
                    let sc2 = q23k_scale2::<MIN>(gb, s, h);
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let y = acts.quants(t0 + t, b).as_ptr().add(16 * s);
                        *isum = dot16_by(&q, y, sc2, *isum);
                    }
                }
            }
            isum
        }
    }

    /// Takes half `h`'s second sum (Q3_K: `Σ_s sc_s · init_s`, added to
    /// `isum`; Q2_K: `msum`) and the float step into `acc`.
    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        h: usize,
        isum: &[__m256i; T],
        acc: &mut [__m256; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the `d` (and `dmin`) loads read 16
        // bytes at `d_at + 16 h` (and `d_at + 32 + 16 h`), inside the
        // group-block.
        unsafe {
            let pairs = pairs_avx2::<MIN>(gb, h);
            let d_at = if MIN { Q2K_D_AT } else { Q3K_D_AT };
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(d_at + 16 * h) as *const _));
            let dm = if MIN {
                _mm256_cvtph_ps(_mm_loadu_si128(
                    gb.add(d_at + 2 * GROUP + 16 * h) as *const _
                ))
            } else {
                _mm256_setzero_ps()
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                let i = acts.inits(t0 + t, b);
                let mut second = _mm256_setzero_si256();
                for (k, p) in pairs.iter().enumerate() {
                    let pair = _mm256_set1_epi32(pair16(i[2 * k], i[2 * k + 1]));
                    second = madd_add::<V>(second, *p, pair);
                }
                let (isum, msum) = if MIN {
                    (isum[t], second)
                } else {
                    (_mm256_add_epi32(isum[t], second), _mm256_setzero_si256())
                };
                // Q3_K's minimum term is `0 · 0`, as the reference's.
                *acc = avx2::step_min(*acc, dw, dm, acts.d(t0 + t, b), isum, msum);
            }
        }
    }
}

/// Group-block bytes of Q2_K (`MIN`) or Q3_K.
const fn q23k_group_block(min: bool) -> usize {
    if min {
        Q2K_GROUP_BLOCK
    } else {
        Q3K_GROUP_BLOCK
    }
}

/// Half `h` of the four quant registers of sub-block `s` of a Q3_K or
/// (`MIN`) Q2_K group-block at `gb`: register `m` holds quants
/// `4m..4m + 4` of the sub-block, unsigned.
///
/// # Safety
/// AVX2; `gb` points at a whole group-block of the type, `s < 16`, `h < 2`.
#[inline(always)]
unsafe fn unpack_avx2<const MIN: bool>(gb: *const u8, s: usize, h: usize) -> [__m256i; 4] {
    // SAFETY: the loads read 32 bytes at `64 s + 32 h` (Q2_K) or at
    // `192 (s / 2) + 64 (s % 2) + 32 h` and `192 (s / 2) + 128 + 32 h`
    // (Q3_K), inside the chunks of the group-block for `s < 16`.
    unsafe {
        let (l_at, h_at) = if MIN {
            (64 * s, 0)
        } else {
            let p = Q3K_PAIR_BYTES * (s / 2);
            (p + 64 * (s % 2), p + 128)
        };
        let l = _mm256_loadu_si256(gb.add(l_at + 32 * h) as *const _);
        let m3 = _mm256_set1_epi8(3);
        // 16-bit shifts: the bits a byte takes from its neighbour land
        // outside the mask.
        let mut q = [
            _mm256_and_si256(l, m3),
            _mm256_and_si256(_mm256_srli_epi16::<2>(l), m3),
            _mm256_and_si256(_mm256_srli_epi16::<4>(l), m3),
            _mm256_and_si256(_mm256_srli_epi16::<6>(l), m3),
        ];
        if !MIN {
            // Third bit `4 (s % 2) + m` of each byte to bit 2.
            let x = _mm256_loadu_si256(gb.add(h_at + 32 * h) as *const _);
            let hi = if s.is_multiple_of(2) {
                [
                    _mm256_slli_epi16::<2>(x),
                    _mm256_slli_epi16::<1>(x),
                    x,
                    _mm256_srli_epi16::<1>(x),
                ]
            } else {
                [
                    _mm256_srli_epi16::<2>(x),
                    _mm256_srli_epi16::<3>(x),
                    _mm256_srli_epi16::<4>(x),
                    _mm256_srli_epi16::<5>(x),
                ]
            };
            let m4 = _mm256_set1_epi8(4);
            for (q, hi) in q.iter_mut().zip(hi) {
                *q = _mm256_or_si256(*q, _mm256_and_si256(hi, m4));
            }
        }
        q
    }
}

/// Eight scale bytes of sub-block `s` for half `h`, each twice as i16 in
/// its row's lane: Q3_K's signed ones, Q2_K's low nibbles.
///
/// # Safety
/// AVX2; `gb` points at a whole group-block of the type, `s < 16`, `h < 2`.
#[inline(always)]
unsafe fn q23k_scale2<const MIN: bool>(gb: *const u8, s: usize, h: usize) -> __m256i {
    // SAFETY: the loads read 8 bytes at `sc_at + 16 s + 8 h`, inside the
    // group-block's scales.
    unsafe {
        if MIN {
            let x = _mm_loadl_epi64(gb.add(Q2K_SC_AT + GROUP * s + 8 * h) as *const _);
            let x = _mm_and_si128(x, _mm_set1_epi8(0x0F));
            _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, x))
        } else {
            twice_signed(gb.add(Q3K_SC_AT + GROUP * s + 8 * h))
        }
    }
}

/// The pairs of sub-blocks `2k, 2k + 1` (register `k`) for half `h`, row
/// `r`'s lane holding sub-block `2k`'s value in its low i16 and `2k + 1`'s
/// in its high one: Q3_K's signed scales, Q2_K's mins (high nibbles).
///
/// # Safety
/// AVX2; `gb` points at a whole group-block of the type, `h < 2`.
#[inline(always)]
unsafe fn pairs_avx2<const MIN: bool>(gb: *const u8, h: usize) -> [__m256i; 8] {
    // SAFETY: the loads read 8 bytes at `sc_at + 16 s + 8 h` (`s < 16`),
    // inside the group-block's scales.
    unsafe {
        let at = if MIN { Q2K_SC_AT } else { Q3K_SC_AT };
        let mut out = [_mm256_setzero_si256(); 8];
        for (k, out) in out.iter_mut().enumerate() {
            let lo = _mm_loadl_epi64(gb.add(at + GROUP * 2 * k + 8 * h) as *const _);
            let hi = _mm_loadl_epi64(gb.add(at + GROUP * (2 * k + 1) + 8 * h) as *const _);
            *out = if MIN {
                let m = _mm_set1_epi8(0x0F);
                let lo = _mm_and_si128(_mm_srli_epi16::<4>(lo), m);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(hi), m);
                _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(lo, hi))
            } else {
                _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(lo, hi))
            };
        }
        out
    }
}

impl<const MIN: bool> KQuant<Avx512> for Q23K<MIN> {
    const GROUP_BLOCK: usize = q23k_group_block(MIN);
    type Sum = __m512i;

    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, _h0: usize) -> [[__m512i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features and bounds are the caller's contract:
        // the scale loads read 16 bytes at `sc_at + 16 s`; the activation
        // reads at `16 s + 4 m` (at most 252) lie inside 256 quants.
        unsafe {
            let gbytes = q23k_group_block(MIN);
            let sc_at = if MIN { Q2K_SC_AT } else { Q3K_SC_AT };
            let mut out = [[_mm512_setzero_si512(); T]; N];
            let isum = &mut out[0];
            for s in 0..16usize {
                if t0 == 0 && s.is_multiple_of(4) {
                    let mut line = (gbytes / 4) * (s / 4);
                    while line < (gbytes / 4) * (s / 4 + 1) {
                        _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(line + PREFETCH) as *const i8);
                        line += 64;
                    }
                }
                let q = unpack_avx512::<MIN>(gb, s);
                let sc = _mm_loadu_si128(gb.add(sc_at + GROUP * s) as *const _);
                let sc = if MIN {
                    _mm512_cvtepu8_epi32(_mm_and_si128(sc, _mm_set1_epi8(0x0F)))
                } else {
                    _mm512_cvtepi8_epi32(sc)
                };
                for (t, isum) in isum.iter_mut().enumerate() {
                    let y = acts.quants(t0 + t, b).as_ptr().add(16 * s);
                    let mut sub = _mm512_setzero_si512();
                    for (m, q) in q.iter().enumerate() {
                        let ym = _mm512_set1_epi32((y.add(4 * m) as *const i32).read_unaligned());
                        sub = _mm512_dpbusd_epi32(sub, *q, ym);
                    }
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                }
            }
            out
        }
    }

    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        _h: usize,
        isum: &[__m512i; T],
        acc: &mut [__m512; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the `d` (and `dmin`) loads read
        // 32 bytes at `d_at` (and `d_at + 32`), inside the group-block.
        unsafe {
            let d_at = if MIN { Q2K_D_AT } else { Q3K_D_AT };
            let pairs = pairs_avx512::<MIN>(gb);
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
                // Q3_K's minimum term is `0 · 0`, as the reference's.
                *acc = avx512::step_min(*acc, dw, dm, acts.d(t0 + t, b), isum, msum);
            }
        }
    }
}

/// The four quant registers of sub-block `s` of a Q3_K or (`MIN`) Q2_K
/// group-block at `gb`: register `m` holds quants `4m..4m + 4` of the
/// sub-block of all sixteen rows, unsigned.
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole group-block of the type, `s < 16`.
#[inline(always)]
unsafe fn unpack_avx512<const MIN: bool>(gb: *const u8, s: usize) -> [__m512i; 4] {
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
unsafe fn pairs_avx512<const MIN: bool>(gb: *const u8) -> [__m512i; 8] {
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
