//! The interleaved IQ4_XS products (see [`super::layout_k23`]), per
//! instruction set.
//!
//! # AVX2
//!
//! Each group is taken as two register parts of eight rows (the lower and
//! upper 32 bytes of every 64-byte chunk). The nibbles are codebook
//! indices: one `vpshufb` per register turns them into the signed values
//! (at most 127 in magnitude, [`crate::blocks::KVALUES_IQ4NL`]).
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
//! # AVX-512 VNNI
//!
//! Per 32-quant sub-block, four 64-byte loads give eight registers of
//! sixteen rows' codebook indices; one `vpshufb` each turns them into the
//! codebook values shifted to unsigned bytes (`kv + 128`, the top bit
//! flipped; AVX-512 has no `vpsignb` for the signed product). Each token
//! of the tile takes eight `vpdpbusd` (i32 sums, no saturation) starting
//! from `-128 * bsum`, which takes the shift back out exactly, then one
//! multiply by the sixteen rows' sub-block scales.
//!
//! The super-block's integer sum is the reference's, and so is the float
//! step: `acc + ((d · yd) · isum − 0)` per super-block, in order.

use std::arch::x86_64::*;

use super::avx2::{bcast4, codebook, dot32_small, madd2_add, nibble_quants, twice_signed, Avx2};
use super::avx512::{dot32, nibble_quants as nibble_quants512, Avx512};
use super::driver::{Block, KQuant, PREFETCH};
use super::layout_k23::{IQ4XS_D_AT, IQ4XS_GROUP_BLOCK, IQ4XS_SC_AT, IQ4XS_SUB_BYTES};
use super::shape::GROUP;
use super::{avx2, avx512};
use crate::blocks::KVALUES_IQ4NL;

/// IQ4_XS.
pub(super) struct IQ4XS;

impl<const V: bool> KQuant<Avx2<V>> for IQ4XS {
    const GROUP_BLOCK: usize = IQ4XS_GROUP_BLOCK;
    type Sum = __m256i;

    /// `Σ_j sc_j · Σ kv·y`.
    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, h0: usize) -> [[__m256i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; sub-block `j`'s nibbles lie at
        // `256 j` (256 bytes), the scale loads read 8 bytes at
        // `IQ4XS_SC_AT + 16 j + 8 h` (`j < 8`, `h < 2`), all inside the
        // group-block, and the activation reads at `32 j + 4 m` (at most 252)
        // lie inside 256 quants.
        unsafe {
            let book = codebook();
            // `kv + 128` as unsigned bytes: the top bit flipped.
            let book_u = _mm256_xor_si256(book, _mm256_set1_epi8(-128));
            let mut isum = [[_mm256_setzero_si256(); T]; N];
            for j in 0..8 {
                // A few tokens outrun the hardware prefetcher; a tile of
                // prefill finds the group cached, where the hint costs little.
                // Once per block: the first half's pass reads every line.
                if h0 == 0 {
                    for line in (0..IQ4XS_SUB_BYTES).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(IQ4XS_SUB_BYTES * j + line + PREFETCH) as *const i8,
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

    /// The float step: `acc + (d · yd) · isum − 0`.
    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        h: usize,
        isum: &[__m256i; T],
        acc: &mut [__m256; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the `d` load reads 16 bytes at
        // `IQ4XS_D_AT + 16 h`, inside the group-block.
        unsafe {
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(IQ4XS_D_AT + 16 * h) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                *acc = avx2::step(*acc, dw, acts.d(t0 + t, b), isum[t]);
            }
        }
    }
}

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

impl KQuant<Avx512> for IQ4XS {
    const GROUP_BLOCK: usize = IQ4XS_GROUP_BLOCK;
    type Sum = __m512i;

    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, _h0: usize) -> [[__m512i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features and bounds are the caller's contract:
        // sub-block `j`'s nibbles at `256 j` (256 bytes), its scales 16
        // bytes at `IQ4XS_SC_AT + 16 j`; the activation reads at
        // `32 j + 4 m` (at most 252) lie inside 256 quants; the codebook
        // load reads its 16 bytes.
        unsafe {
            let book = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const _);
            let book_u = _mm512_broadcast_i32x4(_mm_xor_si128(book, _mm_set1_epi8(-128)));
            let mut out = [[_mm512_setzero_si512(); T]; N];
            let isum = &mut out[0];
            for j in 0..8 {
                if t0 == 0 {
                    for line in (0..IQ4XS_SUB_BYTES).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(IQ4XS_SUB_BYTES * j + line + PREFETCH) as *const i8,
                        );
                    }
                }
                let base = gb.add(IQ4XS_SUB_BYTES * j);
                let mut q = nibble_quants512::<false>(base, base);
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
                    let sub = dot32(&q, y, start);
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
        // SAFETY: the caller's contract; the `d` load reads 32 bytes at
        // `IQ4XS_D_AT`, inside the group-block.
        unsafe {
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(IQ4XS_D_AT) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                *acc = avx512::step(*acc, dw, acts.d(t0 + t, b), isum[t]);
            }
        }
    }
}
