//! The reference product over the interleaved layout: plain Rust, reading
//! the packed bytes directly, with the float steps of the row-wise scalar
//! dot products (blocks into four running sums by `b % 4`, then
//! `(s0 + s2) + (s1 + s3)`). The SIMD kernels must give its bits, and it
//! must give the row-wise scalar dot's bits on the unpacked rows.

use super::layout::{Format, Kind};
use super::layout_k::{
    q45k_d, q45k_quant, q45k_scale_min, q6k_d, q6k_quant, q6k_scale, Q6K_GROUP_BLOCK,
};
use super::layout_k23::{
    iq4xs_d, iq4xs_index, iq4xs_scale_at, q2k_d, q2k_quant, q2k_scale_min, q3k_d, q3k_quant,
    q3k_scale, IQ4XS_GROUP_BLOCK, Q2K_GROUP_BLOCK, Q3K_GROUP_BLOCK,
};
use super::tile::{Acts, Tile, GROUP, TILE};
use crate::blocks::{f16_to_f32, KVALUES_IQ4NL};
use crate::dot::scalar::k_combine;

/// The stored (unsigned) quant `n` of row `j` in one group-block; for
/// IQ4_NL and MXFP4 its codebook value plus 128 (their format's offset,
/// which the activations' start takes back out).
fn quant(f: &Format, gb: &[u8], j: usize, n: usize) -> i32 {
    let (k, byte) = (n / 4, n % 4);
    if !f.nibbles {
        return gb[64 * k + 4 * j + byte] as i32;
    }
    let c = k % 4;
    let packed = gb[64 * c + 4 * j + byte];
    let mut q = if k < 4 { packed & 0x0F } else { packed >> 4 } as i32;
    if f.codebook {
        return f.book()[q as usize] as i32 + f.offset;
    }
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
    match f.kind {
        Kind::Q6K => return tile_q6k(nb, group, acts, t0, nt),
        Kind::Q45K => return tile_q45k(f, nb, group, acts, t0, nt),
        Kind::IQ4XS => return tile_iq4xs(nb, group, acts, t0, nt),
        Kind::Q3K => return tile_q3k(nb, group, acts, t0, nt),
        Kind::Q2K => return tile_q2k(nb, group, acts, t0, nt),
        Kind::Legacy => {}
    }
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
                let d = f.scale(gb, j) * acts.d(tok, b);
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

/// The walk of the K-type tiles: for each token and row of the tile one
/// running total over the `nb` group-blocks (`gbytes` bytes each), which
/// `block(acc, gb, r, tok, b)` carries through block `b`.
fn k_tile(
    nb: usize,
    group: &[u8],
    gbytes: usize,
    t0: usize,
    nt: usize,
    block: impl Fn(f32, &[u8], usize, usize, usize) -> f32,
) -> Tile {
    let mut out = [[0.0f32; GROUP]; TILE];
    for (t, out) in out.iter_mut().enumerate().take(nt) {
        let tok = t0 + t;
        for (r, out) in out.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for b in 0..nb {
                acc = block(acc, &group[b * gbytes..(b + 1) * gbytes], r, tok, b);
            }
            *out = acc;
        }
    }
    out
}

/// `init + Σ q(e) · y[e]` over the `len` quants from `from` of one block's
/// activation quants `y`.
fn sub_dot(y: &[u8], from: usize, len: usize, init: i32, q: impl Fn(usize) -> i32) -> i32 {
    let mut sub = init;
    for (e, &y) in y.iter().enumerate().skip(from).take(len) {
        sub += q(e) * (y as i8) as i32;
    }
    sub
}

/// Q6_K: per super-block, the exact sum over sub-blocks of
/// `scale * (sum(q * y) - 32 * bsum)`, then one running total
/// `acc + (d * yd) * isum`, as the row-wise reference.
fn tile_q6k(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    k_tile(nb, group, Q6K_GROUP_BLOCK, t0, nt, |acc, gb, r, tok, b| {
        let y = acts.quants(tok, b);
        let mut isum = 0i32;
        for (s, init) in acts.inits(tok, b).iter().enumerate() {
            let sub = sub_dot(y, 16 * s, 16, *init, |e| q6k_quant(gb, r, e) as i32);
            isum += q6k_scale(gb, r, s) * sub;
        }
        let d = f16_to_f32(q6k_d(gb, r)) * acts.d(tok, b);
        k_combine(acc, d, isum, 0.0, 0)
    })
}

