//! The interleaved Q4_K/Q5_K products (see [`super::layout_k`]), per
//! instruction set.
//!
//! # AVX2
//!
//! Each group is taken as two register parts of eight rows, and byte dot
//! products are `vpmaddubsw` then `vpmaddwd`: the 4/5-bit quants (at most
//! 31) against Q8_K activations (at most 127 in magnitude) take four
//! products per i16 lane, exactly (see `avx2::dot32_by`), widened against
//! the 6-bit sub-block scale itself, which saves a `vpmulld` per sub-block
//! and token.
//!
//! The reference's `isum = Σ_j sc_j · Σ q·y` takes each scale in the
//! `vpmaddwd` of the quant products, and its `msum = Σ_j min_j · bsum_j`,
//! which does not depend on the quants, is taken after the sub-block loop,
//! two sub-blocks per `vpmaddwd` (the mins are 6-bit, see [`q45k_bsums`]
//! for the other side); with AVX-VNNI that after-loop sum fuses into
//! `vpdpwssd`. The integers are the reference's exactly.
//!
//! # AVX-512 VNNI
//!
//! Per 32-quant sub-block, eight registers of sixteen rows' quants; each
//! token takes eight `vpdpbusd`, one multiply by the rows' scales, and the
//! sub-block's `min · bsum`.
//!
//! The float step is the reference's in both:
//! `acc + ((d · yd) · isum − (dmin · yd) · msum)`, lane by lane.

use std::arch::x86_64::*;

use super::acts::Acts;
use super::avx2::{dot32_by, madd_add, nibble_quants, Avx2};
use super::avx512::{dot32, nibble_quants as nibble_quants512, Avx512};
use super::driver::{pair16, Block, KQuant, PREFETCH};
use super::layout_k::{q45k_d_at, q45k_group_block, q45k_sc_at, q45k_sub_bytes};
use super::shape::GROUP;
use super::{avx2, avx512};

/// Q4_K, or with `FIFTH` Q5_K.
pub(super) struct Q45K<const FIFTH: bool>;

impl<const FIFTH: bool, const V: bool> KQuant<Avx2<V>> for Q45K<FIFTH> {
    const GROUP_BLOCK: usize = q45k_group_block(FIFTH);
    type Sum = __m256i;

    /// `Σ_j sc_j · Σ q·y`: the scale rides in the `vpmaddwd` (see
    /// `avx2::dot32_by`).
    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, h0: usize) -> [[__m256i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the sub-block's chunks lie at
        // `j * q45k_sub_bytes` (nibbles, then fifth bits at 256), the scale
        // loads read 8 bytes at `sc_at + 16 j + 8 h` (`j < 8`, `h < 2`), all
        // inside the group-block, and the activation reads at `32 j + 4 m` (at
        // most 252) lie inside 256 quants.
        unsafe {
            let sub_bytes = q45k_sub_bytes(FIFTH);
            let mut isum = [[_mm256_setzero_si256(); T]; N];
            for j in 0..8 {
                // A few tokens outrun the hardware prefetcher; a tile of
                // prefill finds the group cached, where the hint costs little.
                // Once per block: the first half's pass reads every line.
                if h0 == 0 {
                    for line in (0..sub_bytes).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(sub_bytes * j + line + PREFETCH) as *const i8,
                        );
                    }
                }
                let base = gb.add(sub_bytes * j);
                for (n, isum) in isum.iter_mut().enumerate() {
                    let h = h0 + n;
                    let q = nibble_quants::<FIFTH>(base, base.wrapping_add(256), h);
                    let sc = twice(gb.add(q45k_sc_at(FIFTH) + GROUP * j + 8 * h));
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let y = acts.quants(t0 + t, b).as_ptr().add(32 * j);
                        *isum = dot32_by(&q, y, sc, *isum);
                    }
                }
            }
            isum
        }
    }

    /// Takes half `h`'s `msum = Σ_j min_j · bsum_j` and the float step
    /// with its `isum` into `acc`.
    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        h: usize,
        isum: &[__m256i; T],
        acc: &mut [__m256; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the min loads read 8 bytes at
        // `sc_at + 128 + 16 j + 8 h` (`j < 8`), the `d` and `dmin` loads 16 at
        // `d_at + 16 h` and `d_at + 32 + 16 h`, inside the group-block.
        unsafe {
            let mn_at = q45k_sc_at(FIFTH) + 8 * GROUP;
            let d_at = q45k_d_at(FIFTH);
            // A loop, not `from_fn`: a closure would not inherit the caller's
            // target features (see `super::legacy_x86`).
            let mut mn = [_mm256_setzero_si256(); 4];
            for (k, mn) in mn.iter_mut().enumerate() {
                let at = mn_at + GROUP * 2 * k + 8 * h;
                *mn = widen(gb.add(at), gb.add(at + GROUP));
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(d_at + 16 * h) as *const _));
            let dm = _mm256_cvtph_ps(_mm_loadu_si128(
                gb.add(d_at + 2 * GROUP + 16 * h) as *const _
            ));
            let bsums = q45k_bsums::<T>(acts, t0, b);
            for (t, acc) in acc.iter_mut().enumerate() {
                let mut msum = _mm256_setzero_si256();
                for (mn, &pair) in mn.iter().zip(&bsums[t]) {
                    msum = madd_add::<V>(msum, *mn, _mm256_set1_epi32(pair));
                }
                *acc = avx2::step_min(*acc, dw, dm, acts.d(t0 + t, b), isum[t], msum);
            }
        }
    }
}

