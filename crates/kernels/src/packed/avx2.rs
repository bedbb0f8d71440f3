//! The AVX2 product over the interleaved layout, for CPUs without AVX-512
//! VNNI.
//!
//! A 256-bit register holds half a group: the same four quants of eight
//! rows. Each block is therefore taken as two halves (rows `0..8`, then
//! `8..16`), the lower and upper 32 bytes of every 64-byte chunk, so the
//! bytes are still read in file order. Without `vpdpbusd`, a byte dot
//! product is `vpmaddubsw` (unsigned quant times signed activation, pairs
//! summed into i16, saturating) then `vpmaddwd` against ones (pairs of i16
//! into i32). The i16 steps are exact because the sums stay in range:
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
//! Everything here needs AVX2, FMA and F16C; the dispatcher only hands
//! these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::layout::Format;
use super::tile::{Acts, Tile, GROUP, TILE};
use crate::blocks::{KVALUES_IQ4NL, KVALUES_MXFP4};

/// Rows per 256-bit register.
pub(super) const HALF: usize = GROUP / 2;

/// `(b & 0x10) | q`.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn put_fifth(b: __m256i, q: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe { _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi8(0x10)), q) }
}

/// Half `h` of the eight registers [`super::avx512::nibble_quants`] makes:
/// 4- or 5-bit quants of rows `8h..8h + 8` from the four 64-byte nibble
/// chunks at `qs` and, with `FIFTH`, the 64 bytes of fifth bits at `qh`.
///
/// # Safety
/// AVX2; 256 bytes from `qs` and, with `FIFTH`, 64 from `qh` are readable;
/// `h < 2`.
#[inline(always)]
pub(super) unsafe fn nibble_quants<const FIFTH: bool>(
    qs: *const u8,
    qh: *const u8,
    h: usize,
) -> [__m256i; 8] {
    // SAFETY: the loads read 32 bytes at `64 c + 32 h` (and `32 h` of the
    // fifth bits), inside the ranges the caller guarantees.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut q = [_mm256_setzero_si256(); 8];
        for c in 0..4 {
            let x = _mm256_loadu_si256(qs.add(64 * c + 32 * h) as *const _);
            q[c] = _mm256_and_si256(x, m4);
            q[c + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4);
        }
        if FIFTH {
            let x = _mm256_loadu_si256(qh.add(32 * h) as *const _);
            q[0] = put_fifth(_mm256_slli_epi32::<4>(x), q[0]);
            q[1] = put_fifth(_mm256_slli_epi32::<3>(x), q[1]);
            q[2] = put_fifth(_mm256_slli_epi32::<2>(x), q[2]);
            q[3] = put_fifth(_mm256_slli_epi32::<1>(x), q[3]);
            q[4] = put_fifth(x, q[4]);
            q[5] = put_fifth(_mm256_srli_epi32::<1>(x), q[5]);
            q[6] = put_fifth(_mm256_srli_epi32::<2>(x), q[6]);
            q[7] = put_fifth(_mm256_srli_epi32::<3>(x), q[7]);
        }
        q
    }
}

/// The four activation bytes at `y`, broadcast.
///
/// # Safety
/// AVX; four bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn bcast4(y: *const u8) -> __m256i {
    // SAFETY: reads `y..y + 4`, the caller's guarantee.
    unsafe { _mm256_set1_epi32((y as *const i32).read_unaligned()) }
}

