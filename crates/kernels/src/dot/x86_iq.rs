//! The grid-type dot products (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
//! IQ1_S × Q8_K) for AVX2 and AVX-512, generic over the level's two
//! primitives ([`IqLevel`]): the scaled byte dot of a 32-weight sub-block
//! and negating the activation bytes that a sign bit marks.
//!
//! Per sub-block of 32, the grid entries of its groups are gathered into one
//! register of unsigned bytes (the IQ2/IQ3 grids hold positive values; the
//! signs go onto the activations instead, which leaves every product
//! unchanged), multiplied with the activations and scaled by the odd integer
//! scales, exactly as in `scalar_iq.rs`. The four 8-byte entries of an IQ2
//! or IQ1 sub-block are loaded one by one; the eight 4-byte entries of an
//! IQ3 sub-block come with one `vpgatherdd` (see [`grid4x8`]). The integer
//! sums are exact whatever the order, and each super-block's `bsum` then
//! takes the reference's float steps, so the results are bit-identical to
//! it.
//!
//! Everything here is `#[inline(always)]` and carries no target feature of
//! its own; it is compiled inside the `#[target_feature]` entry points of
//! `avx2.rs` and `avx512.rs`.
//!
//! # Safety
//!
//! The functions are `unsafe` because they execute AVX2 instructions (and,
//! through `D`, those of its level) without checking the CPU: that is their
//! callers' precondition, which the dispatcher (`Kernels`) establishes.
//! Memory is read through bounds-checked indexing, except the activation
//! loads and the grid gathers, whose offsets and indices the `SAFETY`
//! comments bound.

use std::arch::x86_64::*;

use super::scalar_iq::iq3s_scale;
use super::scalar_iq::{iq1s_combine, iq1s_index, iq1s_qh, iq1s_sumi1, iq2s_index};
use super::x86::{hsum_i32, load32};
use crate::blocks::*;
use crate::iq_grids::*;

/// The two primitives of a level for the grid types.
pub(super) trait IqLevel {
    /// `acc` plus the scaled dot of a sub-block: unsigned weights `q` times
    /// signed activations `y`, each pair of neighbouring products scaled by
    /// the 16-bit lane of `scales` it lands in (see [`scales16`]), as eight
    /// i32 lanes (each the scaled sum of four neighbouring products). The
    /// pair sums of `vpmaddubsw` cannot saturate: grid values are at most 62
    /// and activations at most 127 in magnitude, so a pair is at most
    /// 15 748.
    ///
    /// # Safety
    /// The CPU must support the level's instructions.
    unsafe fn dot_acc(acc: __m256i, q: __m256i, y: __m256i, scales: __m256i) -> __m256i;

    /// `y` with byte `k` negated where bit `k` of `bits` is set. Bytes must
    /// not be -128 (activations never are: the quantizers produce values in
    /// [-127, 127]).
    ///
    /// # Safety
    /// The CPU must support the level's instructions.
    unsafe fn negate_where(y: __m256i, bits: u32) -> __m256i;
}

/// The scale vector of a sub-block for [`IqLevel::dot_acc`]: `lo` for its
/// first 16 weights (the low 128 bits), `hi` for its last 16.
///
/// # Safety
/// The CPU must support AVX.
#[inline(always)]
unsafe fn scales16(lo: i32, hi: i32) -> __m256i {
    // SAFETY: AVX is the caller's precondition; registers only.
    unsafe { _mm256_set_m128i(_mm_set1_epi16(hi as i16), _mm_set1_epi16(lo as i16)) }
}

/// The odd scales `2 * nibble + 1` of all eight sub-blocks of a type with
/// two 4-bit scales per sub-block (low nibble: first 16 weights), as 16-bit
/// lanes: sub-block `ib`'s first scale in lane `ib`, its second in lane
/// `8 + ib`. [`pick_scales`] makes one sub-block's [`scales16`] from it with
/// one shuffle, where building each from scalars would take three.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn nibble_scales(scales: [u8; 8]) -> __m256i {
    let v = u64::from_le_bytes(scales);
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe {
        let both = _mm_set_epi64x((v >> 4) as i64, v as i64);
        let nibbles = _mm_and_si128(both, _mm_set1_epi8(0x0F));
        let odd = _mm_add_epi8(_mm_add_epi8(nibbles, nibbles), _mm_set1_epi8(1));
        _mm256_cvtepu8_epi16(odd)
    }
}

