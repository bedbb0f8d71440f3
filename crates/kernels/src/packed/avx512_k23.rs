//! The AVX-512 VNNI product over interleaved IQ4_XS (see
//! [`super::layout_k23`]).
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
//! Everything here needs AVX-512 F, BW and VNNI plus F16C; the dispatcher
//! only hands these kernels out after checking the CPU.

use std::arch::x86_64::*;

use super::avx512::{dot32, nibble_quants};
use super::avx512_k::PREFETCH;
use super::layout::GROUP;
use super::layout_k23::{IQ4XS_D_AT, IQ4XS_GROUP_BLOCK, IQ4XS_SC_AT, IQ4XS_SUB_BYTES};
use super::{Acts, Tile, TILE};
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
                if T <= 2 {
                    for line in (0..IQ4XS_SUB_BYTES).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(
                            gb.wrapping_add(IQ4XS_SUB_BYTES * j + line + PREFETCH) as *const i8,
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
                    let sub = dot32(&q, y, start);
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
    unsafe { by_height!(nt, tile_t::<_>(nb, group, acts, t0)) }
}