/// `init + Σ q·y` over 32 quants per lane: register `k` of `q` against
/// activation bytes `y + 4k`, broadcast. With `V` (AVX-VNNI) each register
/// is one `vpdpbusd`, in two independent chains, exact for any unsigned
/// quant byte; without, quants of at most 31 give four products per i16
/// lane (exact, see the module notes), then one widening per four
/// registers. Integer sums, so both
/// give the same integers.
///
/// # Safety
/// AVX2 (and AVX-VNNI with `V`); 32 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot32_small<const V: bool>(
    q: &[__m256i; 8],
    y: *const u8,
    init: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        if V {
            let mut c = [init, _mm256_setzero_si256()];
            for (k, q) in q.iter().enumerate() {
                c[k % 2] = _mm256_dpbusd_avx_epi32(c[k % 2], *q, bcast4(y.add(4 * k)));
            }
            _mm256_add_epi32(c[0], c[1])
        } else {
            // Half by half, each i16 sum widened as soon as it is complete:
            // one sum live instead of the two of `dot32_by`, which keeps a
            // tall tile's running sums in the sixteen registers. With both
            // halves live the legacy tiles ran at a third to a half of this
            // speed from four tokens on (`tile_levels`, plain AVX2, Intel
            // Xeon, thread CPU time).
            let ones = _mm256_set1_epi16(1);
            let mut wide = init;
            for (half, q) in q.chunks_exact(4).enumerate() {
                let mut p = _mm256_setzero_si256();
                for (k, q) in q.iter().enumerate() {
                    let y = bcast4(y.add(16 * half + 4 * k));
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(*q, y));
                }
                wide = _mm256_add_epi32(wide, _mm256_madd_epi16(p, ones));
            }
            wide
        }
    }
}

/// `init + w · Σ q·y`, as [`dot32_small`] but widened by `vpmaddwd`
/// against `w`, a lane's weight twice as i16: that multiplies each pair of
/// i16 sums by the weight and adds them, exactly while
/// `2 * |w| * 31,496` fits an i32 (any i16 weight does). Both halves stay
/// live until one [`madd2_add`]: the K-quant tiles' form (the legacy tiles
/// widen half by half, see [`dot32_small`]), the same
/// with or without AVX-VNNI (see [`madd2_add`]).
///
/// # Safety
/// AVX2; 32 bytes from `y` are readable.
#[inline(always)]
pub(super) unsafe fn dot32_by(
    q: &[__m256i; 8],
    y: *const u8,
    w: __m256i,
    init: __m256i,
) -> __m256i {
    // SAFETY: the caller's contract; the loads read `y..y + 32`.
    unsafe {
        let mut p = [_mm256_setzero_si256(); 2];
        for (half, (q, p)) in q.chunks_exact(4).zip(&mut p).enumerate() {
            for (k, q) in q.iter().enumerate() {
                let y = bcast4(y.add(16 * half + 4 * k));
                *p = _mm256_add_epi16(*p, _mm256_maddubs_epi16(*q, y));
            }
        }
        madd2_add(init, p[0], p[1], w)
    }
}

/// `acc + vpmaddwd(p, w)`: one `vpdpwssd` with `V` (AVX-VNNI), two
/// instructions without; the same integers.
///
/// # Safety
/// AVX2 (and AVX-VNNI with `V`).
#[inline(always)]
pub(super) unsafe fn madd_add<const V: bool>(acc: __m256i, p: __m256i, w: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        if V {
            _mm256_dpwssd_avx_epi32(acc, p, w)
        } else {
            _mm256_add_epi32(acc, _mm256_madd_epi16(p, w))
        }
    }
}