/// Per sub-block `ib`, the byte shuffle that copies 16-bit lane `ib` of
/// each 128-bit half to all eight lanes of that half.
static PICK: [[u8; 32]; 8] = pick_table();

const fn pick_table() -> [[u8; 32]; 8] {
    let mut t = [[0u8; 32]; 8];
    let mut ib = 0;
    while ib < 8 {
        let mut k = 0;
        while k < 32 {
            t[ib][k] = (2 * ib + k % 2) as u8;
            k += 1;
        }
        ib += 1;
    }
    t
}

/// Sub-block `ib`'s [`scales16`] out of [`nibble_scales`].
///
/// # Safety
/// The CPU must support AVX2; `ib` must be below 8.
#[inline(always)]
unsafe fn pick_scales(all: __m256i, ib: usize) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition; the load reads the 32
    // bytes of `PICK[ib]` (bounds-checked index).
    unsafe { _mm256_shuffle_epi8(all, load32(PICK[ib].as_ptr())) }
}

/// Four 8-value grid entries as one register (entry `l` in bytes
/// `8l..8l + 8`).
///
/// # Safety
/// The CPU must support AVX.
#[inline(always)]
unsafe fn grid8x4(g: [u64; 4]) -> __m256i {
    // SAFETY: AVX is the caller's precondition; registers only.
    unsafe { _mm256_set_epi64x(g[3] as i64, g[2] as i64, g[1] as i64, g[0] as i64) }
}

/// Eight 4-value grid entries as one register (entry `k`, `grid[idx[k]]`,
/// in bytes `4k..4k + 4`), with one `vpgatherdd`. Measured on a Sapphire
/// Rapids Xeon, the gather beats eight loads and inserts (which keep the
/// shuffle port busy) by 15 % (IQ3_XXS) to 60 % (IQ3_S); for the 8-value
/// grids, four entries per register, `vpgatherdq` measured no faster, so
/// those use [`grid8x4`].
///
/// # Safety
/// The CPU must support AVX2, and every lane of `idx` must be below
/// `grid.len()`.
#[inline(always)]
unsafe fn grid4x8(grid: &[u32], idx: __m256i) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition; the gather reads
    // `grid[idx[k]]` for the eight lanes, each inside `grid` by the
    // caller's precondition.
    unsafe { _mm256_i32gather_epi32::<4>(grid.as_ptr() as *const i32, idx) }
}

/// The eight bytes at `b[at..at + 8]` widened to i32 lanes.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn bytes8(b: &[u8], at: usize) -> __m256i {
    // An 8-byte slice always converts; `unwrap_or` only spares a panic path.
    let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe { _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v as i64)) }
}

/// Per 7-bit sign code, the 8 bytes that `vpsignb` takes to apply its
/// signs: -1 (0xff) for a negated value, 1 for a kept one. Derived from
/// [`KSIGNS_IQ2XS`] when compiled.
static KSIGNS_BYTES: [u64; 128] = ksigns_bytes();

const fn ksigns_bytes() -> [u64; 128] {
    let mut t = [0u64; 128];
    let mut i = 0;
    while i < 128 {
        let mut j = 0;
        while j < 8 {
            let byte: u64 = if KSIGNS_IQ2XS[i] & KMASK_IQ2XS[j] != 0 {
                0xff
            } else {
                0x01
            };
            t[i] |= byte << (8 * j);
            j += 1;
        }
        i += 1;
    }
    t
}

/// The 32 activation quants of sub-block `ib`.
///
/// # Safety
/// The CPU must support AVX; `ib` must be below 8.
#[inline(always)]
unsafe fn acts(y: &BlockQ8K, ib: usize) -> __m256i {
    debug_assert!(ib < 8);
    // SAFETY: AVX is the caller's precondition; with `ib < 8` the load
    // reads quants `32 * ib..32 * ib + 32`, inside the 256 of `y.qs`.
    unsafe { load32(y.qs.as_ptr().add(32 * ib)) }
}

