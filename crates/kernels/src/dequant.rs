//! Dequantization of the supported ggml types to f32.
//!
//! Every routine reproduces llama.cpp's `dequantize_row_*` (ggml-quants.c)
//! operation for operation: the same products, in the same order, with no
//! fused multiply-add. That makes the output bit-identical to llama.cpp's
//! scalar code and to gguf-py's numpy implementation (which does the same
//! float32 arithmetic), and a test holds it to that.
//!
//! [`dequantize_row`] is the checked entry point for raw tensor bytes. The
//! per-type functions take already-typed blocks and are what hot paths call
//! once the lengths are known to be right; they process the whole blocks that
//! fit in both slices and never panic. The grid types (IQ2_XXS … IQ1_S) live
//! in [`iq`](self::iq) and are re-exported here.

mod iq;
pub use iq::{
    dequantize_iq1_s, dequantize_iq2_s, dequantize_iq2_xs, dequantize_iq2_xxs, dequantize_iq3_s,
    dequantize_iq3_xxs,
};

use minfer_gguf::GgmlType;

use crate::blocks::{
    codebook_values, e8m0_to_f32_half, f16_to_f32, k_scale_min, BlockIQ4NL, BlockIQ4XS, BlockMXFP4,
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, KVALUES_IQ4NL, KVALUES_MXFP4, QK, QK_K,
};
use crate::error::KernelError;

/// Whether [`dequantize_row`] handles `ty`.
pub fn is_supported(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | Q8_K
            | IQ4_NL
            | MXFP4
            | IQ4_XS
            | IQ2_XXS
            | IQ2_XS
            | IQ2_S
            | IQ3_XXS
            | IQ3_S
            | IQ1_S
    )
}

