//! The AVX2 products over interleaved IQ4_XS, Q3_K and Q2_K (see
//! [`super::layout_k23`]), for CPUs without AVX-512 VNNI.
//!
//! # IQ4_XS
//!
//! As in [`super::avx2_k`], each group is taken as two halves of eight
//! rows (the lower and upper 32 bytes of every 64-byte chunk). The nibbles
//! are codebook indices: one `vpshufb` per register turns them into the
//! signed values (at most 127 in magnitude,
//! [`crate::blocks::KVALUES_IQ4NL`]).
//!
//! - Without AVX-VNNI, the signed product as for IQ4_NL: `vpmaddubsw` of
//!   the magnitudes against the activations with the values' signs. The
//!   Q8_K activations are at most 127 in magnitude (their quantizer scales
//!   by `-127 / max`), so one pair of products per i16 lane is at most
//!   `2 * 127 * 127 = 32,258`: exact, but two such sums would not be, so
//!   every register is widened alone, by `vpmaddwd` against the sub-block
//!   scale (in `-32..32`) itself: the scale rides in the widening, as for
//!   Q4_K, and no `vpmulld` is needed. At most `2 * 32,258 * 32` per lane
//!   and register, and the super-block's sum is at most
//!   `256 * 127 * 127 * 32 < 2^28` in magnitude: the i32 sums are exact.
//! - With AVX-VNNI, the values are shifted to unsigned bytes (`kv + 128`,
//!   the top bit flipped), so `vpdpbusd` takes them as they are; each
//!   sub-block's sum starts at `-128 * bsum` (the activations' integer
//!   start), which takes the shift back out exactly, and is then
//!   multiplied by its scale (`vpmulld`). `vpdpbusd` sums in i32 without
//!   saturation, so the integers are the same.
//!
//! The super-block's integer sum is the reference's, and the float step
//! is its `acc + ((d · yd) · isum − 0)`, lane by lane.
//!
//! # Q3_K and Q2_K
//!
//! As Q6_K in [`super::avx2_k`]: per 16-quant sub-block four registers of
//! unsigned quants (Q3_K's `q + 4`, at most 7; Q2_K's at most 3), four
//! `vpmaddubsw` per token summed two by two in i16 (at most
//! `2 * 2 * 7 * 127 = 3,556`, exact), widened by `vpmaddwd` against the
//! sub-block scale (Q3_K's in `-32..32`, Q2_K's in `0..16`): at most
//! `2 * 3,556 * 32` per lane. After the sub-block loop, two sub-blocks per
//! `vpmaddwd`: Q3_K's `Σ_s sc_s · init_s` (`init_s = -4 · bsum_s`, at most
//! `4 * 16 * 127 = 8,128` in magnitude, an i16) and Q2_K's
//! `msum = Σ_s min_s · bsum_s` (`bsum_s` at most `2,032`). The super-block
//! sums are at most `256 * 4 * 127 * 32 < 2^22` in magnitude, so every
//! i32 step is exact and the integers are the reference's; the float step
//! is `acc + ((d · yd) · isum − (dmin · yd) · msum)` (Q3_K's minimum term
//! zero), lane by lane.
//!
//! Everything here needs AVX2, FMA and F16C; the dispatcher only hands
//! these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx2::madd_add;
use super::avx2::{bcast4, codebook, dot32_small, madd2_add, nibble_quants, store};
use super::avx2_k::{dot16_by, twice_signed};
use super::layout_k23::{
    IQ4XS_D_AT, IQ4XS_GROUP_BLOCK, IQ4XS_SC_AT, IQ4XS_SUB_BYTES, Q2K_D_AT, Q2K_GROUP_BLOCK,
    Q2K_SC_AT, Q3K_D_AT, Q3K_GROUP_BLOCK, Q3K_PAIR_BYTES, Q3K_SC_AT,
};
use super::tile::{pair16, Acts, Tile, GROUP};
use crate::blocks::KVALUES_IQ4NL;