/// The activations of sub-block `ib` with the signs of four 7-bit codes
/// applied (code `l` to quants `8l..8l + 8`). A table lookup per code
/// beats expanding bits at both levels.
///
/// # Safety
/// The CPU must support AVX2; `ib` must be below 8.
#[inline(always)]
unsafe fn ksigned_acts(y: &BlockQ8K, ib: usize, codes: [usize; 4]) -> __m256i {
    // SAFETY: the preconditions are the caller's (and `acts`').
    unsafe {
        let s = grid8x4([
            KSIGNS_BYTES[codes[0] & 127],
            KSIGNS_BYTES[codes[1] & 127],
            KSIGNS_BYTES[codes[2] & 127],
            KSIGNS_BYTES[codes[3] & 127],
        ]);
        _mm256_sign_epi8(acts(y, ib), s)
    }
}

/// The four 7-bit sign codes of a word (bits 28..32, the scale, are
/// dropped by [`ksigned_acts`]' mask).
#[inline(always)]
fn codes(aux: u32) -> [usize; 4] {
    let a = aux as usize;
    [a, a >> 7, a >> 14, a >> 21]
}

/// The running total of the IQ2/IQ3 types: `acc + (d_w * d_a) * bsum`.
#[inline(always)]
fn add_block(acc: f32, d: F16Bits, y: &BlockQ8K, bsum: i32) -> f32 {
    acc + (f16_to_f32(d) * y.d) * bsum as f32
}

/// IQ2_XXS × Q8_K, bit-exact with `scalar_iq::dot_iq2_xxs`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq2_xxs<D: IqLevel>(w: &[BlockIQ2XXS], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition;
    // `ib < 8` for `acts` and `ksigned_acts`.
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                let q = &x.qs[8 * ib..8 * ib + 8];
                let aux = le32(q, 4);
                let g = grid8x4([
                    IQ2XXS_GRID[q[0] as usize],
                    IQ2XXS_GRID[q[1] as usize],
                    IQ2XXS_GRID[q[2] as usize],
                    IQ2XXS_GRID[q[3] as usize],
                ]);
                let yv = ksigned_acts(y, ib, codes(aux));
                let ls = 2 * (aux >> 28) as i32 + 1;
                sumi = D::dot_acc(sumi, g, yv, scales16(ls, ls));
            }
            acc = add_block(acc, x.d, y, hsum_i32(sumi));
        }
        0.125 * acc
    }
}

/// IQ2_XS × Q8_K, bit-exact with `scalar_iq::dot_iq2_xs`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq2_xs<D: IqLevel>(w: &[BlockIQ2XS], a: &[BlockQ8K]) -> f32 {
    // SAFETY: as in `iq2_xxs`, and `ib < 8` for `pick_scales`.
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            let scales = nibble_scales(x.scales);
            for ib in 0..8 {
                let q: [u16; 4] = std::array::from_fn(|l| le16(&x.qs, 2 * (4 * ib + l)));
                let g = grid8x4([
                    IQ2XS_GRID[(q[0] & 511) as usize],
                    IQ2XS_GRID[(q[1] & 511) as usize],
                    IQ2XS_GRID[(q[2] & 511) as usize],
                    IQ2XS_GRID[(q[3] & 511) as usize],
                ]);
                let c = q.map(|q| (q >> 9) as usize);
                let yv = ksigned_acts(y, ib, c);
                sumi = D::dot_acc(sumi, g, yv, pick_scales(scales, ib));
            }
            acc = add_block(acc, x.d, y, hsum_i32(sumi));
        }
        0.125 * acc
    }
}

