//! The interleaved Q6_K products (see [`super::layout_k`]), per
//! instruction set.
//!
//! # AVX2
//!
//! Each group is taken as two register parts of eight rows, and byte dot
//! products are `vpmaddubsw` then `vpmaddwd`. Q6_K's quants are at most 63
//! and the Q8_K activations at most 127 in magnitude, so two products per
//! i16 lane (`2 * 2 * 63 * 127 = 32,004`) are exact. They widen against
//! the signed sub-block scale itself, which saves a `vpmulld` per
//! sub-block and token, and take the scaled integer starts after the
//! sub-block loop. With AVX-VNNI only those after-loop sums fuse into
//! `vpdpwssd` (see `avx2::madd2_add` for why the quant loop does not).
//!
//! The reference's `isum = Σ_s sc_s · (init_s + Σ q·y)` is taken as
//! `Σ_s sc_s · Σ q·y`, with each scale riding in the `vpmaddwd` of the
//! quant products (see `avx2::dot16_by`), plus `Σ_s sc_s · init_s` after
//! the sub-block loop ([`q6k_starts`]): the same integers, without a
//! `vpmulld` (two µops and ten cycles of latency on Intel cores) per
//! sub-block and token. Both parts share the sub-block loop at every
//! height.
//!
//! # AVX-512 VNNI
//!
//! Per 16-quant sub-block, three 64-byte loads give four registers of
//! sixteen rows' 6-bit quants; each token of the tile takes four
//! `vpdpbusd` starting from `-32 * bsum` (the offset, exactly), then one
//! multiply by the sixteen rows' sub-block scales.
//!
//! The super-block's integer sum is the reference's, and so are the float
//! steps: `acc + (d * yd) * isum` per super-block, in order.

use std::arch::x86_64::*;

use super::acts::Acts;
use super::avx2::{dot16_by, madd_add, twice_signed, Avx2};
use super::avx512::Avx512;
use super::driver::{pair16, prefetch3, Block, KQuant, PREFETCH};
use super::layout_k::{Q6K_D_AT, Q6K_GROUP_BLOCK, Q6K_SC_AT};
use super::shape::GROUP;
use super::{avx2, avx512};

/// Q6_K.
pub(super) struct Q6K;

impl<const V: bool> KQuant<Avx2<V>> for Q6K {
    const GROUP_BLOCK: usize = Q6K_GROUP_BLOCK;
    const SPLIT: bool = false;
    type Sum = __m256i;

    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, h0: usize) -> [[__m256i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features and bounds are the caller's contract;
        // the scale loads read 8 bytes at `Q6K_SC_AT + 16 s + 8 h`, and the
        // activation reads at `16 s + 4 m` (at most 252) lie inside 256
        // quants.
        unsafe {
            let mut isum = [[_mm256_setzero_si256(); T]; N];
            for s in 0..16 {
                // A few tokens outrun the hardware prefetcher; a tile of
                // prefill finds the group cached, where the hint costs
                // little.
                prefetch3::<Avx2<V>>(gb.wrapping_add(192 * s + PREFETCH));
                for (n, isum) in isum.iter_mut().enumerate() {
                    let h = h0 + n;
                    let q = unpack_avx2(gb, s, h);
                    let sc2 = twice_signed(gb.add(Q6K_SC_AT + GROUP * s + 8 * h));
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let y = acts.quants(t0 + t, b).as_ptr().add(16 * s);
                        *isum = dot16_by(&q, y, sc2, *isum);
                    }
                }
            }
            isum
        }
    }

    #[inline(always)]
    unsafe fn finish<const T: usize>(
        at: Block,
        h: usize,
        isum: &[__m256i; T],
        acc: &mut [__m256; T],
    ) {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the caller's contract; the `d` load reads 16 bytes at
        // `Q6K_D_AT + 16 h`, inside the group-block.
        unsafe {
            let starts = q6k_starts::<T, V>(gb, acts, t0, b, h);
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(Q6K_D_AT + 16 * h) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                let isum = _mm256_add_epi32(isum[t], starts[t]);
                *acc = avx2::step(*acc, dw, acts.d(t0 + t, b), isum);
            }
        }
    }
}

/// `(hi & 0x30) | lo`.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn put(hi: __m256i, lo: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe { _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi8(0x30)), lo) }
}

/// Half `h` of the four quant registers of sub-block `s` of the Q6_K
/// group-block at `gb`.
///
/// # Safety
/// AVX2; `gb` points at a whole Q6_K group-block, `s < 16`, `h < 2`.
#[inline(always)]
unsafe fn unpack_avx2(gb: *const u8, s: usize, h: usize) -> [__m256i; 4] {
    // SAFETY: the three loads read 32 bytes at `192 s + 64 i + 32 h`,
    // inside the group-block's 3,072 bytes of quants for `s < 16`.
    unsafe {
        let base = gb.add(192 * s + 32 * h);
        let a = _mm256_loadu_si256(base as *const _);
        let b = _mm256_loadu_si256(base.add(64) as *const _);
        let x = _mm256_loadu_si256(base.add(128) as *const _);
        let m4 = _mm256_set1_epi8(0x0F);
        [
            put(_mm256_slli_epi32::<4>(x), _mm256_and_si256(a, m4)),
            put(_mm256_slli_epi32::<2>(x), _mm256_and_si256(b, m4)),
            put(x, _mm256_and_si256(_mm256_srli_epi16::<4>(a), m4)),
            put(
                _mm256_srli_epi32::<2>(x),
                _mm256_and_si256(_mm256_srli_epi16::<4>(b), m4),
            ),
        ]
    }
}

