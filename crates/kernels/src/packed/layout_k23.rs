//! The interleaved layouts of IQ4_XS, Q3_K and Q2_K.
//!
//! # IQ4_XS
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
//!
//! # Q3_K and Q2_K
//!
//! Sixteen rows per group, one group-block per super-block, arranged per
//! 16-quant sub-block `s` (0..16) like Q6_K's: the kernel unpacks four
//! registers, register `m` holding quants `16s + 4m..16s + 4m + 4` of all
//! sixteen rows. The low two bits of a sub-block's quants fill one 64-byte
//! chunk L (row `r` at `4r`): bits `2m, 2m + 1` of byte `b` are those of
//! quant `16s + 4m + b`.
//!
//! - Q3_K, per pair of sub-blocks `2p, 2p + 1` (192 bytes at `192 p`):
//!   L of `2p`, L of `2p + 1`, then a chunk H of third bits, bit `4o + m`
//!   of byte `b` (row `r` at `4r`) for quant `16(2p + o) + 4m + b`. The
//!   quants are stored unsigned (`0..8`, the reference's `q + 4`); the
//!   kernels take the −4 through the activations' integer starts
//!   (`-4 * bsum` per sub-block), as for Q6_K's −32. After the pairs, at
//!   1,536: the scales `[s][row]` as `i8` (minus 32, as the reference
//!   multiplies them), then at 1,792 the sixteen `d` (f16). 1,824 bytes per
//!   group-block, 1,760 in the file.
//! - Q2_K: the sixteen L chunks (1,024 bytes), then the source's scale
//!   bytes `[s][row]` (scale in the low nibble, min in the high one), then
//!   the sixteen `d` and the sixteen `dmin` (f16): 1,344 bytes, the file's
//!   size.

use crate::blocks::{BlockIQ4XS, BlockQ2K, BlockQ3K, F16Bits, QK_K};
use crate::dot::scalar::{iq4xs_scale, q3k_scales};

use super::tile::GROUP;

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

/// Bytes of one Q3_K sub-block pair (two L chunks and their H).
pub const Q3K_PAIR_BYTES: usize = 3 * 64;
/// Offset of the Q3_K sub-block scales.
pub const Q3K_SC_AT: usize = 8 * Q3K_PAIR_BYTES;
/// Offset of the sixteen Q3_K `d`.
pub const Q3K_D_AT: usize = Q3K_SC_AT + 16 * GROUP;
/// Bytes of one Q3_K group-block.
pub const Q3K_GROUP_BLOCK: usize = Q3K_D_AT + 2 * GROUP;

/// Offset of the Q2_K scale bytes.
pub const Q2K_SC_AT: usize = 16 * 64;
/// Offset of the sixteen Q2_K `d` (the `dmin` follow, 32 bytes on).
pub const Q2K_D_AT: usize = Q2K_SC_AT + 16 * GROUP;
/// Bytes of one Q2_K group-block.
pub const Q2K_GROUP_BLOCK: usize = Q2K_D_AT + 4 * GROUP;

/// Where the low two bits of the Q3_K/Q2_K quants of element `e` (0..256)
/// lie in the source's `qs`: the byte and the shift.
#[inline(always)]
fn k23_low_at(e: usize) -> (usize, usize) {
    let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
    (32 * n + l, 2 * j)
}

/// Where the third bit of Q3_K element `e` lies in `hmask`: byte and bit.
#[inline(always)]
fn q3k_high_at(e: usize) -> (usize, usize) {
    let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
    (l, 4 * n + j)
}

/// The 256 unsigned quants (the reference's `q + 4`, 0..8) of a Q3_K
/// block, in element order.
fn q3k_quants(x: &BlockQ3K) -> [u8; QK_K] {
    std::array::from_fn(|e| {
        let (lb, ls) = k23_low_at(e);
        let (hb, hs) = q3k_high_at(e);
        ((x.qs[lb] >> ls) & 3) | (((x.hmask[hb] >> hs) & 1) << 2)
    })
}

