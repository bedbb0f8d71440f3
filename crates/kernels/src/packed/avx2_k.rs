//! The AVX2 products over interleaved Q6_K and Q4_K/Q5_K (see
//! [`super::layout_k`]), for CPUs without AVX-512 VNNI.
//!
//! As in [`super::avx2`], each group is taken as two halves of eight rows
//! (the lower and upper 32 bytes of every 64-byte chunk), and byte dot
//! products are `vpmaddubsw` then `vpmaddwd` against ones. Q6_K's quants
//! are at most 63 and the Q8_K activations at most 127 in magnitude, so
//! two products per i16 lane (`2 * 2 * 63 * 127 = 32,004`) are exact; the
//! 4/5-bit quants of Q4_K/Q5_K take four. The integer sums and the float
//! steps are the AVX-512 kernels', lane by lane.
//!
//! Everything here needs AVX2, FMA and F16C; the dispatcher only hands
//! these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx2::{bcast4, dot32_small, nibble_quants, store};
use super::avx512_k::PREFETCH;
use super::layout::GROUP;
use super::layout_k::{
    q45k_d_at, q45k_group_block, q45k_sc_at, q45k_sub_bytes, Q6K_D_AT, Q6K_GROUP_BLOCK, Q6K_SC_AT,
};
use super::{Acts, Tile};

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
unsafe fn unpack_sub(gb: *const u8, s: usize, h: usize) -> [__m256i; 4] {
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

/// `init + Σ q·y` over one 16-quant sub-block: register `m` of `q`
/// against activation bytes `y + 4m`.
///
/// # Safety
/// AVX2; 16 bytes from `y` are readable.
#[inline(always)]
unsafe fn dot16(q: &[__m256i; 4], y: *const u8, init: __m256i) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 16`.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let p0 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[0], bcast4(y)),
            _mm256_maddubs_epi16(q[1], bcast4(y.add(4))),
        );
        let p1 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[2], bcast4(y.add(8))),
            _mm256_maddubs_epi16(q[3], bcast4(y.add(12))),
        );
        _mm256_add_epi32(
            init,
            _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)),
        )
    }
}

/// `T` tokens from `t0` against one Q6_K group of `nb` super-blocks.
///
/// # Safety
/// AVX2, FMA and F16C; `group` holds `nb` Q6_K group-blocks and `acts`
/// covers tokens `t0..t0 + T` (Q8_K, sixteen starts per block).
#[inline(always)]
unsafe fn tile_q6k_t<const T: usize>(nb: usize, group: &[u8], acts: &Acts, t0: usize) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * Q6K_GROUP_BLOCK` with `b < nb`, the
    // scale loads read 8 bytes at `Q6K_SC_AT + 16 s + 8 h` and the `d`
    // loads 16 at `Q6K_D_AT + 16 h`, and the activation reads at
    // `16 s + 4 m` (at most 252) lie inside 256 quants.
    unsafe {
        debug_assert!(group.len() >= nb * Q6K_GROUP_BLOCK);
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * Q6K_GROUP_BLOCK);
            let mut isum = [[_mm256_setzero_si256(); T]; 2];
            for s in 0..16 {
                if T <= 2 {
                    super::avx512_k::prefetch(gb.wrapping_add(192 * s + PREFETCH));
                }
                for (h, isum) in isum.iter_mut().enumerate() {
                    let q = unpack_sub(gb, s, h);
                    let at = Q6K_SC_AT + GROUP * s + 8 * h;
                    let sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(gb.add(at) as *const _));
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let tok = t0 + t;
                        let y = acts.quants(tok, b).as_ptr().add(16 * s);
                        let init = _mm256_set1_epi32(*acts.inits(tok, b).get_unchecked(s));
                        let sub = dot16(&q, y, init);
                        *isum = _mm256_add_epi32(*isum, _mm256_mullo_epi32(sub, sc));
                    }
                }
            }
            for (h, (acc, isum)) in acc.iter_mut().zip(&isum).enumerate() {
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(Q6K_D_AT + 16 * h) as *const _));
                for (t, acc) in acc.iter_mut().enumerate() {
                    let d = _mm256_mul_ps(dw, _mm256_set1_ps(acts.d(t0 + t, b)));
                    let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t]));
                    // The reference subtracts the (zero) minimum term.
                    let v = _mm256_sub_ps(v, _mm256_setzero_ps());
                    *acc = _mm256_add_ps(*acc, v);
                }
            }
        }
        store(&acc)
    }
}