/// `Σ_s sc_s · init_s` of Q6_K block `b` for half `h` and every token: the
/// integer start of each sub-block (`-32 · bsum_s`) times its scale,
/// taken after the quant loop two sub-blocks per `vpmaddwd`. The starts
/// are multiples of 32, so `init_s / 32` (at most `16 * 128` in
/// magnitude) fits an i16 and the product is shifted back.
///
/// # Safety
/// As [`KQuant::sums`], with `b < nb` and `h < 2`.
#[inline(always)]
unsafe fn q6k_starts<const T: usize, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h: usize,
) -> [__m256i; T] {
    // SAFETY: the caller's contract; the scale loads read 8 bytes at
    // `Q6K_SC_AT + 16 s + 8 h` (`s < 16`), inside the group-block.
    unsafe {
        let mut sc = [_mm256_setzero_si256(); 8];
        for (k, sc) in sc.iter_mut().enumerate() {
            let at = Q6K_SC_AT + GROUP * 2 * k + 8 * h;
            let lo = _mm_loadl_epi64(gb.add(at) as *const _);
            let hi = _mm_loadl_epi64(gb.add(at + GROUP) as *const _);
            *sc = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(lo, hi));
        }
        let mut out = [_mm256_setzero_si256(); T];
        for (t, out) in out.iter_mut().enumerate() {
            let i = acts.inits(t0 + t, b);
            let mut m = _mm256_setzero_si256();
            for (k, sc) in sc.iter().enumerate() {
                let pair = pair16(i[2 * k] >> 5, i[2 * k + 1] >> 5);
                m = madd_add::<V>(m, *sc, _mm256_set1_epi32(pair));
            }
            *out = _mm256_slli_epi32::<5>(m);
        }
        out
    }
}

impl KQuant<Avx512> for Q6K {
    const GROUP_BLOCK: usize = Q6K_GROUP_BLOCK;
    type Sum = __m512i;

    #[inline(always)]
    unsafe fn sums<const T: usize, const N: usize>(at: Block, _h0: usize) -> [[__m512i; T]; N] {
        let Block { gb, acts, t0, b } = at;
        // SAFETY: the CPU features and bounds are the caller's contract;
        // the activation reads at `16 s + 4 m` (at most 252) lie inside 256
        // quants.
        unsafe {
            let mut out = [[_mm512_setzero_si512(); T]; N];
            let isum = &mut out[0];
            for s in 0..16 {
                if t0 == 0 {
                    prefetch3::<Avx512>(gb.wrapping_add(192 * s + PREFETCH));
                }
                let q = unpack_avx512(gb, s);
                let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(
                    gb.add(Q6K_SC_AT + GROUP * s) as *const _
                ));
                for (t, isum) in isum.iter_mut().enumerate() {
                    let tok = t0 + t;
                    let y = acts.quants(tok, b).as_ptr().add(16 * s);
                    let mut sub = _mm512_set1_epi32(*acts.inits(tok, b).get_unchecked(s));
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
        // SAFETY: the caller's contract; the `d` load reads 32 bytes at
        // `Q6K_D_AT`, inside the group-block.
        unsafe {
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(gb.add(Q6K_D_AT) as *const _));
            for (t, acc) in acc.iter_mut().enumerate() {
                *acc = avx512::step(*acc, dw, acts.d(t0 + t, b), isum[t]);
            }
        }
    }
}

/// `(hi & mask) | lo`. A function rather than a closure: closures do not
/// inherit the caller's target features, so their intrinsics would not
/// inline.
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn put512(hi: __m512i, mask: __m512i, lo: __m512i) -> __m512i {
    // SAFETY: the caller's precondition; registers only.
    unsafe { _mm512_ternarylogic_epi32::<0xEA>(hi, mask, lo) }
}

/// The four quant registers of sub-block `s` of the group-block at `gb`.
///
/// # Safety
/// AVX-512 F/BW; `gb` points at a whole Q6_K group-block and `s < 16`.
#[inline(always)]
unsafe fn unpack_avx512(gb: *const u8, s: usize) -> [__m512i; 4] {
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
            put512(_mm512_slli_epi32::<4>(h), m30, _mm512_and_si512(a, m4)),
            put512(_mm512_slli_epi32::<2>(h), m30, _mm512_and_si512(b, m4)),
            put512(h, m30, _mm512_and_si512(_mm512_srli_epi16::<4>(a), m4)),
            put512(
                _mm512_srli_epi32::<2>(h),
                m30,
                _mm512_and_si512(_mm512_srli_epi16::<4>(b), m4),
            ),
        ]
    }
}
