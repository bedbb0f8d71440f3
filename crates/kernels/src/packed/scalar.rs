//! The reference product over the interleaved layout: plain Rust, reading
//! the packed bytes directly, with the float steps of the row-wise scalar
//! dot products (blocks into four running sums by `b % 4`, then
//! `(s0 + s2) + (s1 + s3)`). The SIMD kernels must give its bits, and it
//! must give the row-wise scalar dot's bits on the unpacked rows.

use super::layout::{Format, GROUP};
use super::{Acts, Tile, TILE};
use crate::blocks::f16_to_f32;

/// The stored (unsigned) quant `n` of row `j` in one group-block.
fn quant(f: &Format, gb: &[u8], j: usize, n: usize) -> i32 {
    let (k, byte) = (n / 4, n % 4);
    if !f.nibbles {
        return gb[64 * k + 4 * j + byte] as i32;
    }
    let c = k % 4;
    let packed = gb[64 * c + 4 * j + byte];
    let mut q = if k < 4 { packed & 0x0F } else { packed >> 4 } as i32;
    if f.fifth {
        let at = f.qh_at() + 4 * j;
        let h = u32::from_le_bytes([gb[at], gb[at + 1], gb[at + 2], gb[at + 3]]);
        q |= (((h >> (8 * byte + k)) & 1) << 4) as i32;
    }
    q
}

fn f16_at(gb: &[u8], at: usize) -> f32 {
    f16_to_f32([gb[at], gb[at + 1]])
}

/// Up to [`TILE`] tokens from `t0` (`nt` of them) against one 16-row group
/// of `nb` blocks.
pub fn tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    let gbytes = f.group_block_bytes();
    let mut out = [[0.0f32; GROUP]; TILE];
    for (t, out) in out.iter_mut().enumerate().take(nt) {
        let tok = t0 + t;
        for (j, out) in out.iter_mut().enumerate() {
            let mut acc = [0.0f32; 4];
            for b in 0..nb {
                let gb = &group[b * gbytes..(b + 1) * gbytes];
                let y = acts.quants(tok, b);
                let mut isum = acts.init(tok, b);
                for (n, &y) in y.iter().enumerate() {
                    isum += quant(f, gb, j, n) * (y as i8) as i32;
                }
                let d = f16_at(gb, f.d_at() + 2 * j) * acts.d(tok, b);
                let mut v = d * isum as f32;
                if f.min {
                    v += f16_at(gb, f.m_at() + 2 * j) * acts.s(tok, b);
                }
                acc[b & 3] += v;
            }
            *out = (acc[0] + acc[2]) + (acc[1] + acc[3]);
        }
    }
    out
}