/// `isum + sc · Σ kv·y` over one 32-quant sub-block of eight rows,
/// without AVX-VNNI: `s` the codebook values (register `k`: quants
/// `4k..4k + 4`), `a` their magnitudes, `sc2` the rows' scales (twice, as
/// i16), `y` the sub-block's activations. See the module notes for the
/// bounds.
///
/// # Safety
/// AVX2; 32 bytes from `y` are readable.
#[inline(always)]
unsafe fn dot32_signed_by(
    s: &[__m256i; 8],
    a: &[__m256i; 8],
    y: *const u8,
    sc2: __m256i,
    isum: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        let mut acc = isum;
        for k in 0..4 {
            let y0 = _mm256_sign_epi8(bcast4(y.add(8 * k)), s[2 * k]);
            let y1 = _mm256_sign_epi8(bcast4(y.add(8 * k + 4)), s[2 * k + 1]);
            let p0 = _mm256_maddubs_epi16(a[2 * k], y0);
            let p1 = _mm256_maddubs_epi16(a[2 * k + 1], y1);
            acc = madd2_add(acc, p0, p1, sc2);
        }
        acc
    }
}

/// `Σ_j sc_j · Σ kv·y` for halves `h0..h0 + N` of block `b` (at `gb`) and
/// every token.
///
/// # Safety
/// As [`tile_iq4xs_t`], with `b < nb` and `h0 + N <= 2`.
#[inline(always)]
unsafe fn iq4xs_sums<const T: usize, const N: usize, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h0: usize,
) -> [[__m256i; T]; N] {
    // SAFETY: the caller's contract; sub-block `j`'s nibbles lie at
    // `256 j` (256 bytes), the scale loads read 8 bytes at
    // `IQ4XS_SC_AT + 16 j + 8 h` (`j < 8`, `h < 2`), all inside the
    // group-block, and the activation reads at `32 j + 4 m` (at most 252)
    // lie inside 256 quants.
    unsafe {
        let book = codebook(&KVALUES_IQ4NL);
        // `kv + 128` as unsigned bytes: the top bit flipped.
        let book_u = _mm256_xor_si256(book, _mm256_set1_epi8(-128));
        let mut isum = [[_mm256_setzero_si256(); T]; N];
        for j in 0..8 {
            // A few tokens outrun the hardware prefetcher; a tile of
            // prefill finds the group cached, where the hint costs little.
            // Once per block: the first half's pass reads every line.
            if h0 == 0 && acts.ahead != 0 {
                for line in (0..IQ4XS_SUB_BYTES).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(
                        gb.wrapping_add(IQ4XS_SUB_BYTES * j + line + acts.ahead) as *const i8,
                    );
                }
            }
            let base = gb.add(IQ4XS_SUB_BYTES * j);
            for (n, isum) in isum.iter_mut().enumerate() {
                let h = h0 + n;
                let sc_at = gb.add(IQ4XS_SC_AT + GROUP * j + 8 * h);
                // Plain loops rather than `map`: a closure would not
                // inherit the caller's target features.
                let mut q = nibble_quants::<false>(base, base, h);
                if V {
                    for q in q.iter_mut() {
                        *q = _mm256_shuffle_epi8(book_u, *q);
                    }
                    let sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(sc_at as *const _));
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let tok = t0 + t;
                        let y = acts.quants(tok, b).as_ptr().add(32 * j);
                        let start = _mm256_set1_epi32(acts.inits(tok, b)[j]);
                        let sub = dot32_small::<true>(&q, y, start);
                        *isum = _mm256_add_epi32(*isum, _mm256_mullo_epi32(sub, sc));
                    }
                } else {
                    let mut a = q;
                    for (s, a) in q.iter_mut().zip(&mut a) {
                        *s = _mm256_shuffle_epi8(book, *s);
                        *a = _mm256_abs_epi8(*s);
                    }
                    let sc2 = twice_signed(sc_at);
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let y = acts.quants(t0 + t, b).as_ptr().add(32 * j);
                        *isum = dot32_signed_by(&q, &a, y, sc2, *isum);
                    }
                }
            }
        }
        isum
    }
}

