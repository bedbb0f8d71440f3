//! The interleaved layout of IQ4_XS.
//!
//! Sixteen rows per group, one group-block per 256-quant super-block,
//! arranged per 32-quant sub-block `j` (0..8) like Q4_K's (see
//! [`super::layout_k`]): four 64-byte chunks of nibbles, chunk `c` holding
//! bytes `4c..4c + 4` of the sub-block's sixteen `qs` bytes (row `r` at
//! `4r`), so the low nibbles are the codebook indices of quants
//! `32j + 4c..32j + 4c + 4` and the high ones those of
//! `32j + 16 + 4c..32j + 16 + 4c + 4`. After the eight sub-blocks: the
//! sub-block scales `[j][row]` as `i8` (the 6-bit value minus 32, as the
//! reference multiplies it), then the sixteen `d` (f16).
//!
//! 2,208 bytes per group-block, 2,176 in the file: the unpacked scales
//! cost 2 bytes per row and super-block.

use crate::blocks::{BlockIQ4XS, F16Bits};
use crate::dot::scalar::iq4xs_scale;

use super::layout::GROUP;

/// Bytes of one IQ4_XS sub-block's nibble chunks.
pub const IQ4XS_SUB_BYTES: usize = 4 * 64;
/// Offset of the sub-block scales.
pub const IQ4XS_SC_AT: usize = 8 * IQ4XS_SUB_BYTES;
/// Offset of the sixteen `d`.
pub const IQ4XS_D_AT: usize = IQ4XS_SC_AT + 8 * GROUP;
/// Bytes of one IQ4_XS group-block.
pub const IQ4XS_GROUP_BLOCK: usize = IQ4XS_D_AT + 2 * GROUP;

/// Writes row `r` (0..16) of one IQ4_XS group-block from source block `x`.
pub(crate) fn iq4xs_put(x: &BlockIQ4XS, r: usize, gb: &mut [u8]) {
    for j in 0..8 {
        for c in 0..4 {
            let at = IQ4XS_SUB_BYTES * j + 64 * c + 4 * r;
            gb[at..at + 4].copy_from_slice(&x.qs[16 * j + 4 * c..16 * j + 4 * c + 4]);
        }
        gb[IQ4XS_SC_AT + GROUP * j + r] = iq4xs_scale(x, j) as i8 as u8;
    }
    gb[IQ4XS_D_AT + 2 * r..IQ4XS_D_AT + 2 * r + 2].copy_from_slice(&x.d);
}

/// The codebook index of quant `e` (0..256) of row `r` in a group-block.
#[inline(always)]
pub(crate) fn iq4xs_index(gb: &[u8], r: usize, e: usize) -> usize {
    let (j, m, b) = (e / 32, (e % 32) / 4, e % 4);
    let byte = gb[IQ4XS_SUB_BYTES * j + 64 * (m % 4) + 4 * r + b];
    (if m < 4 { byte & 0x0F } else { byte >> 4 }) as usize
}

/// Sub-block `j`'s scale (minus 32) of row `r`.
#[inline(always)]
pub(crate) fn iq4xs_scale_at(gb: &[u8], r: usize, j: usize) -> i32 {
    gb[IQ4XS_SC_AT + GROUP * j + r] as i8 as i32
}

/// The `d` of row `r`.
#[inline(always)]
pub(crate) fn iq4xs_d(gb: &[u8], r: usize) -> F16Bits {
    [gb[IQ4XS_D_AT + 2 * r], gb[IQ4XS_D_AT + 2 * r + 1]]
}

/// Row `r` of one group-block back as a source block.
pub(crate) fn iq4xs_get(gb: &[u8], r: usize, x: &mut BlockIQ4XS) {
    let mut h = 0u16;
    x.scales_l = [0; 4];
    for j in 0..8 {
        for c in 0..4 {
            let at = IQ4XS_SUB_BYTES * j + 64 * c + 4 * r;
            x.qs[16 * j + 4 * c..16 * j + 4 * c + 4].copy_from_slice(&gb[at..at + 4]);
        }
        // The stored `scale - 32` back to the 6-bit field.
        let sc = (iq4xs_scale_at(gb, r, j) + 32) as u16;
        x.scales_l[j / 2] |= ((sc & 0x0F) as u8) << (4 * (j % 2));
        h |= (sc >> 4) << (2 * j);
    }
    x.scales_h = h.to_le_bytes();
    x.d = iq4xs_d(gb, r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq4xs_round_trip() {
        let mut x: BlockIQ4XS = bytemuck::Zeroable::zeroed();
        for (i, b) in bytemuck::bytes_of_mut(&mut x).iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let mut gb = vec![0u8; IQ4XS_GROUP_BLOCK];
        iq4xs_put(&x, 7, &mut gb);
        let mut y: BlockIQ4XS = bytemuck::Zeroable::zeroed();
        iq4xs_get(&gb, 7, &mut y);
        assert_eq!(bytemuck::bytes_of(&x), bytemuck::bytes_of(&y));
        for e in 0..256 {
            let byte = x.qs[16 * (e / 32) + e % 16];
            let want = if e % 32 < 16 { byte & 0x0F } else { byte >> 4 };
            assert_eq!(iq4xs_index(&gb, 7, e), want as usize, "quant {e}");
        }
    }
}
