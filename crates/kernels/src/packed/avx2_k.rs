//! The AVX2 products over interleaved Q6_K and Q4_K/Q5_K (see
//! [`super::layout_k`]), for CPUs without AVX-512 VNNI.
//!
//! As in [`super::avx2`], each group is taken as two halves of eight rows
//! (the lower and upper 32 bytes of every 64-byte chunk), and byte dot
//! products are `vpmaddubsw` then `vpmaddwd`. Q6_K's quants are at most 63
//! and the Q8_K activations at most 127 in magnitude, so two products per
//! i16 lane (`2 * 2 * 63 * 127 = 32,004`) are exact; the 4/5-bit quants of
//! Q4_K/Q5_K take four. Both widen against the sub-block scale itself
//! (Q6_K's signed, Q4_K/Q5_K's 6-bit), which saves a `vpmulld` per
//! sub-block and token, and take the scaled integer starts (Q6_K) or
//! mins (Q4_K/Q5_K) after the sub-block loop. With AVX-VNNI only those
//! after-loop sums fuse into `vpdpwssd` (see `avx2::madd2_add` for why the
//! quant loop does not). The integer sums and the float steps are the
//! AVX-512 kernels', lane by lane.
//!
//! Everything here needs AVX2, FMA and F16C; the dispatcher only hands
//! these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx2::{bcast4, dot32_by, madd2_add, madd_add, nibble_quants, store};
use super::layout_k::{
    q45k_d_at, q45k_group_block, q45k_sc_at, q45k_sub_bytes, Q6K_D_AT, Q6K_GROUP_BLOCK, Q6K_SC_AT,
};
use super::tile::{pair16, Acts, Tile, GROUP};

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