/// `acc + vpmaddwd(p0, w) + vpmaddwd(p1, w)`, the two products summed
/// before they meet `acc`, so a running sum waits on one add per call.
/// Two `vpmaddwd` side by side, not a `vpdpwssd` after a `vpmaddwd`, even
/// under AVX-VNNI: the fused form chains the two (ten cycles instead of
/// six) and measured 4-8 % slower in the K-quant tiles on an Intel Xeon
/// with AVX-VNNI (`tile_levels`, thread CPU time).
///
/// # Safety
/// AVX2.
#[inline(always)]
pub(super) unsafe fn madd2_add(acc: __m256i, p0: __m256i, p1: __m256i, w: __m256i) -> __m256i {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let both = _mm256_add_epi32(_mm256_madd_epi16(p0, w), _mm256_madd_epi16(p1, w));
        _mm256_add_epi32(acc, both)
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

/// Half `h` of one block for every token of the tile, added to running
/// sums `acc` (one per token).
///
/// # Safety
/// As [`tile`]; `b` must be below the row's block count and `h < 2`.
#[inline(always)]
unsafe fn half_block<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
    const V: bool,
>(
    f: &Format,
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    h: usize,
    acc: &mut [__m256; T],
) {
    // SAFETY: the CPU features are the caller's precondition; the quant
    // loads stay inside the group-block, the scale loads read 16 bytes at
    // `d_at + 16 h` and `m_at + 16 h` (8 at `d_at + 8 h` for E8M0; inside
    // it), and `quants` gives 32
    // bytes of which the broadcasts read `4k..4k + 4`.
    unsafe {
        let dw = if E8 {
            e8m0_half(_mm_loadl_epi64(gb.add(f.d_at() + 8 * h) as *const _))
        } else {
            _mm256_cvtph_ps(_mm_loadu_si128(gb.add(f.d_at() + 16 * h) as *const _))
        };
        let mw = if MIN {
            _mm256_cvtph_ps(_mm_loadu_si128(gb.add(f.m_at() + 16 * h) as *const _))
        } else {
            _mm256_setzero_ps()
        };
        // Plain loops rather than `map`/`from_fn`: a closure does not
        // inherit the caller's target features, so the intrinsics inside
        // it would be calls instead of instructions.
        let (q, s) = if NIB && CB {
            // IQ4_NL and MXFP4: each nibble picks a signed codebook value,
            // then the signed product as for Q8_0 (the values are at most
            // 127 in magnitude, so the i16 steps stay exact).
            let mut s = nibble_quants::<false>(gb, gb, h);
            let mut a = s;
            let book = codebook(if E8 { &KVALUES_MXFP4 } else { &KVALUES_IQ4NL });
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

/// One block (both halves) for every token of the tile.
///
/// # Safety
/// As [`half_block`].
#[inline(always)]
unsafe fn block<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
    const V: bool,
>(
    f: &Format,
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    acc: &mut [[__m256; T]; 2],
) {
    // SAFETY: as `half_block`, for `h` 0 and 1.
    unsafe {
        // As in the AVX-512 kernel, a lone token outruns the hardware
        // prefetcher; prefill tiles reuse the group from the caches.
        let mut line = if T <= 2 && acts.ahead != 0 {
            0
        } else {
            usize::MAX
        };
        while line < f.group_block_bytes() {
            _mm_prefetch::<_MM_HINT_T0>(gb.wrapping_add(acts.ahead + line) as *const i8);
            line += 64;
        }
        let [lo, hi] = acc;
        half_block::<T, NIB, FIFTH, MIN, CB, E8, V>(f, gb, acts, t0, b, 0, lo);
        half_block::<T, NIB, FIFTH, MIN, CB, E8, V>(f, gb, acts, t0, b, 1, hi);
    }
}

/// Stores running sums (one per half and token) into a tile.
///
/// # Safety
/// AVX.
#[inline(always)]
pub(super) unsafe fn store<const T: usize>(acc: &[[__m256; T]; 2]) -> Tile {
    let mut out = [[0.0f32; GROUP]; TILE];
    for (h, acc) in acc.iter().enumerate() {
        for (out, acc) in out.iter_mut().zip(acc) {
            // SAFETY: `out` has sixteen lanes; the store writes `8h..8h + 8`.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(HALF * h), *acc) };
        }
    }
    out
}

/// `T` tokens from `t0` against one group of `nb` blocks.
///
/// # Safety
/// AVX2, FMA and F16C; `group` holds `nb` group-blocks of `f`, and `acts`
/// covers tokens `t0..t0 + T` with `nb` blocks each.
#[inline(always)]
unsafe fn tile_t<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
    const V: bool,
>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    if T > 2 {
        // SAFETY: the same contract.
        return unsafe { tile_by_partial::<T, NIB, FIFTH, MIN, CB, E8, V>(f, nb, group, acts, t0) };
    }
    // SAFETY: as the function's contract; `block` gets `b < nb` and the
    // group-block at `b * gbytes`, inside `group` (`nb * gbytes` bytes).
    unsafe {
        let gbytes = f.group_block_bytes();
        debug_assert!(group.len() >= nb * gbytes);
        let base = group.as_ptr();
        let z = [[_mm256_setzero_ps(); T]; 2];
        let mut acc = [z; 4];
        let mut b = 0;
        while b + 4 <= nb {
            let [a0, a1, a2, a3] = &mut acc;
            block::<T, NIB, FIFTH, MIN, CB, E8, V>(f, base.add(b * gbytes), acts, t0, b, a0);
            block::<T, NIB, FIFTH, MIN, CB, E8, V>(
                f,
                base.add((b + 1) * gbytes),
                acts,
                t0,
                b + 1,
                a1,
            );
            block::<T, NIB, FIFTH, MIN, CB, E8, V>(
                f,
                base.add((b + 2) * gbytes),
                acts,
                t0,
                b + 2,
                a2,
            );
            block::<T, NIB, FIFTH, MIN, CB, E8, V>(
                f,
                base.add((b + 3) * gbytes),
                acts,
                t0,
                b + 3,
                a3,
            );
            b += 4;
        }
        for (s, acc) in acc.iter_mut().enumerate().take(nb - b) {
            block::<T, NIB, FIFTH, MIN, CB, E8, V>(
                f,
                base.add((b + s) * gbytes),
                acts,
                t0,
                b + s,
                acc,
            );
        }
        // The reference's combine: `(s0 + s2) + (s1 + s3)`.
        let mut sum = [[_mm256_setzero_ps(); T]; 2];
        for (h, sum) in sum.iter_mut().enumerate() {
            for (t, sum) in sum.iter_mut().enumerate() {
                *sum = _mm256_add_ps(
                    _mm256_add_ps(acc[0][h][t], acc[2][h][t]),
                    _mm256_add_ps(acc[1][h][t], acc[3][h][t]),
                );
            }
        }
        store(&sum)
    }
}

/// [`tile_t`] for prefill heights, with the same sums in the same order
/// but another loop order: half by half, and within a half partial sum by
/// partial sum (blocks `p, p + 4, …` add into partial `p`), so that only
/// `T` running sums are live beside the eight quant registers. Taking all
/// four partials at once needs `8 T` sums, more than AVX2's sixteen
/// registers, and the spilled sums cost a load and a store per block and
/// token. The blocks are then read with a stride of four, all from the
/// caches, since a prefill tile re-reads a group the tile before it read.
///
/// # Safety
/// As [`tile_t`].
#[inline(always)]
unsafe fn tile_by_partial<
    const T: usize,
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
    const V: bool,
>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: as `tile_t`: `half_block` gets `b < nb`, `h < 2` and the
    // group-block at `b * gbytes`, inside `group`.
    unsafe {
        let gbytes = f.group_block_bytes();
        debug_assert!(group.len() >= nb * gbytes);
        let base = group.as_ptr();
        let mut sum = [[_mm256_setzero_ps(); T]; 2];
        // The first tile of a group reads it from memory, in an order the
        // hardware prefetcher does not follow: while its first half runs,
        // fetch the next group (which the same thread usually takes next)
        // block by block. Later tiles find both in the caches.
        let ahead = t0 == 0;
        let next = base.wrapping_add(nb * gbytes);
        for (h, sum) in sum.iter_mut().enumerate() {
            let mut part = [[_mm256_setzero_ps(); T]; 4];
            for (p, acc) in part.iter_mut().enumerate() {
                let mut b = p;
                while b < nb {
                    if ahead && h == 0 {
                        let mut line = 0;
                        while line < gbytes {
                            let at = next.wrapping_add(b * gbytes + line);
                            _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
                            line += 64;
                        }
                    }
                    half_block::<T, NIB, FIFTH, MIN, CB, E8, V>(
                        f,
                        base.add(b * gbytes),
                        acts,
                        t0,
                        b,
                        h,
                        acc,
                    );
                    b += 4;
                }
            }
            // The reference's combine: `(s0 + s2) + (s1 + s3)`.
            for (t, sum) in sum.iter_mut().enumerate() {
                *sum = _mm256_add_ps(
                    _mm256_add_ps(part[0][t], part[2][t]),
                    _mm256_add_ps(part[1][t], part[3][t]),
                );
            }
        }
        store(&sum)
    }
}

/// Dispatches on the tile height for one format.
///
/// # Safety
/// As [`tile_t`], for `nt` tokens (1 to [`super::NARROW_TILE`]).
#[inline(always)]
unsafe fn tile_n<
    const NIB: bool,
    const FIFTH: bool,
    const MIN: bool,
    const CB: bool,
    const E8: bool,
    const V: bool,
>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: the caller's contract, for the tile height chosen.
    unsafe {
        by_height!(
            nt,
            tile_t::<_, NIB, FIFTH, MIN, CB, E8, V>(f, nb, group, acts, t0)
        )
    }
}

/// Any legacy format, with (`V`) or without AVX-VNNI.
///
/// # Safety
/// As [`tile`] (and AVX-VNNI with `V`).
#[inline(always)]
unsafe fn tile_any<const V: bool>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: the caller's features and contract are the callee's.
    unsafe {
        match (f.codebook, f.e8m0) {
            (true, true) => tile_n::<true, false, false, true, true, V>(f, nb, group, acts, t0, nt),
            (true, false) => {
                tile_n::<true, false, false, true, false, V>(f, nb, group, acts, t0, nt)
            }
            _ => by_legacy_format!(f, tile_n::<.., false, false, V>(f, nb, group, acts, t0, nt)),
        }
    }
}

