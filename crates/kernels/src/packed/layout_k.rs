//! The interleaved layout of Q6_K: sixteen rows per group, one group-block
//! per 256-quant super-block, arranged per 16-quant sub-block so that the
//! kernel unpacks four registers (quants `4m..4m + 4` of the sub-block, all
//! sixteen rows) from three 64-byte loads.
//!
//! Group-block of 3,360 bytes (sixteen 210-byte source blocks):
//!
//! - per sub-block `s` (0..16), at `192 s`: chunk A, chunk B, chunk H, 64
//!   bytes each, row `r` at `4r` in each. Byte `j` of a row: in A, the low
//!   four bits of quant `16s + j` (low nibble) and of quant `16s + 8 + j`
//!   (high nibble); in B, those of quants `16s + 4 + j` and `16s + 12 + j`;
//!   in H, the top two bits of quant `16s + 4m + j` at bits `2m, 2m + 1`.
//! - at 3,072: the sub-block scales, `[s][row]`, as `i8`.
//! - at 3,328: the sixteen `d` (f16).
//!
//! Quants are stored unsigned (0..63), as ggml stores them; the kernels
//! take the −32 offset through the activations' block sums.

use crate::blocks::{BlockQ6K, F16Bits, QK_K};

use super::layout::GROUP;

/// Bytes of one Q6_K group-block.
pub const Q6K_GROUP_BLOCK: usize = 16 * 210;
/// Offset of the sub-block scales.
pub const Q6K_SC_AT: usize = 16 * 192;
/// Offset of the sixteen `d`.
pub const Q6K_D_AT: usize = Q6K_SC_AT + 16 * GROUP;

/// The 256 unsigned quants of a Q6_K block, in element order.
pub(crate) fn q6k_quants(x: &BlockQ6K) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for n in 0..2 {
        let (ql, qh) = (&x.ql[64 * n..], &x.qh[32 * n..]);
        for l in 0..32 {
            let e = 128 * n + l;
            q[e] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            q[e + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            q[e + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[e + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    q
}

/// The inverse of [`q6k_quants`].
fn q6k_store(q: &[u8; QK_K], x: &mut BlockQ6K) {
    for n in 0..2 {
        for l in 0..32 {
            let e = 128 * n + l;
            x.ql[64 * n + l] = (q[e] & 0x0F) | ((q[e + 64] & 0x0F) << 4);
            x.ql[64 * n + l + 32] = (q[e + 32] & 0x0F) | ((q[e + 96] & 0x0F) << 4);
            x.qh[32 * n + l] = (q[e] >> 4)
                | ((q[e + 32] >> 4) << 2)
                | ((q[e + 64] >> 4) << 4)
                | ((q[e + 96] >> 4) << 6);
        }
    }
}

/// Writes row `r` (0..16) of one group-block from source block `x`.
pub(crate) fn q6k_put(x: &BlockQ6K, r: usize, gb: &mut [u8]) {
    let q = q6k_quants(x);
    for s in 0..16 {
        let base = 192 * s + 4 * r;
        for j in 0..4 {
            let e = 16 * s + j;
            gb[base + j] = (q[e] & 0x0F) | ((q[e + 8] & 0x0F) << 4);
            gb[base + 64 + j] = (q[e + 4] & 0x0F) | ((q[e + 12] & 0x0F) << 4);
            gb[base + 128 + j] = (q[e] >> 4)
                | ((q[e + 4] >> 4) << 2)
                | ((q[e + 8] >> 4) << 4)
                | ((q[e + 12] >> 4) << 6);
        }
        gb[Q6K_SC_AT + 16 * s + r] = x.scales[s] as u8;
    }
    gb[Q6K_D_AT + 2 * r..Q6K_D_AT + 2 * r + 2].copy_from_slice(&x.d);
}

/// The stored (unsigned) quant `e` (0..256) of row `r` in a group-block.
#[inline(always)]
pub(crate) fn q6k_quant(gb: &[u8], r: usize, e: usize) -> u8 {
    let (s, m, j) = (e / 16, (e % 16) / 4, e % 4);
    let base = 192 * s + 4 * r + j;
    let nib = match m {
        0 => gb[base] & 0x0F,
        1 => gb[base + 64] & 0x0F,
        2 => gb[base] >> 4,
        _ => gb[base + 64] >> 4,
    };
    nib | (((gb[base + 128] >> (2 * m)) & 3) << 4)
}

/// Sub-block scale `s` of row `r`.
#[inline(always)]
pub(crate) fn q6k_scale(gb: &[u8], r: usize, s: usize) -> i32 {
    gb[Q6K_SC_AT + 16 * s + r] as i8 as i32
}

/// The `d` of row `r`.
#[inline(always)]
pub(crate) fn q6k_d(gb: &[u8], r: usize) -> F16Bits {
    [gb[Q6K_D_AT + 2 * r], gb[Q6K_D_AT + 2 * r + 1]]
}

/// Row `r` of one group-block back as a source block.
pub(crate) fn q6k_get(gb: &[u8], r: usize, x: &mut BlockQ6K) {
    let q: [u8; QK_K] = std::array::from_fn(|e| q6k_quant(gb, r, e));
    q6k_store(&q, x);
    for s in 0..16 {
        x.scales[s] = q6k_scale(gb, r, s) as i8;
    }
    x.d = q6k_d(gb, r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q6k_quants_round_trip() {
        let mut x: BlockQ6K = bytemuck::Zeroable::zeroed();
        for (i, b) in bytemuck::bytes_of_mut(&mut x).iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let q = q6k_quants(&x);
        let mut y: BlockQ6K = bytemuck::Zeroable::zeroed();
        q6k_store(&q, &mut y);
        assert_eq!(x.ql, y.ql);
        assert_eq!(x.qh, y.qh);
        let mut gb = vec![0u8; Q6K_GROUP_BLOCK];
        q6k_put(&x, 5, &mut gb);
        let mut z: BlockQ6K = bytemuck::Zeroable::zeroed();
        q6k_get(&gb, 5, &mut z);
        assert_eq!(bytemuck::bytes_of(&x), bytemuck::bytes_of(&z));
    }
}
