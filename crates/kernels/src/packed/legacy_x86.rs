//! The legacy (32-quant) formats' block products over the interleaved
//! layout (see [`super::layout`]), per instruction set.
//!
//! # AVX2
//!
//! Each block is taken as two register parts of eight rows (see
//! [`super::avx2`]). The i16 steps of `vpmaddubsw` are exact because the
//! sums stay in range:
//!
//! - 4- and 5-bit quants (at most 31) against activations of magnitude at
//!   most 127: four products summed per i16 lane, at most
//!   `4 * 2 * 31 * 127 = 31,496`;
//! - Q8_0 quants are signed, so they take the sign trick (`|q|` against
//!   `sign(q) * y`, at most `2 * 128 * 127 = 32,512`) and no integer start,
//!   since the stored `q + 128` is undone first.
//!
//! Integer sums are then the reference's exactly, and the float steps are
//! the AVX-512 kernel's (and so the scalar reference's) lane by lane.
//!
//! # AVX-512 VNNI
//!
//! Per block, the sixteen rows' quants are unpacked once into eight
//! registers (quants `4k..4k + 4` of every row in register `k`); each token
//! of the tile then takes eight `vpdpbusd` against its own four activation
//! bytes broadcast, leaving the sixteen exact block sums in sixteen lanes.
//! The integer start value carries the quant offset (`-offset * sum(y)`),
//! so the sums equal the reference's signed ones. The float steps are the
//! reference's, lane by lane: `(dw * da) * isum` (plus `m * s`), added to
//! running sum `b % 4` by the driver.

use std::arch::x86_64::*;

use super::avx2::{bcast4, codebook, dot32_small, nibble_quants, Avx2};
use super::avx512::{dot32, nibble_quants as nibble_quants512, Avx512};
use super::driver::{Block, LegacyQuant};
use super::layout::Format;
use crate::blocks::KVALUES_IQ4NL;

/// A legacy format: nibbles (`NIB`) or bytes, fifth bits (`FIFTH`), a
/// minimum (`MIN`), IQ4_NL's codebook (`CB`).
pub(super) struct Legacy<const NIB: bool, const FIFTH: bool, const MIN: bool, const CB: bool>;

impl<const NIB: bool, const FIFTH: bool, const MIN: bool, const CB: bool, const V: bool>
    LegacyQuant<Avx2<V>> for Legacy<NIB, FIFTH, MIN, CB>
{
    /// Half `h` of one block for every token of the tile.
    #[inline(always)]
    unsafe fn part<const T: usize>(f: &Format, at: Block, h: usize, acc: &mut [__m256; T]) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features are the caller's precondition; the quant
        // loads stay inside the group-block, the scale loads read 16 bytes at
        // `d_at + 16 h` and `m_at + 16 h` (inside it), and `quants` gives 32
        // bytes of which the broadcasts read `4k..4k + 4`.
        unsafe {
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(f.d_at() + 16 * h) as *const _));
            let mw = if MIN {
                _mm256_cvtph_ps(_mm_loadu_si128(gb.add(f.m_at() + 16 * h) as *const _))
            } else {
                _mm256_setzero_ps()
            };
            // Plain loops rather than `map`/`from_fn`: a closure does not
            // inherit the caller's target features, so the intrinsics inside
            // it would be calls instead of instructions.
            let (q, s) = if NIB && CB {
                // IQ4_NL: each nibble picks a signed codebook value, then the
                // signed product as for Q8_0 (the values are at most 127 in
                // magnitude, so the i16 steps stay exact).
                let mut s = nibble_quants::<false>(gb, gb, h);
                let mut a = s;
                let book = codebook();
                for (s, a) in s.iter_mut().zip(&mut a) {
                    *s = _mm256_shuffle_epi8(book, *s);
                    *a = _mm256_abs_epi8(*s);
                }
                (a, s)
            } else if NIB {
                let q = nibble_quants::<FIFTH>(gb, gb.add(f.qh_at()), h);
                (q, q)
            } else if V {
                // Q8_0 under AVX-VNNI: `vpdpbusd` takes the stored unsigned
                // `q + 128` as it is, and the activation's integer start
                // (`-128 * sum(y)`) takes the offset back out, as on AVX-512.
                let mut q = [_mm256_setzero_si256(); 8];
                for (k, q) in q.iter_mut().enumerate() {
                    *q = _mm256_loadu_si256(gb.add(64 * k + 32 * h) as *const _);
                }
                (q, q)
            } else {
                // Undo the stored `+ 128`: the signed quant and its magnitude.
                let flip = _mm256_set1_epi8(-128);
                let mut s = [_mm256_setzero_si256(); 8];
                let mut a = s;
                for (k, (s, a)) in s.iter_mut().zip(&mut a).enumerate() {
                    *s = _mm256_xor_si256(
                        _mm256_loadu_si256(gb.add(64 * k + 32 * h) as *const _),
                        flip,
                    );
                    *a = _mm256_abs_epi8(*s);
                }
                (a, s)
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                let tok = t0 + t;
                let y = acts.quants(tok, b).as_ptr();
                let isum = if (NIB || V) && !CB {
                    dot32_small::<V>(&q, y, _mm256_set1_epi32(acts.init(tok, b)))
                } else {
                    dot32_signed::<V>(&q, &s, y)
                };
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(acts.d(tok, b)));
                let mut v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
                if MIN {
                    v = _mm256_add_ps(v, _mm256_mul_ps(mw, _mm256_set1_ps(acts.s(tok, b))));
                }
                *acc = _mm256_add_ps(*acc, v);
            }
        }
    }
}