/// The AVX2 kernel for any legacy interleaved format.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `group` holds `nb`
/// group-blocks of `f`, and `acts` covers tokens `t0..t0 + nt`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { tile_any::<false>(f, nb, group, acts, t0, nt) }
}

/// [`tile`] with the byte dot products fused by AVX-VNNI.
///
/// # Safety
/// As [`tile`], and the CPU must support AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub unsafe fn tile_vnni(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
    nt: usize,
) -> Tile {
    // SAFETY: this function's features and contract are the callee's.
    unsafe { tile_any::<true>(f, nb, group, acts, t0, nt) }
}

/// A codebook's sixteen values in both 128-bit lanes, for `vpshufb`.
///
/// # Safety
/// AVX2.
#[inline(always)]
pub(super) unsafe fn codebook(book: &[i8; 16]) -> __m256i {
    // SAFETY: the caller's precondition; the load reads the 16-byte table.
    unsafe {
        let t = _mm_loadu_si128(book.as_ptr() as *const _);
        _mm256_broadcastsi128_si256(t)
    }
}

/// Eight E8M0 scale bytes (the low eight of `e`) widened to their f32
/// values halved, exactly as [`crate::blocks::e8m0_to_f32_half`]:
/// `(e - 1) << 23` as float bits, and for `e` 0 and 1 the subnormals
/// `0x0020_0000 << e`.
///
/// # Safety
/// AVX2.
#[inline(always)]
pub(super) unsafe fn e8m0_half(e: __m128i) -> __m256 {
    // SAFETY: the caller's precondition; registers only.
    unsafe {
        let e = _mm256_cvtepu8_epi32(e);
        let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
        let small = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
        let tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
        _mm256_castsi256_ps(_mm256_blendv_epi8(normal, small, tiny))
    }
}