/// The float step of half `h` of block `b`: `acc + (d · yd) · isum − 0`.
///
/// # Safety
/// As [`tile_iq4xs_t`], with `b < nb` and `h < 2`.
#[inline(always)]
unsafe fn iq4xs_finish<const T: usize>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h: usize,
    isum: &[__m256i; T],
    acc: &mut [__m256; T],
) {
    // SAFETY: the caller's contract; the `d` load reads 16 bytes at
    // `IQ4XS_D_AT + 16 h`, inside the group-block.
    unsafe {
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(IQ4XS_D_AT + 16 * h) as *const _));
        for (t, acc) in acc.iter_mut().enumerate() {
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(acts.d(t0 + t, b)));
            let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t]));
            // The reference subtracts the (zero) minimum term.
            let v = _mm256_sub_ps(v, _mm256_setzero_ps());
            *acc = _mm256_add_ps(*acc, v);
        }
    }
}

/// `T` tokens from `t0` against one IQ4_XS group of `nb` super-blocks.
///
/// Up to two tokens, both halves share the sub-block loop; from three,
/// each half runs it alone, so that fewer running sums are live beside
/// the quant registers (as for Q4_K).
///
/// # Safety
/// AVX2, FMA and F16C (and AVX-VNNI with `V`); `group` holds `nb` IQ4_XS
/// group-blocks and `acts` covers tokens `t0..t0 + T` (Q8_K, eight
/// starts per block).
#[inline(always)]
unsafe fn tile_iq4xs_t<const T: usize, const V: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * IQ4XS_GROUP_BLOCK` with `b < nb`, and
    // the helpers get `h < 2`.
    unsafe {
        debug_assert!(group.len() >= nb * IQ4XS_GROUP_BLOCK);
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * IQ4XS_GROUP_BLOCK);
            if T <= 2 {
                let isum = iq4xs_sums::<T, 2, V>(gb, acts, t0, b, 0);
                for (h, (isum, acc)) in isum.iter().zip(&mut acc).enumerate() {
                    iq4xs_finish::<T>(gb, acts, t0, b, h, isum, acc);
                }
            } else {
                for (h, acc) in acc.iter_mut().enumerate() {
                    let [isum] = iq4xs_sums::<T, 1, V>(gb, acts, t0, b, h);
                    iq4xs_finish::<T>(gb, acts, t0, b, h, &isum, acc);
                }
            }
        }
        store(&acc)
    }
}

/// The AVX2 kernel for interleaved IQ4_XS.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `group` holds `nb` IQ4_XS
/// group-blocks and `acts` covers tokens `t0..t0 + nt` (Q8_K, eight
/// starts per block).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_iq4xs(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height!(nt, tile_iq4xs_t::<_, false>(nb, group, acts, t0)) }
}

/// [`tile_iq4xs`] with AVX-VNNI's `vpdpbusd` on the shifted values.
///
/// # Safety
/// As [`tile_iq4xs`], and the CPU must support AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub unsafe fn tile_iq4xs_vnni(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height!(nt, tile_iq4xs_t::<_, true>(nb, group, acts, t0)) }
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
unsafe fn unpack_q23k<const MIN: bool>(gb: *const u8, s: usize, h: usize) -> [__m256i; 4] {
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
unsafe fn q23k_pairs<const MIN: bool>(gb: *const u8, h: usize) -> [__m256i; 8] {
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

/// `Σ_s sc_s · Σ u·y` for halves `h0..h0 + N` of block `b` (at `gb`) and
/// every token: the scale rides in the `vpmaddwd` (see [`dot16_by`]).
///
/// # Safety
/// As [`tile_q23k_t`], with `b < nb` and `h0 + N <= 2`.
#[inline(always)]
unsafe fn q23k_sums<const T: usize, const N: usize, const MIN: bool, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h0: usize,
) -> [[__m256i; T]; N] {
    // SAFETY: the caller's contract; the helpers get `s < 16` and `h < 2`,
    // and the activation reads at `16 s + 4 m` (at most 252) lie inside
    // 256 quants.
    unsafe {
        let gbytes = q23k_group_block(MIN);
        let mut isum = [[_mm256_setzero_si256(); T]; N];
        for s in 0..16usize {
            // A few tokens outrun the hardware prefetcher; a tile of
            // prefill finds the group cached, where the hint costs little.
            if h0 == 0 && acts.ahead != 0 && s.is_multiple_of(4) {
                let mut line = (gbytes / 4) * (s / 4);
                while line < (gbytes / 4) * (s / 4 + 1) {
                    _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(line + acts.ahead) as *const i8);
                    line += 64;
                }
            }
            for (n, isum) in isum.iter_mut().enumerate() {
                let h = h0 + n;
                let q = unpack_q23k::<MIN>(gb, s, h);
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

/// Takes half `h`'s second sum of block `b` (Q3_K: `Σ_s sc_s · init_s`,
/// added to `isum`; Q2_K: `msum`) and the float step into `acc`.
///
/// # Safety
/// As [`tile_q23k_t`], with `b < nb` and `h < 2`.
#[inline(always)]
unsafe fn q23k_finish<const T: usize, const MIN: bool, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h: usize,
    isum: &[__m256i; T],
    acc: &mut [__m256; T],
) {
    // SAFETY: the caller's contract; the `d` (and `dmin`) loads read 16
    // bytes at `d_at + 16 h` (and `d_at + 32 + 16 h`), inside the
    // group-block.
    unsafe {
        let pairs = q23k_pairs::<MIN>(gb, h);
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
            let yd = _mm256_set1_ps(acts.d(t0 + t, b));
            // Q3_K's minimum term is `0 · 0`, as the reference's.
            let v = _mm256_sub_ps(
                _mm256_mul_ps(_mm256_mul_ps(dw, yd), _mm256_cvtepi32_ps(isum)),
                _mm256_mul_ps(_mm256_mul_ps(dm, yd), _mm256_cvtepi32_ps(msum)),
            );
            *acc = _mm256_add_ps(*acc, v);
        }
    }
}

/// `T` tokens from `t0` against one Q3_K or (`MIN`) Q2_K group of `nb`
/// super-blocks; as for Q4_K, up to two tokens both halves share the
/// sub-block loop, from three each half runs it alone.
///
/// # Safety
/// AVX2, FMA and F16C (and AVX-VNNI with `V`); `group` holds `nb`
/// group-blocks of the type and `acts` covers tokens `t0..t0 + T` (Q8_K,
/// sixteen starts per block).
#[inline(always)]
unsafe fn tile_q23k_t<const T: usize, const MIN: bool, const V: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * gbytes` with `b < nb`, and the helpers
    // get `h < 2`.
    unsafe {
        let gbytes = q23k_group_block(MIN);
        debug_assert!(group.len() >= nb * gbytes);
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * gbytes);
            if T <= 2 {
                let isum = q23k_sums::<T, 2, MIN, V>(gb, acts, t0, b, 0);
                for (h, (isum, acc)) in isum.iter().zip(&mut acc).enumerate() {
                    q23k_finish::<T, MIN, V>(gb, acts, t0, b, h, isum, acc);
                }
            } else {
                for (h, acc) in acc.iter_mut().enumerate() {
                    let [isum] = q23k_sums::<T, 1, MIN, V>(gb, acts, t0, b, h);
                    q23k_finish::<T, MIN, V>(gb, acts, t0, b, h, &isum, acc);
                }
            }
        }
        store(&acc)
    }
}

/// Q3_K (`min` false) or Q2_K, with (`V`) or without AVX-VNNI.
///
/// # Safety
/// As [`tile_q23k`] (and AVX-VNNI with `V`).
#[inline(always)]
unsafe fn tile_q23k_any<const V: bool>(
    min: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: the caller's features and contract are the callee's.
    unsafe {
        if min {
            by_height!(nt, tile_q23k_t::<_, true, V>(nb, group, acts, t0))
        } else {
            by_height!(nt, tile_q23k_t::<_, false, V>(nb, group, acts, t0))
        }
    }
}

/// The AVX2 kernel for interleaved Q3_K (`min` false) and Q2_K.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `group` holds `nb`
/// group-blocks of the type and `acts` covers tokens `t0..t0 + nt` (Q8_K,
/// sixteen starts per block).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_q23k(
    min: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { tile_q23k_any::<false>(min, nb, group, acts, t0, nt) }
}

/// [`tile_q23k`] with AVX-VNNI's fused `vpdpwssd`.
///
/// # Safety
/// As [`tile_q23k`], and the CPU must support AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub unsafe fn tile_q23k_vnni(
    min: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { tile_q23k_any::<true>(min, nb, group, acts, t0, nt) }
}
