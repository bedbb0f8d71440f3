//! Scalar reference dot products of the grid types (IQ2_XXS, IQ2_XS, IQ2_S,
//! IQ3_XXS, IQ3_S, IQ1_S) with Q8_K activations.
//!
//! They follow ggml's generic `ggml_vec_dot_iq*_q8_K` (ggml-cpu/quants.c):
//!
//! - Per sub-block of 32 weights, the products of grid values (signs
//!   applied) and activation quants are summed in `i32` and multiplied by
//!   the sub-block's odd integer scale `2 * ls + 1`; a super-block's scaled
//!   sums add up to one exact `i32`, `bsum`. (The scale is applied per 16
//!   weights where the type has two per sub-block.)
//! - Each super-block then adds `(d_w * d_a) * bsum` to one running `f32`
//!   total, super-block by super-block, and the total is multiplied by the
//!   type's constant at the end: `0.125` for the IQ2 types, `0.25` for
//!   IQ3_XXS, none for IQ3_S. That constant and the `2 * ls + 1` scales are
//!   the dequantized weights' `d * (0.5 + ls) * 0.25` (or `0.5`) with the
//!   fractions taken out of the integer sum.
//! - IQ1_S adds a shift of ±1/8 per sub-block, carried by the activation
//!   sums `bsums`: `sumi1 = sum(ls * ±1 * bsums)`, and a super-block adds
//!   `(d_w * d_a) * (sumi + 0.125 * sumi1)`.
//!
//! The SIMD versions compute the same integers (in any order, which is
//! exact) and then take these float steps in this order, so they are
//! bit-identical to these functions.

use crate::blocks::*;
use crate::iq_grids::*;

/// `sum(grid[j] * ±q[j])` over 8 values: bit `j` of `signs` negates value
/// `j`.
#[inline(always)]
fn signed8(grid: [u8; 8], signs: u8, q: &[i8]) -> i32 {
    let mut s = 0i32;
    for j in 0..8 {
        let p = grid[j] as i32 * q[j] as i32;
        s += if signs & KMASK_IQ2XS[j] != 0 { -p } else { p };
    }
    s
}

/// Two 4-value grid entries as one group of 8.
#[inline(always)]
fn join4(g1: u32, g2: u32) -> [u8; 8] {
    (g1 as u64 | (g2 as u64) << 32).to_le_bytes()
}

/// The sign byte of group `l` from a word of four 7-bit codes.
#[inline(always)]
fn ksigns(aux: u32, l: usize) -> u8 {
    KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize]
}

/// IQ2_XXS × Q8_K: `0.125 * sum((d_w * d_a) * bsum)`. Blocks past the
/// shorter slice are ignored.
pub fn dot_iq2_xxs(w: &[BlockIQ2XXS], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut bsum = 0i32;
        for ib in 0..8 {
            let aux = le32(&x.qs, 8 * ib + 4);
            let mut sumi = 0i32;
            for l in 0..4 {
                let grid = IQ2XXS_GRID[x.qs[8 * ib + l] as usize].to_le_bytes();
                let q = &y.qs[32 * ib + 8 * l..];
                sumi += signed8(grid, ksigns(aux, l), q);
            }
            bsum += sumi * (2 * (aux >> 28) as i32 + 1);
        }
        acc += (f16_to_f32(x.d) * y.d) * bsum as f32;
    }
    0.125 * acc
}

/// The exact `bsum` of a super-block of a type with two 4-bit scales per
/// sub-block (IQ2_XS, IQ2_S): per 16 weights the sum of two groups of 8
/// times the odd scale `2 * nibble + 1`. `group(ib, l)` gives group `l` of
/// sub-block `ib`: its grid entry and its sign byte.
#[inline(always)]
fn two_scale_bsum(
    scales: &[u8; 8],
    y: &BlockQ8K,
    group: impl Fn(usize, usize) -> (u64, u8),
) -> i32 {
    let mut bsum = 0i32;
    for (ib, &sc) in scales.iter().enumerate() {
        let ls = [2 * (sc & 0x0F) as i32 + 1, 2 * (sc >> 4) as i32 + 1];
        for (half, &ls) in ls.iter().enumerate() {
            let mut sumi = 0i32;
            for l in 2 * half..2 * half + 2 {
                let (grid, signs) = group(ib, l);
                sumi += signed8(grid.to_le_bytes(), signs, &y.qs[32 * ib + 8 * l..]);
            }
            bsum += sumi * ls;
        }
    }
    bsum
}

/// IQ2_XS × Q8_K, two scales per sub-block, summed as [`dot_iq2_xxs`].
/// Blocks past the shorter slice are ignored.
pub fn dot_iq2_xs(w: &[BlockIQ2XS], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let bsum = two_scale_bsum(&x.scales, y, |ib, l| {
            let q2 = le16(&x.qs, 2 * (4 * ib + l));
            (
                IQ2XS_GRID[(q2 & 511) as usize],
                KSIGNS_IQ2XS[(q2 >> 9) as usize],
            )
        });
        acc += (f16_to_f32(x.d) * y.d) * bsum as f32;
    }
    0.125 * acc
}

/// The 10-bit grid index of group `l` of IQ2_S sub-block `ib`.
#[inline(always)]
pub(crate) fn iq2s_index(x: &BlockIQ2S, ib: usize, l: usize) -> usize {
    x.qs[4 * ib + l] as usize | (((x.qh[ib] as usize) >> (2 * l)) & 3) << 8
}