/// `Σ q·y` over 32 signed quants per lane (`a` their magnitudes, `s` the
/// quants themselves, for the signs): each product pair widened alone, or
/// with `V` (AVX-VNNI) one `vpdpbusd` per register, in two chains.
///
/// # Safety
/// AVX2 (and AVX-VNNI with `V`); 32 bytes from `y` are readable.
#[inline(always)]
unsafe fn dot32_signed<const V: bool>(a: &[__m256i; 8], s: &[__m256i; 8], y: *const u8) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut i0 = _mm256_setzero_si256();
        let mut i1 = _mm256_setzero_si256();
        for k in 0..4 {
            let y0 = _mm256_sign_epi8(bcast4(y.add(8 * k)), s[2 * k]);
            let y1 = _mm256_sign_epi8(bcast4(y.add(8 * k + 4)), s[2 * k + 1]);
            if V {
                i0 = _mm256_dpbusd_avx_epi32(i0, a[2 * k], y0);
                i1 = _mm256_dpbusd_avx_epi32(i1, a[2 * k + 1], y1);
            } else {
                let p0 = _mm256_maddubs_epi16(a[2 * k], y0);
                let p1 = _mm256_maddubs_epi16(a[2 * k + 1], y1);
                i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p0, ones));
                i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p1, ones));
            }
        }
        _mm256_add_epi32(i0, i1)
    }
}

impl<const NIB: bool, const FIFTH: bool, const MIN: bool, const CB: bool> LegacyQuant<Avx512>
    for Legacy<NIB, FIFTH, MIN, CB>
{
    /// One block (the one register part) for every token of the tile.
    #[inline(always)]
    unsafe fn part<const T: usize>(f: &Format, at: Block, _h: usize, acc: &mut [__m512; T]) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features are the caller's precondition; the scale
        // loads read 32 bytes at `d_at` and `m_at`, inside the group-block, and
        // `quants` gives 32 bytes of which the broadcasts read `4k..4k + 4`.
        unsafe {
            let q = unpack512::<NIB, FIFTH, CB>(f, gb);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(f.d_at()) as *const _));
            let mw = if MIN {
                _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(f.m_at()) as *const _))
            } else {
                _mm512_setzero_ps()
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                let tok = t0 + t;
                let y = acts.quants(tok, b).as_ptr();
                let isum = dot32(&q, y, _mm512_set1_epi32(acts.init(tok, b)));
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(acts.d(tok, b)));
                let mut v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum));
                if MIN {
                    v = _mm512_add_ps(v, _mm512_mul_ps(mw, _mm512_set1_ps(acts.s(tok, b))));
                }
                *acc = _mm512_add_ps(*acc, v);
            }
        }
    }
}

/// The eight quant registers of one group-block at `gb`. With `CB`
/// (IQ4_NL) the nibbles index the codebook, looked up as unsigned bytes
/// `value + 128` (its format's offset) so that `vpdpbusd` takes them.
///
/// # Safety
/// AVX-512 F/BW; `gb` must point at a whole group-block of format `F`.
#[inline(always)]
unsafe fn unpack512<const NIB: bool, const FIFTH: bool, const CB: bool>(
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
        let mut q = nibble_quants512::<FIFTH>(gb, gb.add(f.qh_at()));
        if CB {
            let table = _mm512_broadcast_i32x4(_mm_add_epi8(
                _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const _),
                _mm_set1_epi8(-128),
            ));
            for q in &mut q {
                *q = _mm512_shuffle_epi8(table, *q);
            }
        }
        q
    }
}