/// `acc + sc · Σ q·y` over one 16-quant sub-block: register `m` of `q`
/// against activation bytes `y + 4m`, four products per i16 lane (at most
/// `4 * 63 * 127 = 32,004`, exact), each pair of i16 sums widened by
/// `vpmaddwd` against `sc2`, the row's sub-block scale in both i16 halves
/// of its lane (so no `vpmulld`: at most `2 * 32,004 * 128` per lane).
///
/// # Safety
/// AVX2; 16 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot16_by(
    q: &[__m256i; 4],
    y: *const u8,
    sc2: __m256i,
    acc: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 16`.
    unsafe {
        let p0 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[0], bcast4(y)),
            _mm256_maddubs_epi16(q[1], bcast4(y.add(4))),
        );
        let p1 = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[2], bcast4(y.add(8))),
            _mm256_maddubs_epi16(q[3], bcast4(y.add(12))),
        );
        madd2_add(acc, p0, p1, sc2)
    }
}

/// Eight signed bytes from `p` (one per row), each sign-extended into
/// both i16 halves of its row's i32 lane: the `vpmaddwd` weight that
/// scales a lane's pair of i16 sums.
///
/// # Safety
/// AVX2; 8 bytes from `p` are readable.
#[inline(always)]
pub(super) unsafe fn twice_signed(p: *const u8) -> __m256i {
    // SAFETY: the load reads `p..p + 8`, the caller's guarantee.
    unsafe {
        let x = _mm_loadl_epi64(p as *const _);
        _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, x))
    }
}

/// `Σ_s sc_s · init_s` of Q6_K block `b` for half `h` and every token: the
/// integer start of each sub-block (`-32 · bsum_s`) times its scale,
/// taken after the quant loop two sub-blocks per `vpmaddwd`. The starts
/// are multiples of 32, so `init_s / 32` (at most `16 * 128` in
/// magnitude) fits an i16 and the product is shifted back.
///
/// # Safety
/// As [`tile_q6k_t`], with `b < nb` and `h < 2`.
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

/// `T` tokens from `t0` against one Q6_K group of `nb` super-blocks.
///
/// The reference's `isum = Σ_s sc_s · (init_s + Σ q·y)` is taken as
/// `Σ_s sc_s · Σ q·y`, with each scale riding in the `vpmaddwd` of the
/// quant products (see [`dot16_by`]), plus `Σ_s sc_s · init_s` after the
/// sub-block loop ([`q6k_starts`]): the same integers, without a `vpmulld`
/// (two µops and ten cycles of latency on Intel cores) per sub-block and
/// token.
///
/// # Safety
/// AVX2, FMA and F16C (and AVX-VNNI with `V`); `group` holds `nb` Q6_K
/// group-blocks and `acts` covers tokens `t0..t0 + T` (Q8_K, sixteen
/// starts per block).
#[inline(always)]
unsafe fn tile_q6k_t<const T: usize, const V: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
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
                // A few tokens outrun the hardware prefetcher; a tile of
                // prefill finds the group cached, where the hint costs
                // little.
                if acts.ahead != 0 {
                    super::tile::prefetch(gb.wrapping_add(192 * s + acts.ahead));
                }
                for (h, isum) in isum.iter_mut().enumerate() {
                    let q = unpack_sub(gb, s, h);
                    let sc2 = twice_signed(gb.add(Q6K_SC_AT + GROUP * s + 8 * h));
                    for (t, isum) in isum.iter_mut().enumerate() {
                        let y = acts.quants(t0 + t, b).as_ptr().add(16 * s);
                        *isum = dot16_by(&q, y, sc2, *isum);
                    }
                }
            }
            for (h, (acc, isum)) in acc.iter_mut().zip(&isum).enumerate() {
                let starts = q6k_starts::<T, V>(gb, acts, t0, b, h);
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(gb.add(Q6K_D_AT + 16 * h) as *const _));
                for (t, acc) in acc.iter_mut().enumerate() {
                    let isum = _mm256_add_epi32(isum[t], starts[t]);
                    let d = _mm256_mul_ps(dw, _mm256_set1_ps(acts.d(t0 + t, b)));
                    let v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
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
    unsafe { by_height!(nt, tile_q6k_t::<_, false>(nb, group, acts, t0)) }
}

/// [`tile_q6k`] with AVX-VNNI's fused `vpdpwssd`.
///
/// # Safety
/// As [`tile_q6k`], and the CPU must support AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub unsafe fn tile_q6k_vnni(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { by_height!(nt, tile_q6k_t::<_, true>(nb, group, acts, t0)) }
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

/// `Σ_j sc_j · Σ q·y` for halves `h0..h0 + N` of Q4_K/Q5_K block `b` (at
/// `gb`) and every token: the scale rides in the `vpmaddwd` (see
/// [`dot32_by`]).
///
/// # Safety
/// As [`tile_q45k_t`], with `b < nb` and `h0 + N <= 2`.
#[inline(always)]
unsafe fn q45k_sums<const T: usize, const N: usize, const FIFTH: bool, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h0: usize,
) -> [[__m256i; T]; N] {
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
            if h0 == 0 && acts.ahead != 0 {
                for line in (0..sub_bytes).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(
                        gb.wrapping_add(sub_bytes * j + line + acts.ahead) as *const i8
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

/// Takes half `h`'s `msum = Σ_j min_j · bsum_j` of Q4_K/Q5_K block `b`
/// and the float step with its `isum` into `acc`.
///
/// # Safety
/// As [`tile_q45k_t`], with `b < nb` and `h < 2`.
#[inline(always)]
unsafe fn q45k_finish<const T: usize, const FIFTH: bool, const V: bool>(
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h: usize,
    isum: &[__m256i; T],
    acc: &mut [__m256; T],
) {
    // SAFETY: the caller's contract; the min loads read 8 bytes at
    // `sc_at + 128 + 16 j + 8 h` (`j < 8`), the `d` and `dmin` loads 16 at
    // `d_at + 16 h` and `d_at + 32 + 16 h`, inside the group-block.
    unsafe {
        let mn_at = q45k_sc_at(FIFTH) + 8 * GROUP;
        let d_at = q45k_d_at(FIFTH);
        // A loop, not `from_fn`: a closure would not inherit the caller's
        // target features (see `super::avx2::half_block`).
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
            let yd = _mm256_set1_ps(acts.d(t0 + t, b));
            let v = _mm256_sub_ps(
                _mm256_mul_ps(_mm256_mul_ps(dw, yd), _mm256_cvtepi32_ps(isum[t])),
                _mm256_mul_ps(_mm256_mul_ps(dm, yd), _mm256_cvtepi32_ps(msum)),
            );
            *acc = _mm256_add_ps(*acc, v);
        }
    }
}

/// `T` tokens from `t0` against one Q4_K/Q5_K group of `nb` super-blocks.
///
/// The reference's `isum = Σ_j sc_j · Σ q·y` takes each scale in the
/// `vpmaddwd` of the quant products, and its `msum = Σ_j min_j · bsum_j`,
/// which does not depend on the quants, is taken after the sub-block loop,
/// two sub-blocks per `vpmaddwd` (the mins are 6-bit, see [`q45k_bsums`]
/// for the other side). The integers are the reference's exactly.
///
/// Up to two tokens, both halves (rows `0..8` and `8..16`) share the
/// sub-block loop; from three, each half runs it alone, so that only one
/// running sum per token is live beside the eight quant registers.
///
/// # Safety
/// AVX2, FMA and F16C; `group` holds `nb` group-blocks and `acts` covers
/// tokens `t0..t0 + T` (Q8_K, eight sub-block sums per block).
#[inline(always)]
unsafe fn tile_q45k_t<const T: usize, const FIFTH: bool, const V: bool>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * gbytes` with `b < nb`, and the helpers
    // get `h < 2`.
    unsafe {
        let gbytes = q45k_group_block(FIFTH);
        debug_assert!(group.len() >= nb * gbytes);
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * gbytes);
            if T <= 2 {
                let isum = q45k_sums::<T, 2, FIFTH, V>(gb, acts, t0, b, 0);
                for (h, (isum, acc)) in isum.iter().zip(&mut acc).enumerate() {
                    q45k_finish::<T, FIFTH, V>(gb, acts, t0, b, h, isum, acc);
                }
            } else {
                for (h, acc) in acc.iter_mut().enumerate() {
                    let [isum] = q45k_sums::<T, 1, FIFTH, V>(gb, acts, t0, b, h);
                    q45k_finish::<T, FIFTH, V>(gb, acts, t0, b, h, &isum, acc);
                }
            }
        }
        store(&acc)
    }
}

/// Q4_K (`fifth` false) or Q5_K, with (`V`) or without AVX-VNNI.
///
/// # Safety
/// As [`tile_q45k`] (and AVX-VNNI with `V`).
#[inline(always)]
unsafe fn tile_q45k_any<const V: bool>(
    fifth: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: the caller's features and contract are the callee's.
    unsafe {
        if fifth {
            by_height!(nt, tile_q45k_t::<_, true, V>(nb, group, acts, t0))
        } else {
            by_height!(nt, tile_q45k_t::<_, false, V>(nb, group, acts, t0))
        }
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
    unsafe { tile_q45k_any::<false>(fifth, nb, group, acts, t0, nt) }
}

/// [`tile_q45k`] with AVX-VNNI's fused `vpdpwssd`.
///
/// # Safety
/// As [`tile_q45k`], and the CPU must support AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub unsafe fn tile_q45k_vnni(
    fifth: bool,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { tile_q45k_any::<true>(fifth, nb, group, acts, t0, nt) }
}