/// The AVX2 kernel for interleaved Q6_K.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `group` holds `nb` Q6_K
/// group-blocks and `acts` covers tokens `t0..t0 + nt` (Q8_K, sixteen
/// starts per block).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile_q6k(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height!(nt, tile_q6k_t::<_>(nb, group, acts, t0)) }
}

/// `T` tokens from `t0` against one Q4_K/Q5_K group of `nb` super-blocks.
///
/// # Safety
/// AVX2, FMA and F16C; `group` holds `nb` group-blocks and `acts` covers
/// tokens `t0..t0 + T` (Q8_K, eight sub-block sums per block).
#[inline(always)]
unsafe fn tile_q45k_t<const T: usize, const FIFTH: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * gbytes` with `b < nb`: the sub-block's
    // chunks at `j * q45k_sub_bytes` (nibbles, then fifth bits at 256),
    // 8 bytes of scales and of minimums at `sc_at + 16 j + 8 h` and
    // `+ 128`, 16 bytes of `d` and `dmin`; activation reads at `32 j + 4 m`
    // (at most 252) lie inside 256 quants.
    unsafe {
        let gbytes = q45k_group_block(FIFTH);
        let sub_bytes = q45k_sub_bytes(FIFTH);
        debug_assert!(group.len() >= nb * gbytes);
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * gbytes);
            let mut isum = [[_mm256_setzero_si256(); T]; 2];
            let mut msum = [[_mm256_setzero_si256(); T]; 2];
            for j in 0..8 {
                if T <= 2 {
                    for line in (0..sub_bytes).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(sub_bytes * j + line + PREFETCH) as *const i8,
                        );
                    }
                }
                let base = gb.add(sub_bytes * j);
                for h in 0..2 {
                    let q = nibble_quants::<FIFTH>(base, base.wrapping_add(256), h);
                    let at = q45k_sc_at(FIFTH) + GROUP * j + 8 * h;
                    let sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(gb.add(at) as *const _));
                    let mn =
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(gb.add(at + 8 * GROUP) as *const _));
                    for t in 0..T {
                        let tok = t0 + t;
                        let y = acts.quants(tok, b).as_ptr().add(32 * j);
                        let sub = dot32_small(&q, y, _mm256_setzero_si256());
                        isum[h][t] = _mm256_add_epi32(isum[h][t], _mm256_mullo_epi32(sub, sc));
                        let bsum = _mm256_set1_epi32(*acts.inits(tok, b).get_unchecked(j));
                        msum[h][t] = _mm256_add_epi32(msum[h][t], _mm256_mullo_epi32(mn, bsum));
                    }
                }
            }
            let d_at = q45k_d_at(FIFTH);
            for (h, acc) in acc.iter_mut().enumerate() {
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(d_at + 16 * h) as *const _));
                let dm = _mm256_cvtph_ps(_mm_loadu_si128(
                    gb.add(d_at + 2 * GROUP + 16 * h) as *const _
                ));
                for (t, acc) in acc.iter_mut().enumerate() {
                    let yd = _mm256_set1_ps(acts.d(t0 + t, b));
                    let v = _mm256_sub_ps(
                        _mm256_mul_ps(_mm256_mul_ps(dw, yd), _mm256_cvtepi32_ps(isum[h][t])),
                        _mm256_mul_ps(_mm256_mul_ps(dm, yd), _mm256_cvtepi32_ps(msum[h][t])),
                    );
                    *acc = _mm256_add_ps(*acc, v);
                }
            }
        }
        store(&acc)
    }
}

/// The AVX2 kernel for interleaved Q4_K (`fifth` false) and Q5_K.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `group` holds `nb`
/// group-blocks of the type and `acts` covers tokens `t0..t0 + nt` (Q8_K,
/// eight sub-block sums per block).
#[target_feature(enable = "avx2,fma,f16c")]
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
            by_height!(nt, tile_q45k_t::<_, true>(nb, group, acts, t0))
        } else {
            by_height!(nt, tile_q45k_t::<_, false>(nb, group, acts, t0))
        }
    }
}