/// Byte `b`'s position of sub-block `s`'s L chunk for row `r`, in a Q3_K
/// (`q3`) or Q2_K group-block; and for Q3_K, of its H byte.
#[inline(always)]
fn k23_chunk_at(q3: bool, s: usize, r: usize, b: usize) -> (usize, usize) {
    if q3 {
        let p = Q3K_PAIR_BYTES * (s / 2);
        (p + 64 * (s % 2) + 4 * r + b, p + 128 + 4 * r + b)
    } else {
        (64 * s + 4 * r + b, 0)
    }
}

/// Writes row `r` (0..16) of one Q3_K group-block from source block `x`.
pub(crate) fn q3k_put(x: &BlockQ3K, r: usize, gb: &mut [u8]) {
    let q = q3k_quants(x);
    let sc = q3k_scales(&x.scales);
    for s in 0..16 {
        for b in 0..4 {
            let (l_at, h_at) = k23_chunk_at(true, s, r, b);
            gb[l_at] = 0;
            if s.is_multiple_of(2) {
                gb[h_at] = 0;
            }
            for m in 0..4 {
                let u = q[16 * s + 4 * m + b];
                gb[l_at] |= (u & 3) << (2 * m);
                gb[h_at] |= (u >> 2) << (4 * (s % 2) + m);
            }
        }
        gb[Q3K_SC_AT + GROUP * s + r] = sc[s] as u8;
    }
    gb[Q3K_D_AT + 2 * r..Q3K_D_AT + 2 * r + 2].copy_from_slice(&x.d);
}

/// The stored (unsigned, `q + 4`) quant `e` (0..256) of row `r` in a Q3_K
/// group-block.
#[inline(always)]
pub(crate) fn q3k_quant(gb: &[u8], r: usize, e: usize) -> u8 {
    let (s, m, b) = (e / 16, (e % 16) / 4, e % 4);
    let (l_at, h_at) = k23_chunk_at(true, s, r, b);
    ((gb[l_at] >> (2 * m)) & 3) | (((gb[h_at] >> (4 * (s % 2) + m)) & 1) << 2)
}

/// Sub-block `s`'s scale (minus 32) of row `r` in a Q3_K group-block.
#[inline(always)]
pub(crate) fn q3k_scale(gb: &[u8], r: usize, s: usize) -> i32 {
    gb[Q3K_SC_AT + GROUP * s + r] as i8 as i32
}

/// The `d` of row `r` in a Q3_K group-block.
#[inline(always)]
pub(crate) fn q3k_d(gb: &[u8], r: usize) -> F16Bits {
    [gb[Q3K_D_AT + 2 * r], gb[Q3K_D_AT + 2 * r + 1]]
}

/// Sixteen 6-bit scales (biased by 32) packed as Q3_K's twelve bytes (the
/// inverse of [`q3k_scales`]).
fn q3k_scales_encode(sc: &[u8; 16]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (i, &v) in sc.iter().enumerate() {
        if i < 8 {
            out[i] |= v & 0x0F;
        } else {
            out[i - 8] |= (v & 0x0F) << 4;
        }
        out[8 + i % 4] |= ((v >> 4) & 3) << (2 * (i / 4));
    }
    out
}

/// Row `r` of one Q3_K group-block back as a source block.
pub(crate) fn q3k_get(gb: &[u8], r: usize, x: &mut BlockQ3K) {
    (x.qs, x.hmask) = ([0; 64], [0; 32]);
    for e in 0..QK_K {
        let u = q3k_quant(gb, r, e);
        let (lb, ls) = k23_low_at(e);
        let (hb, hs) = q3k_high_at(e);
        x.qs[lb] |= (u & 3) << ls;
        x.hmask[hb] |= (u >> 2) << hs;
    }
    let sc: [u8; 16] = std::array::from_fn(|s| (q3k_scale(gb, r, s) + 32) as u8);
    x.scales = q3k_scales_encode(&sc);
    x.d = q3k_d(gb, r);
}