/// Eight bytes from `p` (one per row), each widened to both i16 halves of
/// its row's i32 lane: the `vpmaddwd` weight that scales a lane's pair of
/// i16 sums.
///
/// # Safety
/// AVX2; 8 bytes from `p` are readable.
#[inline(always)]
unsafe fn twice(p: *const u8) -> __m256i {
    // SAFETY: the load reads `p..p + 8`, the caller's guarantee.
    unsafe { widen(p, p) }
}

/// Eight bytes from `a` and eight from `b` (one each per row, unsigned),
/// row `r`'s lane holding `a[r]` in its low i16 and `b[r]` in its high
/// one: against a broadcast pair `(x, y)`, `vpmaddwd` gives
/// `a[r] x + b[r] y`.
///
/// # Safety
/// AVX2; 8 bytes from `a` and from `b` are readable.
#[inline(always)]
unsafe fn widen(a: *const u8, b: *const u8) -> __m256i {
    // SAFETY: the loads read `a..a + 8` and `b..b + 8`, the caller's
    // guarantee.
    unsafe {
        _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(
            _mm_loadl_epi64(a as *const _),
            _mm_loadl_epi64(b as *const _),
        ))
    }
}

/// Per token, the sub-block pairs of the 32-quant `bsum`s of block `b`,
/// as `vpmaddwd` operands (each at most `32 * 127` in magnitude).
#[inline(always)]
fn q45k_bsums<const T: usize>(acts: &Acts, t0: usize, b: usize) -> [[i32; 4]; T] {
    let mut out = [[0; 4]; T];
    for (t, out) in out.iter_mut().enumerate() {
        let i = acts.inits(t0 + t, b);
        for (k, out) in out.iter_mut().enumerate() {
            *out = pair16(i[2 * k], i[2 * k + 1]);
        }
    }
    out
}

impl<const FIFTH: bool> KQuant<Avx512> for Q45K<FIFTH> {
    const GROUP_BLOCK: usize = q45k_group_block(FIFTH);
    /// `isum` and `msum`.
    type Sum = [__m512i; 2];

    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(
        at: Block,
        _h0: usize,
    ) -> [[[__m512i; 2]; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features and bounds are the caller's contract;
        // activation reads at `32 j + 4 m` (at most 252) lie inside 256
        // quants.
        unsafe {
            let mut out = [[[_mm512_setzero_si512(); 2]; T]; N];
            let sums = &mut out[0];
            for j in 0..8 {
                if t0 == 0 {
                    for line in (0..q45k_sub_bytes(FIFTH)).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(q45k_sub_bytes(FIFTH) * j + line + PREFETCH)
                                as *const i8,
                        );
                    }
                }
                let q = unpack_avx512::<FIFTH>(gb, j);
                let at = q45k_sc_at(FIFTH) + GROUP * j;
                let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(gb.add(at) as *const _));
                let mn = _mm512_cvtepu8_epi32(_mm_loadu_si128(gb.add(at + 8 * GROUP) as *const _));
                for (t, [isum, msum]) in sums.iter_mut().enumerate() {
                    let tok = t0 + t;
                    let y = acts.quants(tok, b).as_ptr().add(32 * j);
                    let sub = dot32(&q, y, _mm512_setzero_si512());
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(sub, sc));
                    let bsum = _mm512_set1_epi32(*acts.inits(tok, b).get_unchecked(j));
                    *msum = _mm512_add_epi32(*msum, _mm512_mullo_epi32(mn, bsum));
                }
            }
            out
        }
    }

    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        _h: usize,
        sums: &[[__m512i; 2]; T],
        acc: &mut [__m512; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the `d` and `dmin` loads read 32
        // bytes at `d_at` and `d_at + 32`, inside the group-block.
        unsafe {
            let d_at = q45k_d_at(FIFTH);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at) as *const _));
            let dm = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(d_at + 2 * GROUP) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                let [isum, msum] = sums[t];
                *acc = avx512::step_min(*acc, dw, dm, acts.d(t0 + t, b), isum, msum);
            }
        }
    }
}

/// The eight quant registers of sub-block `j` of a Q4_K/Q5_K group-block
/// at `gb` (quants `4m..4m + 4` of the sub-block in register `m`).
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole group-block and `j < 8`.
#[inline(always)]
unsafe fn unpack_avx512<const FIFTH: bool>(gb: *const u8, j: usize) -> [__m512i; 8] {
    // SAFETY: the sub-block's chunks, `q45k_sub_bytes` bytes at
    // `j * q45k_sub_bytes` (nibbles, then the fifth bits at 256), lie
    // inside the group-block for `j < 8`.
    unsafe {
        let base = gb.add(q45k_sub_bytes(FIFTH) * j);
        nibble_quants512::<FIFTH>(base, base.wrapping_add(256))
    }
}