/// IQ2_S × Q8_K, summed as [`dot_iq2_xs`]. Blocks past the shorter slice
/// are ignored.
pub fn dot_iq2_s(w: &[BlockIQ2S], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let bsum = two_scale_bsum(&x.scales, y, |ib, l| {
            (IQ2S_GRID[iq2s_index(x, ib, l)], x.qs[32 + 4 * ib + l])
        });
        acc += (f16_to_f32(x.d) * y.d) * bsum as f32;
    }
    0.125 * acc
}

/// IQ3_XXS × Q8_K: `0.25 * sum((d_w * d_a) * bsum)`. Blocks past the
/// shorter slice are ignored.
pub fn dot_iq3_xxs(w: &[BlockIQ3XXS], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut bsum = 0i32;
        for ib in 0..8 {
            let aux = le32(&x.qs, 64 + 4 * ib);
            let q3 = &x.qs[8 * ib..8 * ib + 8];
            let mut sumi = 0i32;
            for l in 0..4 {
                let grid = join4(
                    IQ3XXS_GRID[q3[2 * l] as usize],
                    IQ3XXS_GRID[q3[2 * l + 1] as usize],
                );
                sumi += signed8(grid, ksigns(aux, l), &y.qs[32 * ib + 8 * l..]);
            }
            bsum += sumi * (2 * (aux >> 28) as i32 + 1);
        }
        acc += (f16_to_f32(x.d) * y.d) * bsum as f32;
    }
    0.25 * acc
}

/// The 9-bit grid index of group `k` (of 4 values) of IQ3_S sub-block `ib`.
#[inline(always)]
fn iq3s_index(x: &BlockIQ3S, ib: usize, k: usize) -> usize {
    x.qs[8 * ib + k] as usize | (((x.qh[ib] as usize) >> k) & 1) << 8
}

/// The odd scale `2 * ls + 1` of IQ3_S sub-block `ib`.
#[inline(always)]
pub(crate) fn iq3s_scale(x: &BlockIQ3S, ib: usize) -> i32 {
    2 * ((x.scales[ib / 2] >> (4 * (ib % 2))) & 0x0F) as i32 + 1
}

/// IQ3_S × Q8_K: `sum((d_w * d_a) * bsum)` (no final constant). Blocks
/// past the shorter slice are ignored.
pub fn dot_iq3_s(w: &[BlockIQ3S], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut bsum = 0i32;
        for ib in 0..8 {
            let mut sumi = 0i32;
            for l in 0..4 {
                let grid = join4(
                    IQ3S_GRID[iq3s_index(x, ib, 2 * l)],
                    IQ3S_GRID[iq3s_index(x, ib, 2 * l + 1)],
                );
                let signs = x.signs[4 * ib + l];
                sumi += signed8(grid, signs, &y.qs[32 * ib + 8 * l..]);
            }
            bsum += sumi * iq3s_scale(x, ib);
        }
        acc += (f16_to_f32(x.d) * y.d) * bsum as f32;
    }
    acc
}

/// The `u16` word of IQ1_S sub-block `ib`: index high bits, scale, shift
/// sign.
#[inline(always)]
pub(crate) fn iq1s_qh(x: &BlockIQ1S, ib: usize) -> u16 {
    le16(&x.qh, 2 * ib)
}

/// The 11-bit grid index of group `l` of IQ1_S sub-block `ib`.
#[inline(always)]
pub(crate) fn iq1s_index(x: &BlockIQ1S, qh: u16, ib: usize, l: usize) -> usize {
    x.qs[4 * ib + l] as usize | (((qh as usize) >> (3 * l)) & 7) << 8
}

/// The exact shift term `sum(ls * ±1 * (bsums[2ib] + bsums[2ib + 1]))` of
/// one IQ1_S super-block.
#[inline(always)]
pub(crate) fn iq1s_sumi1(x: &BlockIQ1S, y: &BlockQ8K) -> i32 {
    let mut sumi1 = 0i32;
    for ib in 0..8 {
        let qh = iq1s_qh(x, ib);
        let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
        let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
        sumi1 += ls * delta * (y.bsums[2 * ib] as i32 + y.bsums[2 * ib + 1] as i32);
    }
    sumi1
}

/// Combines one IQ1_S super-block's exact sums into the running total:
/// `acc + (d_w * d_a) * (sumi + 0.125 * sumi1)`, ggml's order.
#[inline(always)]
pub(crate) fn iq1s_combine(acc: f32, dw: f32, da: f32, sumi: i32, sumi1: i32) -> f32 {
    acc + dw * da * (sumi as f32 + 0.125 * sumi1 as f32)
}

/// IQ1_S × Q8_K: per super-block `(d_w * d_a) * (sumi + 0.125 * sumi1)`
/// into one running total. Blocks past the shorter slice are ignored.
pub fn dot_iq1_s(w: &[BlockIQ1S], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for ib in 0..8 {
            let qh = iq1s_qh(x, ib);
            let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
            let mut lsum = 0i32;
            for l in 0..4 {
                let grid = IQ1S_GRID[iq1s_index(x, qh, ib, l)].to_le_bytes();
                let q = &y.qs[32 * ib + 8 * l..];
                for j in 0..8 {
                    lsum += grid[j] as i8 as i32 * q[j] as i32;
                }
            }
            sumi += ls * lsum;
        }
        acc = iq1s_combine(acc, f16_to_f32(x.d), y.d, sumi, iq1s_sumi1(x, y));
    }
    acc
}