/// Dequantizes one row (or any whole number of blocks) of type `ty`.
///
/// `dst.len()` is the number of elements; `src` must hold exactly the bytes
/// of that many elements of `ty`.
///
/// # Errors
/// [`KernelError::UnsupportedType`] for a type this module does not decode,
/// [`KernelError::NotBlockAligned`] when `dst.len()` is not a multiple of the
/// block size, [`KernelError::BadLength`] when `src` has the wrong size.
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), KernelError> {
    if !is_supported(ty) {
        return Err(KernelError::UnsupportedType {
            ty,
            op: "dequantize",
        });
    }
    let n = dst.len();
    let block = ty.block_size() as usize;
    if !n.is_multiple_of(block) {
        return Err(KernelError::NotBlockAligned { ty, n, block });
    }
    let expected = n / block * ty.type_size() as usize;
    if src.len() != expected {
        return Err(KernelError::BadLength {
            what: "dequantize source bytes",
            expected,
            got: src.len(),
        });
    }

    // The block views below cannot fail for the byte-array block types: the
    // length was checked above and their alignment is 1.
    let bad = || KernelError::BadLength {
        what: "dequantize source bytes",
        expected,
        got: src.len(),
    };
    use crate::blocks::as_blocks;
    match ty {
        GgmlType::F32 => dequantize_f32(src, dst),
        GgmlType::F16 => dequantize_f16(src, dst),
        GgmlType::BF16 => dequantize_bf16(src, dst),
        GgmlType::Q4_0 => dequantize_q4_0(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q4_1 => dequantize_q4_1(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q5_0 => dequantize_q5_0(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q5_1 => dequantize_q5_1(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q8_0 => dequantize_q8_0(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q2_K => dequantize_q2_k(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q3_K => dequantize_q3_k(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q4_K => dequantize_q4_k(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q5_K => dequantize_q5_k(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q6_K => dequantize_q6_k(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ4_NL => dequantize_iq4_nl(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::MXFP4 => dequantize_mxfp4(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ4_XS => dequantize_iq4_xs(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ2_XXS => dequantize_iq2_xxs(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ2_XS => dequantize_iq2_xs(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ2_S => dequantize_iq2_s(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ3_XXS => dequantize_iq3_xxs(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ3_S => dequantize_iq3_s(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::IQ1_S => dequantize_iq1_s(as_blocks(src).ok_or_else(bad)?, dst),
        GgmlType::Q8_K => match as_blocks::<BlockQ8K>(src) {
            Some(blocks) => dequantize_q8_k(blocks, dst),
            // `BlockQ8K` has an f32 field, so a byte slice at an odd address
            // cannot be viewed in place; copy each block out instead.
            None => {
                for (chunk, y) in src
                    .chunks_exact(std::mem::size_of::<BlockQ8K>())
                    .zip(dst.chunks_exact_mut(QK_K))
                {
                    let b: BlockQ8K = bytemuck::pod_read_unaligned(chunk);
                    dequantize_q8_k(std::slice::from_ref(&b), y);
                }
            }
        },
        // Kept in step with `is_supported`; an error rather than a panic if
        // the two ever drift apart.
        _ => {
            return Err(KernelError::UnsupportedType {
                ty,
                op: "dequantize",
            })
        }
    }
    Ok(())
}

/// Copies little-endian f32 bytes into `dst` (as many as fit in both).
pub fn dequantize_f32(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// Widens little-endian f16 bytes into `dst` (exact).
pub fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *y = f16_to_f32([b[0], b[1]]);
    }
}

/// Widens little-endian bf16 bytes into `dst` (exact: bf16 is the top half
/// of an f32).
pub fn dequantize_bf16(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *y = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

/// Q4_0: `y = (q - 8) * d`. Writes `32 * blocks.len()` values, or fewer
/// whole blocks if `dst` is shorter.
pub fn dequantize_q4_0(blocks: &[BlockQ4_0], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        let (lo, hi) = y.split_at_mut(QK / 2);
        for j in 0..QK / 2 {
            lo[j] = ((b.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            hi[j] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// Q4_1: `y = q * d + m`. Same length rule as [`dequantize_q4_0`].
pub fn dequantize_q4_1(blocks: &[BlockQ4_1], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        let m = f16_to_f32(b.m);
        let (lo, hi) = y.split_at_mut(QK / 2);
        for j in 0..QK / 2 {
            lo[j] = (b.qs[j] & 0x0F) as f32 * d + m;
            hi[j] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// The fifth bits of elements `j` and `j + 16` of a Q5 block, already
/// shifted into bit 4.
#[inline(always)]
fn q5_high_bits(qh: u32, j: usize) -> (u8, u8) {
    (
        (((qh >> j) << 4) & 0x10) as u8,
        ((qh >> (j + 12)) & 0x10) as u8,
    )
}

/// Q5_0: `y = (q - 16) * d`. Same length rule as [`dequantize_q4_0`].
pub fn dequantize_q5_0(blocks: &[BlockQ5_0], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        let qh = u32::from_le_bytes(b.qh);
        let (lo, hi) = y.split_at_mut(QK / 2);
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(qh, j);
            lo[j] = (((b.qs[j] & 0x0F) | h0) as i32 - 16) as f32 * d;
            hi[j] = (((b.qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
        }
    }
}

/// Q5_1: `y = q * d + m`. Same length rule as [`dequantize_q4_0`].
pub fn dequantize_q5_1(blocks: &[BlockQ5_1], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        let m = f16_to_f32(b.m);
        let qh = u32::from_le_bytes(b.qh);
        let (lo, hi) = y.split_at_mut(QK / 2);
        for j in 0..QK / 2 {
            let (h0, h1) = q5_high_bits(qh, j);
            lo[j] = ((b.qs[j] & 0x0F) | h0) as f32 * d + m;
            hi[j] = ((b.qs[j] >> 4) | h1) as f32 * d + m;
        }
    }
}

/// Q8_0: `y = q * d`. Same length rule as [`dequantize_q4_0`].
pub fn dequantize_q8_0(blocks: &[BlockQ8_0], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        for (y, &q) in y.iter_mut().zip(b.qs.iter()) {
            *y = q as f32 * d;
        }
    }
}

/// Q2_K: per 16 elements `y = (d * sc) * q - (dmin * m)`. Writes
/// `256 * blocks.len()` values, or fewer whole blocks if `dst` is shorter.
pub fn dequantize_q2_k(blocks: &[BlockQ2K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        // Two halves of 128 elements, each reading 32 bytes of 2-bit quants
        // four times with an increasing shift; every 16 outputs take the
        // next 4-bit scale/min pair.
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for shift_i in 0..4 {
                let shift = 2 * shift_i;
                for part in 0..2 {
                    let is = 8 * half + 2 * shift_i + part;
                    let sc = b.scales[is];
                    let dl = d * (sc & 0x0F) as f32;
                    let ml = min * (sc >> 4) as f32;
                    let out = 128 * half + 32 * shift_i + 16 * part;
                    let q = &q[16 * part..16 * part + 16];
                    for l in 0..16 {
                        y[out + l] = dl * ((q[l] >> shift) & 3) as f32 - ml;
                    }
                }
            }
        }
    }
}

/// Unpacks the sixteen 6-bit Q3_K scales (still biased by 32).
#[inline(always)]
fn q3_k_scales(s: &[u8; 12]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { s[j] & 0x0F } else { s[j - 8] >> 4 };
        let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = low | (high << 4);
    }
    out
}

/// Q3_K: per 16 elements `y = (d * (sc - 32)) * (q - (hbit ? 0 : 4))`. Same
/// length rule as [`dequantize_q2_k`].
pub fn dequantize_q3_k(blocks: &[BlockQ3K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d_all = f16_to_f32(b.d);
        let scales = q3_k_scales(&b.scales);
        for half in 0..2 {
            let q = &b.qs[32 * half..32 * half + 32];
            for shift_i in 0..4 {
                let shift = 2 * shift_i;
                // The high-bit mask walks one bit per 32 outputs.
                let m = 1u8 << (4 * half + shift_i);
                for part in 0..2 {
                    let is = 8 * half + 2 * shift_i + part;
                    let dl = d_all * (scales[is] as i32 - 32) as f32;
                    let out = 128 * half + 32 * shift_i + 16 * part;
                    for l in 0..16 {
                        let k = 16 * part + l;
                        let low = ((q[k] >> shift) & 3) as i32;
                        let sub = if b.hmask[k] & m != 0 { 0 } else { 4 };
                        y[out + l] = dl * (low - sub) as f32;
                    }
                }
            }
        }
    }
}

/// Q4_K: per 32 elements `y = (d * sc) * q - (dmin * m)`. Same length rule
/// as [`dequantize_q2_k`].
pub fn dequantize_q4_k(blocks: &[BlockQ4K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        for c in 0..4 {
            let q = &b.qs[32 * c..32 * c + 32];
            let (sc1, m1) = k_scale_min(2 * c, &b.scales);
            let (sc2, m2) = k_scale_min(2 * c + 1, &b.scales);
            let d1 = d * sc1 as f32;
            let m1 = min * m1 as f32;
            let d2 = d * sc2 as f32;
            let m2 = min * m2 as f32;
            let y = &mut y[64 * c..64 * c + 64];
            let (lo, hi) = y.split_at_mut(32);
            for l in 0..32 {
                lo[l] = d1 * (q[l] & 0x0F) as f32 - m1;
                hi[l] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// Q5_K: as Q4_K with a fifth bit from `qh`. Same length rule as
/// [`dequantize_q2_k`].
pub fn dequantize_q5_k(blocks: &[BlockQ5K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let min = f16_to_f32(b.dmin);
        for c in 0..4 {
            let ql = &b.qs[32 * c..32 * c + 32];
            let u1 = 1u8 << (2 * c);
            let u2 = 2u8 << (2 * c);
            let (sc1, m1) = k_scale_min(2 * c, &b.scales);
            let (sc2, m2) = k_scale_min(2 * c + 1, &b.scales);
            let d1 = d * sc1 as f32;
            let m1 = min * m1 as f32;
            let d2 = d * sc2 as f32;
            let m2 = min * m2 as f32;
            let y = &mut y[64 * c..64 * c + 64];
            let (lo, hi) = y.split_at_mut(32);
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                lo[l] = d1 * ((ql[l] & 0x0F) + h1) as f32 - m1;
                hi[l] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// Q6_K: per 16 elements `y = (d * sc) * (q - 32)`. Same length rule as
/// [`dequantize_q2_k`].
pub fn dequantize_q6_k(blocks: &[BlockQ6K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        for half in 0..2 {
            let ql = &b.ql[64 * half..64 * half + 64];
            let qh = &b.qh[32 * half..32 * half + 32];
            let sc = &b.scales[8 * half..8 * half + 8];
            let y = &mut y[128 * half..128 * half + 128];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                // Left to right as in C: (d * scale) first, then the quant.
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

/// Q8_K: `y = d * q`. Same length rule as [`dequantize_q2_k`].
pub fn dequantize_q8_k(blocks: &[BlockQ8K], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        for (y, &q) in y.iter_mut().zip(b.qs.iter()) {
            *y = b.d * q as f32;
        }
    }
}

/// IQ4_NL: `y = d * codebook[q]`. Same length rule as [`dequantize_q4_0`].
pub fn dequantize_iq4_nl(blocks: &[BlockIQ4NL], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = f16_to_f32(b.d);
        for (y, q) in y.iter_mut().zip(codebook_values(&b.qs, &KVALUES_IQ4NL)) {
            *y = d * q as f32;
        }
    }
}

/// MXFP4: `y = x * kvalues[q]` with `x` the halved E8M0 scale (ggml's
/// `dequantize_row_mxfp4`). Same length rule as [`dequantize_q4_0`].
pub fn dequantize_mxfp4(blocks: &[BlockMXFP4], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = e8m0_to_f32_half(b.e);
        for (y, q) in y.iter_mut().zip(codebook_values(&b.qs, &KVALUES_MXFP4)) {
            *y = d * q as f32;
        }
    }
}

/// IQ4_XS: per 32 elements `y = (d * (ls - 32)) * codebook[q]`. Same length
/// rule as [`dequantize_q2_k`].
pub fn dequantize_iq4_xs(blocks: &[BlockIQ4XS], dst: &mut [f32]) {
    for (b, y) in blocks.iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(b.d);
        let scales_h = u16::from_le_bytes(b.scales_h);
        for ib in 0..QK_K / 32 {
            let low = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let high = ((scales_h >> (2 * ib)) & 3) as u8;
            let ls = (low | (high << 4)) as i32;
            let dl = d * (ls - 32) as f32;
            let qs = &b.qs[16 * ib..16 * ib + 16];
            let y = &mut y[32 * ib..32 * ib + 32];
            let (lo, hi) = y.split_at_mut(16);
            for j in 0..16 {
                lo[j] = dl * KVALUES_IQ4NL[(qs[j] & 0x0F) as usize] as f32;
                hi[j] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::f32_to_f16;

    #[test]
    fn rejects_unsupported_types() {
        let mut dst = [0.0f32; 256];
        for ty in [
            GgmlType::Q8_1,
            GgmlType::IQ1_M,
            GgmlType::I32,
            GgmlType::TQ2_0,
        ] {
            let bytes = vec![0u8; ty.bytes_for(256).unwrap() as usize];
            assert_eq!(
                dequantize_row(ty, &bytes, &mut dst),
                Err(KernelError::UnsupportedType {
                    ty,
                    op: "dequantize"
                })
            );
        }
    }

    #[test]
    fn rejects_bad_lengths_without_panicking() {
        let mut dst = vec![0.0f32; 256];
        // Not a whole number of blocks.
        assert_eq!(
            dequantize_row(GgmlType::Q4_K, &[0u8; 144], &mut dst[..100]),
            Err(KernelError::NotBlockAligned {
                ty: GgmlType::Q4_K,
                n: 100,
                block: 256
            })
        );
        // Too few and too many source bytes, for every supported type.
        for &ty in GgmlType::ALL.iter().filter(|&&t| is_supported(t)) {
            let need = ty.bytes_for(256).unwrap() as usize;
            for got in [0, need - 1, need + 1] {
                let src = vec![0u8; got];
                assert_eq!(
                    dequantize_row(ty, &src, &mut dst),
                    Err(KernelError::BadLength {
                        what: "dequantize source bytes",
                        expected: need,
                        got
                    }),
                    "{ty} with {got} bytes"
                );
            }
            // An empty row is fine.
            assert_eq!(dequantize_row(ty, &[], &mut []), Ok(()));
        }
    }

    #[test]
    fn typed_functions_tolerate_mismatched_slices() {
        let blocks = [BlockQ8_0 {
            d: f32_to_f16(0.5),
            qs: [2; QK],
        }; 2];
        // Shorter destination: only the whole block that fits is written.
        let mut dst = [0.0f32; 40];
        dequantize_q8_0(&blocks, &mut dst);
        assert!(dst[..32].iter().all(|&v| v == 1.0));
        assert!(dst[32..].iter().all(|&v| v == 0.0));
        // Longer destination: the tail is untouched.
        let mut dst = [7.0f32; 96];
        dequantize_q8_0(&blocks, &mut dst);
        assert!(dst[64..].iter().all(|&v| v == 7.0));
    }

    #[test]
    fn q8_k_reads_misaligned_bytes() {
        let mut blk = BlockQ8K {
            d: 0.25,
            qs: [0; QK_K],
            bsums: [0; QK_K / 16],
        };
        for (i, q) in blk.qs.iter_mut().enumerate() {
            *q = (i as i32 - 128) as i8;
        }
        let mut bytes = vec![0u8; 293];
        bytes[1..].copy_from_slice(bytemuck::bytes_of(&blk));
        let mut a = [0.0f32; QK_K];
        let mut b = [0.0f32; QK_K];
        // One of the two offsets is misaligned for an f32 field.
        dequantize_row(GgmlType::Q8_K, &bytes[1..], &mut a).unwrap();
        dequantize_q8_k(std::slice::from_ref(&blk), &mut b);
        assert_eq!(a, b);
        assert_eq!(a[0], -32.0);
    }

    #[test]
    fn known_values() {
        let mut dst = [0.0f32; 32];
        let mut blk = BlockQ4_1 {
            d: f32_to_f16(0.5),
            m: f32_to_f16(-1.0),
            qs: [0; QK / 2],
        };
        blk.qs[0] = 0xF3;
        dequantize_q4_1(&[blk], &mut dst);
        assert_eq!(dst[0], 0.5);
        assert_eq!(dst[16], 6.5);
        assert_eq!(dst[1], -1.0);

        let bf = [0x80u8, 0x3F, 0x00, 0xC0]; // 1.0, -2.0
        let mut out = [0.0f32; 2];
        dequantize_row(GgmlType::BF16, &bf, &mut out).unwrap();
        assert_eq!(out, [1.0, -2.0]);
    }
}