/// Writes row `r` (0..16) of one Q2_K group-block from source block `x`.
pub(crate) fn q2k_put(x: &BlockQ2K, r: usize, gb: &mut [u8]) {
    for s in 0..16 {
        for b in 0..4 {
            let (l_at, _) = k23_chunk_at(false, s, r, b);
            gb[l_at] = 0;
            for m in 0..4 {
                let (lb, ls) = k23_low_at(16 * s + 4 * m + b);
                gb[l_at] |= ((x.qs[lb] >> ls) & 3) << (2 * m);
            }
        }
        gb[Q2K_SC_AT + GROUP * s + r] = x.scales[s];
    }
    gb[Q2K_D_AT + 2 * r..Q2K_D_AT + 2 * r + 2].copy_from_slice(&x.d);
    let at = Q2K_D_AT + 2 * GROUP + 2 * r;
    gb[at..at + 2].copy_from_slice(&x.dmin);
}

/// The stored quant `e` (0..256, value 0..4) of row `r` in a Q2_K
/// group-block.
#[inline(always)]
pub(crate) fn q2k_quant(gb: &[u8], r: usize, e: usize) -> u8 {
    let (s, m, b) = (e / 16, (e % 16) / 4, e % 4);
    (gb[k23_chunk_at(false, s, r, b).0] >> (2 * m)) & 3
}

/// Sub-block `s`'s scale and min (4 bits each) of row `r` in a Q2_K
/// group-block.
#[inline(always)]
pub(crate) fn q2k_scale_min(gb: &[u8], r: usize, s: usize) -> (i32, i32) {
    let v = gb[Q2K_SC_AT + GROUP * s + r];
    ((v & 0x0F) as i32, (v >> 4) as i32)
}

/// The `d` and `dmin` of row `r` in a Q2_K group-block.
#[inline(always)]
pub(crate) fn q2k_d(gb: &[u8], r: usize) -> (F16Bits, F16Bits) {
    let at = Q2K_D_AT + 2 * r;
    (
        [gb[at], gb[at + 1]],
        [gb[at + 2 * GROUP], gb[at + 2 * GROUP + 1]],
    )
}

/// Row `r` of one Q2_K group-block back as a source block.
pub(crate) fn q2k_get(gb: &[u8], r: usize, x: &mut BlockQ2K) {
    x.qs = [0; 64];
    for e in 0..QK_K {
        let (lb, ls) = k23_low_at(e);
        x.qs[lb] |= q2k_quant(gb, r, e) << ls;
    }
    for s in 0..16 {
        x.scales[s] = gb[Q2K_SC_AT + GROUP * s + r];
    }
    (x.d, x.dmin) = q2k_d(gb, r);
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

    fn filled<T: bytemuck::Pod + bytemuck::Zeroable>() -> T {
        let mut x: T = bytemuck::Zeroable::zeroed();
        for (i, b) in bytemuck::bytes_of_mut(&mut x).iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        x
    }

    #[test]
    fn q3k_round_trip() {
        let x: BlockQ3K = filled();
        let mut gb = vec![0xA5u8; Q3K_GROUP_BLOCK];
        q3k_put(&x, 9, &mut gb);
        let mut y: BlockQ3K = bytemuck::Zeroable::zeroed();
        q3k_get(&gb, 9, &mut y);
        assert_eq!(bytemuck::bytes_of(&x), bytemuck::bytes_of(&y));
        let q = q3k_quants(&x);
        for (e, &q) in q.iter().enumerate() {
            assert_eq!(q3k_quant(&gb, 9, e), q, "quant {e}");
        }
        let mut sc = [0u8; 12];
        for (i, b) in sc.iter_mut().enumerate() {
            *b = (i * 97 + 13) as u8;
        }
        let unpacked: [u8; 16] = std::array::from_fn(|i| (q3k_scales(&sc)[i] + 32) as u8);
        assert_eq!(q3k_scales_encode(&unpacked), sc);
    }

    #[test]
    fn q2k_round_trip() {
        let x: BlockQ2K = filled();
        let mut gb = vec![0xA5u8; Q2K_GROUP_BLOCK];
        q2k_put(&x, 3, &mut gb);
        let mut y: BlockQ2K = bytemuck::Zeroable::zeroed();
        q2k_get(&gb, 3, &mut y);
        assert_eq!(bytemuck::bytes_of(&x), bytemuck::bytes_of(&y));
    }
}
