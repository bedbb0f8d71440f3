//! The interleaved layouts of the K-quants.
//!
//! # Q6_K
//!
//! Sixteen rows per group, one group-block
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

use crate::blocks::{k_scale_min, BlockQ4K, BlockQ5K, BlockQ6K, F16Bits, QK_K};

use super::tile::GROUP;

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

// # Q4_K and Q5_K
//
// Sixteen rows per group, one group-block per super-block, arranged per
// 32-quant sub-block `j` (0..8) like the legacy 4- and 5-bit types: four
// 64-byte chunks of nibbles (chunk `c`, row `r` at `4r`, byte `b`: quant
// `32j + 4c + b` in the low nibble, `32j + 16 + 4c + b` in the high one),
// then for Q5_K one 64-byte chunk of fifth bits (row `r`'s `u32` at `4r`,
// bit `k` of byte `b` for quant `32j + 4k + b`). After the eight
// sub-blocks: the scales `[j][row]` and the mins `[j][row]` as bytes
// (the 6-bit values unpacked), then the sixteen `d` and the sixteen
// `dmin` (f16). 2,368 bytes for Q4_K (2,304 in the file: the unpacked
// scales cost 4 bytes per row and super-block), 2,880 for Q5_K (2,816).

/// Bytes of one Q4_K/Q5_K sub-block chunk run.
pub const fn q45k_sub_bytes(fifth: bool) -> usize {
    if fifth {
        5 * 64
    } else {
        4 * 64
    }
}

/// Offset of the sub-block scales (the mins follow, 128 bytes on).
pub const fn q45k_sc_at(fifth: bool) -> usize {
    8 * q45k_sub_bytes(fifth)
}

/// Offset of the sixteen `d` (the `dmin` follow, 32 bytes on).
pub const fn q45k_d_at(fifth: bool) -> usize {
    q45k_sc_at(fifth) + 2 * 8 * GROUP
}

/// Bytes of one Q4_K/Q5_K group-block.
pub const fn q45k_group_block(fifth: bool) -> usize {
    q45k_d_at(fifth) + 4 * GROUP
}

/// The 256 unsigned quants (0..15, or 0..31 with `qh`) of a Q4_K/Q5_K
/// block's `qs` and optional `qh`, in element order.
fn q45k_quants(qs: &[u8; 128], qh: Option<&[u8; 32]>) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for j in 0..4 {
        for l in 0..32 {
            q[64 * j + l] = qs[32 * j + l] & 0x0F;
            q[64 * j + 32 + l] = qs[32 * j + l] >> 4;
            if let Some(h) = qh {
                q[64 * j + l] |= ((h[l] >> (2 * j)) & 1) << 4;
                q[64 * j + 32 + l] |= ((h[l] >> (2 * j + 1)) & 1) << 4;
            }
        }
    }
    q
}

/// Writes row `r` (0..16) of one Q4_K/Q5_K group-block.
fn q45k_put(
    fifth: bool,
    quants: &[u8; QK_K],
    scales: &[u8; 12],
    d: F16Bits,
    dmin: F16Bits,
    r: usize,
    gb: &mut [u8],
) {
    let sub = q45k_sub_bytes(fifth);
    for j in 0..8 {
        let q = &quants[32 * j..32 * j + 32];
        // The low four bits here; a fifth bit goes to the bit chunk.
        for c in 0..4 {
            for b in 0..4 {
                gb[sub * j + 64 * c + 4 * r + b] =
                    (q[4 * c + b] & 0x0F) | ((q[16 + 4 * c + b] & 0x0F) << 4);
            }
        }
        if fifth {
            let mut h = 0u32;
            for k in 0..8 {
                for b in 0..4 {
                    h |= (((q[4 * k + b] >> 4) & 1) as u32) << (8 * b + k);
                }
            }
            let at = sub * j + 256 + 4 * r;
            gb[at..at + 4].copy_from_slice(&h.to_le_bytes());
        }
        let (sc, m) = k_scale_min(j, scales);
        gb[q45k_sc_at(fifth) + GROUP * j + r] = sc;
        gb[q45k_sc_at(fifth) + 8 * GROUP + GROUP * j + r] = m;
    }
    let d_at = q45k_d_at(fifth);
    gb[d_at + 2 * r..d_at + 2 * r + 2].copy_from_slice(&d);
    gb[d_at + 2 * GROUP + 2 * r..d_at + 2 * GROUP + 2 * r + 2].copy_from_slice(&dmin);
}

