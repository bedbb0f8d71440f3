//! Dequantization of the grid types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S and IQ1_S.
//!
//! Each routine follows ggml's `dequantize_row_iq*` (ggml-quants.c)
//! operation for operation: the sub-block factor first (`d * (0.5 + ls) *
//! 0.25` and its siblings), then `factor * grid value * ±1`, left to right,
//! with no fused multiply-add. gguf-py's numpy code does the same float32
//! steps, and `tests/dequant_reference.rs` holds the output to it bit for
//! bit. Like the other typed functions, these write the whole blocks that
//! fit in both slices and never panic.

use crate::blocks::{
    f16_to_f32, le16, le32, BlockIQ1S, BlockIQ2S, BlockIQ2XS, BlockIQ2XXS, BlockIQ3S, BlockIQ3XXS,
    QK_K,
};
use crate::iq_grids::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KMASK_IQ2XS,
    KSIGNS_IQ2XS,
};

/// `1.0`, or `-1.0` where bit `j` of `signs` is set.
#[inline(always)]
fn sign(signs: u8, j: usize) -> f32 {
    if signs & KMASK_IQ2XS[j] != 0 {
        -1.0
    } else {
        1.0
    }
}

/// Writes one group of 8 weights: `db * grid value * ±1`.
#[inline(always)]
fn group8(y: &mut [f32], db: f32, grid: u64, signs: u8) {
    for (j, (y, g)) in y.iter_mut().zip(grid.to_le_bytes()).enumerate() {
        *y = db * g as f32 * sign(signs, j);
    }
}

/// Writes one group of 8 weights from two 4-value grid entries (IQ3).
#[inline(always)]
fn group4x2(y: &mut [f32], db: f32, grid1: u32, grid2: u32, signs: u8) {
    let g1 = grid1.to_le_bytes();
    let g2 = grid2.to_le_bytes();
    for j in 0..4 {
        y[j] = db * g1[j] as f32 * sign(signs, j);
        y[j + 4] = db * g2[j] as f32 * sign(signs, j + 4);
    }
}

/// IQ2_XXS: per sub-block `db = d * (0.5 + ls) * 0.25`, then
/// `db * grid * ±1`. Same length rule as the K-quants'.
pub fn dequantize_iq2_xxs(blocks: &[BlockIQ2XXS], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let idx = &b.qs[8 * ib..8 * ib + 4];
            let aux = le32(&b.qs, 8 * ib + 4);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                group8(y, db, IQ2XXS_GRID[idx[l] as usize], signs);
            }
        }
    }
}

/// Writes one super-block of a type with two 4-bit scales per sub-block
/// (IQ2_XS, IQ2_S): per 16 weights `db = d * (0.5 + nibble) * 0.25`, then
/// `db * grid * ±1`. `group(ib, l)` gives group `l` of sub-block `ib`: its
/// grid entry and its sign byte.
#[inline(always)]
fn two_scale_block(
    d: f32,
    scales: &[u8; 8],
    y: &mut [f32],
    group: impl Fn(usize, usize) -> (u64, u8),
) {
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let sc = scales[ib];
        let db = [
            d * (0.5 + (sc & 0x0F) as f32) * 0.25,
            d * (0.5 + (sc >> 4) as f32) * 0.25,
        ];
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let (grid, signs) = group(ib, l);
            group8(y, db[l / 2], grid, signs);
        }
    }
}

/// IQ2_XS: two scales per sub-block, one per 16 weights, each
/// `d * (0.5 + ls) * 0.25`. Same length rule as the K-quants'.
pub fn dequantize_iq2_xs(blocks: &[BlockIQ2XS], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        two_scale_block(f16_to_f32(b.d), &b.scales, y, |ib, l| {
            let q = le16(&b.qs, 2 * (4 * ib + l));
            (
                IQ2XS_GRID[(q & 511) as usize],
                KSIGNS_IQ2XS[(q >> 9) as usize],
            )
        });
    }
}

/// IQ2_S: as IQ2_XS with 10-bit indices and explicit sign bytes. Same
/// length rule as the K-quants'.
pub fn dequantize_iq2_s(blocks: &[BlockIQ2S], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        two_scale_block(f16_to_f32(b.d), &b.scales, y, |ib, l| {
            let g = 4 * ib + l;
            let high = ((b.qh[ib] as usize) >> (2 * l)) & 3;
            (IQ2S_GRID[b.qs[g] as usize | (high << 8)], b.qs[32 + g])
        });
    }
}

/// IQ3_XXS: per sub-block `db = d * (0.5 + ls) * 0.5`, groups of 8 from two
/// 4-value grid entries. Same length rule as the K-quants'.
pub fn dequantize_iq3_xxs(blocks: &[BlockIQ3XXS], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let aux = le32(&b.qs, 64 + 4 * ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            let q = &b.qs[8 * ib..8 * ib + 8];
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let (g1, g2) = (
                    IQ3XXS_GRID[q[2 * l] as usize],
                    IQ3XXS_GRID[q[2 * l + 1] as usize],
                );
                group4x2(y, db, g1, g2, signs);
            }
        }
    }
}

/// IQ3_S: per sub-block `db = d * (1 + 2 * ls)`, 9-bit indices, explicit
/// sign bits. Same length rule as the K-quants'.
pub fn dequantize_iq3_s(blocks: &[BlockIQ3S], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let ls = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let db = d * (1 + 2 * ls as i32) as f32;
            let idx = |k: usize| {
                let high = ((b.qh[ib] as usize) >> k) & 1;
                b.qs[8 * ib + k] as usize | (high << 8)
            };
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let (g1, g2) = (IQ3S_GRID[idx(2 * l)], IQ3S_GRID[idx(2 * l + 1)]);
                group4x2(y, db, g1, g2, b.signs[4 * ib + l]);
            }
        }
    }
}

/// IQ1_S: per sub-block `dl = d * (2 * ls + 1)` and a shift `±1/8`, then
/// `dl * (grid + shift)`. Same length rule as the K-quants'.
pub fn dequantize_iq1_s(blocks: &[BlockIQ1S], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let qh = le16(&b.qh, 2 * ib);
            let dl = d * (2 * ((qh >> 12) & 7) as i32 + 1) as f32;
            let delta = if qh & 0x8000 != 0 { -0.125f32 } else { 0.125 };
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let high = ((qh as usize) >> (3 * l)) & 7;
                let grid = IQ1S_GRID[b.qs[4 * ib + l] as usize | (high << 8)];
                for (y, g) in y.iter_mut().zip(grid.to_le_bytes()) {
                    *y = dl * (g as i8 as f32 + delta);
                }
            }
        }
    }
}