/// IQ2_S × Q8_K, bit-exact with `scalar_iq::dot_iq2_s`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq2_s<D: IqLevel>(w: &[BlockIQ2S], a: &[BlockQ8K]) -> f32 {
    // SAFETY: as in `iq2_xs`.
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            let scales = nibble_scales(x.scales);
            for ib in 0..8 {
                let g = grid8x4([
                    IQ2S_GRID[iq2s_index(x, ib, 0)],
                    IQ2S_GRID[iq2s_index(x, ib, 1)],
                    IQ2S_GRID[iq2s_index(x, ib, 2)],
                    IQ2S_GRID[iq2s_index(x, ib, 3)],
                ]);
                let yv = D::negate_where(acts(y, ib), le32(&x.qs, 32 + 4 * ib));
                sumi = D::dot_acc(sumi, g, yv, pick_scales(scales, ib));
            }
            acc = add_block(acc, x.d, y, hsum_i32(sumi));
        }
        0.125 * acc
    }
}

/// IQ3_XXS × Q8_K, bit-exact with `scalar_iq::dot_iq3_xxs`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq3_xxs<D: IqLevel>(w: &[BlockIQ3XXS], a: &[BlockQ8K]) -> f32 {
    // SAFETY: as in `iq2_xxs`; each gather's indices are below its grid's
    // length (see the comment at the call).
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                // Byte indices: below 256, the grid's length.
                let g = grid4x8(&IQ3XXS_GRID, bytes8(&x.qs, 8 * ib));
                let aux = le32(&x.qs, 64 + 4 * ib);
                let yv = ksigned_acts(y, ib, codes(aux));
                let ls = 2 * (aux >> 28) as i32 + 1;
                sumi = D::dot_acc(sumi, g, yv, scales16(ls, ls));
            }
            acc = add_block(acc, x.d, y, hsum_i32(sumi));
        }
        0.25 * acc
    }
}

/// IQ3_S × Q8_K, bit-exact with `scalar_iq::dot_iq3_s`.
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq3_s<D: IqLevel>(w: &[BlockIQ3S], a: &[BlockQ8K]) -> f32 {
    // SAFETY: as in `iq3_xxs`.
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                // Lane `k`: the low byte of index `k` and, as bit 8, bit
                // `k` of `qh` (shifted left by `8 - k`): below 512, the
                // grid's length.
                let qh = _mm256_set1_epi32(x.qh[ib] as i32);
                let high = _mm256_sllv_epi32(qh, _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1));
                let high = _mm256_and_si256(high, _mm256_set1_epi32(256));
                let g = grid4x8(&IQ3S_GRID, _mm256_or_si256(bytes8(&x.qs, 8 * ib), high));
                let yv = D::negate_where(acts(y, ib), le32(&x.signs, 4 * ib));
                let ls = iq3s_scale(x, ib);
                sumi = D::dot_acc(sumi, g, yv, scales16(ls, ls));
            }
            acc = add_block(acc, x.d, y, hsum_i32(sumi));
        }
        acc
    }
}

/// IQ1_S × Q8_K, bit-exact with `scalar_iq::dot_iq1_s`. Its grid values are
/// signed (-1, 0, 1): the register holds their absolute values and their
/// signs go onto the activations (`vpsignb`, which also zeroes the
/// activations of the zero values).
///
/// # Safety
/// The CPU must support AVX2 and the level of `D`.
#[inline(always)]
pub(super) unsafe fn iq1_s<D: IqLevel>(w: &[BlockIQ1S], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition; `ib < 8` for
    // `acts`.
    unsafe {
        let mut acc = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                let qh = iq1s_qh(x, ib);
                let g = grid8x4([
                    IQ1S_GRID[iq1s_index(x, qh, ib, 0)],
                    IQ1S_GRID[iq1s_index(x, qh, ib, 1)],
                    IQ1S_GRID[iq1s_index(x, qh, ib, 2)],
                    IQ1S_GRID[iq1s_index(x, qh, ib, 3)],
                ]);
                let yv = acts(y, ib);
                let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
                let (q, yv) = (_mm256_sign_epi8(g, g), _mm256_sign_epi8(yv, g));
                sumi = D::dot_acc(sumi, q, yv, scales16(ls, ls));
            }
            acc = iq1s_combine(acc, f16_to_f32(x.d), y.d, hsum_i32(sumi), iq1s_sumi1(x, y));
        }
        acc
    }
}