/// The stored quant `e` (0..256) of row `r` in a Q4_K/Q5_K group-block.
#[inline(always)]
pub(crate) fn q45k_quant(fifth: bool, gb: &[u8], r: usize, e: usize) -> u8 {
    let (j, m, b) = (e / 32, (e % 32) / 4, e % 4);
    let base = q45k_sub_bytes(fifth) * j;
    let byte = gb[base + 64 * (m % 4) + 4 * r + b];
    let mut q = if m < 4 { byte & 0x0F } else { byte >> 4 };
    if fifth {
        q |= ((gb[base + 256 + 4 * r + b] >> m) & 1) << 4;
    }
    q
}

/// Sub-block `j`'s scale and min of row `r`.
#[inline(always)]
pub(crate) fn q45k_scale_min(fifth: bool, gb: &[u8], r: usize, j: usize) -> (i32, i32) {
    let at = q45k_sc_at(fifth) + GROUP * j + r;
    (gb[at] as i32, gb[at + 8 * GROUP] as i32)
}

/// The `d` and `dmin` of row `r`.
#[inline(always)]
pub(crate) fn q45k_d(fifth: bool, gb: &[u8], r: usize) -> (F16Bits, F16Bits) {
    let at = q45k_d_at(fifth) + 2 * r;
    (
        [gb[at], gb[at + 1]],
        [gb[at + 2 * GROUP], gb[at + 2 * GROUP + 1]],
    )
}

/// The twelve bytes that hold eight 6-bit scales and mins (the inverse of
/// [`k_scale_min`]).
fn k_scales_encode(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4);
    }
    q
}

/// Writes row `r` of a Q4_K group-block from source block `x`.
pub(crate) fn q4k_put(x: &BlockQ4K, r: usize, gb: &mut [u8]) {
    let q = q45k_quants(&x.qs, None);
    q45k_put(false, &q, &x.scales, x.d, x.dmin, r, gb);
}

/// Writes row `r` of a Q5_K group-block from source block `x`.
pub(crate) fn q5k_put(x: &BlockQ5K, r: usize, gb: &mut [u8]) {
    let q = q45k_quants(&x.qs, Some(&x.qh));
    q45k_put(true, &q, &x.scales, x.d, x.dmin, r, gb);
}

/// Row `r` of a Q4_K/Q5_K group-block as source fields: `qs`, `qh`,
/// scales, `d`, `dmin`.
fn q45k_fields(
    fifth: bool,
    gb: &[u8],
    r: usize,
) -> ([u8; 128], [u8; 32], [u8; 12], F16Bits, F16Bits) {
    let q: [u8; QK_K] = std::array::from_fn(|e| q45k_quant(fifth, gb, r, e));
    let (mut qs, mut qh) = ([0u8; 128], [0u8; 32]);
    for j in 0..4 {
        for l in 0..32 {
            let (lo, hi) = (q[64 * j + l], q[64 * j + 32 + l]);
            qs[32 * j + l] = (lo & 0x0F) | ((hi & 0x0F) << 4);
            qh[l] |= ((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1));
        }
    }
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        let (a, b) = q45k_scale_min(fifth, gb, r, j);
        (sc[j], m[j]) = (a as u8, b as u8);
    }
    let (d, dmin) = q45k_d(fifth, gb, r);
    (qs, qh, k_scales_encode(&sc, &m), d, dmin)
}

/// Row `r` of a Q4_K group-block back as a source block.
pub(crate) fn q4k_get(gb: &[u8], r: usize, x: &mut BlockQ4K) {
    (x.qs, _, x.scales, x.d, x.dmin) = q45k_fields(false, gb, r);
}

/// Row `r` of a Q5_K group-block back as a source block.
pub(crate) fn q5k_get(gb: &[u8], r: usize, x: &mut BlockQ5K) {
    (x.qs, x.qh, x.scales, x.d, x.dmin) = q45k_fields(true, gb, r);
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

    #[test]
    fn k_scales_round_trip() {
        let mut q = [0u8; 12];
        for (i, b) in q.iter_mut().enumerate() {
            *b = (i * 97 + 13) as u8;
        }
        let sc: [u8; 8] = std::array::from_fn(|j| k_scale_min(j, &q).0);
        let m: [u8; 8] = std::array::from_fn(|j| k_scale_min(j, &q).1);
        assert_eq!(k_scales_encode(&sc, &m), q);
    }
}