/// Q4_K/Q5_K: per super-block the exact `isum = Σ_j scale_j · Σ q·y` and
/// `msum = Σ_j min_j · bsum_j`, then `acc + ((d·yd)·isum − (dmin·yd)·msum)`,
/// as the row-wise reference.
fn tile_q45k(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    k_tile(
        nb,
        group,
        f.group_block_bytes(),
        t0,
        nt,
        |acc, gb, r, tok, b| {
            let y = acts.quants(tok, b);
            let (mut isum, mut msum) = (0i32, 0i32);
            for (j, bsum) in acts.inits(tok, b).iter().enumerate() {
                let sub = sub_dot(y, 32 * j, 32, 0, |e| q45k_quant(f.fifth, gb, r, e) as i32);
                let (sc, m) = q45k_scale_min(f.fifth, gb, r, j);
                isum += sc * sub;
                msum += m * bsum;
            }
            let (d, dmin) = q45k_d(f.fifth, gb, r);
            let yd = acts.d(tok, b);
            k_combine(acc, f16_to_f32(d) * yd, isum, f16_to_f32(dmin) * yd, msum)
        },
    )
}

/// IQ4_XS: per super-block the exact `isum = Σ_j sc_j · Σ kv·y` (the
/// codebook values themselves, so the activations' starts go unused),
/// then `acc + ((d·yd)·isum − 0·0)`, as the row-wise reference.
fn tile_iq4xs(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    k_tile(
        nb,
        group,
        IQ4XS_GROUP_BLOCK,
        t0,
        nt,
        |acc, gb, r, tok, b| {
            let y = acts.quants(tok, b);
            let mut isum = 0i32;
            for j in 0..8 {
                let sub = sub_dot(y, 32 * j, 32, 0, |e| {
                    KVALUES_IQ4NL[iq4xs_index(gb, r, e)] as i32
                });
                isum += iq4xs_scale_at(gb, r, j) * sub;
            }
            let d = f16_to_f32(iq4xs_d(gb, r)) * acts.d(tok, b);
            k_combine(acc, d, isum, 0.0, 0)
        },
    )
}

/// Q3_K: per super-block the exact sum over sub-blocks of
/// `scale · (Σ u·y − 4 · bsum)` (`u = q + 4`, the stored quant; the
/// reference's `Σ q·y`), then `acc + ((d·yd)·isum − 0·0)`.
fn tile_q3k(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    k_tile(nb, group, Q3K_GROUP_BLOCK, t0, nt, |acc, gb, r, tok, b| {
        let y = acts.quants(tok, b);
        let mut isum = 0i32;
        for (s, init) in acts.inits(tok, b).iter().enumerate() {
            let sub = sub_dot(y, 16 * s, 16, *init, |e| q3k_quant(gb, r, e) as i32);
            isum += q3k_scale(gb, r, s) * sub;
        }
        let d = f16_to_f32(q3k_d(gb, r)) * acts.d(tok, b);
        k_combine(acc, d, isum, 0.0, 0)
    })
}

/// Q2_K: per super-block the exact `isum = Σ_s sc_s · Σ q·y` and
/// `msum = Σ_s min_s · bsum_s`, then `acc + ((d·yd)·isum − (dmin·yd)·msum)`,
/// as the row-wise reference.
fn tile_q2k(nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    k_tile(nb, group, Q2K_GROUP_BLOCK, t0, nt, |acc, gb, r, tok, b| {
        let y = acts.quants(tok, b);
        let (mut isum, mut msum) = (0i32, 0i32);
        for (s, bsum) in acts.inits(tok, b).iter().enumerate() {
            let sub = sub_dot(y, 16 * s, 16, 0, |e| q2k_quant(gb, r, e) as i32);
            let (sc, m) = q2k_scale_min(gb, r, s);
            isum += sc * sub;
            msum += m * bsum;
        }
        let (d, dmin) = q2k_d(gb, r);
        let yd = acts.d(tok, b);
        k_combine(acc, f16_to_f32(d) * yd, isum, f16_to_f32(dmin) * yd, msum)
    })
}
