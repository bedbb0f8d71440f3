//! Scalar reference dot products, one per weight type.
//!
//! These define the exact arithmetic that the SIMD versions reproduce:
//!
//! - Within a block, products of quants are summed in `i32`, which is exact.
//! - Legacy types (blocks of 32, with IQ4_NL and MXFP4): each block contributes
//!   `(d_w * d_a) * isum` (plus `m_w * s_a` for the types with a minimum).
//!   Contributions are summed in four interleaved partial sums, block `i`
//!   into partial `i % 4`, and combined as `(p0 + p2) + (p1 + p3)`. That is
//!   the order a 4-lane vector accumulator produces, so the SIMD paths can
//!   be bit-exact without a horizontal reduction per block.
//! - K-quants and IQ4_XS (super-blocks of 256): each super-block's scaled
//!   integer sums are reduced to one `i32` (exact), then combined in `f32`
//!   with one running sum, super-block by super-block.
//! - Float types accumulate in `f32` in eight interleaved partial sums
//!   (element `i` into partial `i % 8`), combined pairwise; SIMD versions
//!   use FMA and so agree only to rounding (see the tests).

use crate::blocks::*;

/// Four interleaved partial sums, combined as a 4-lane vector would be.
#[derive(Default)]
pub(crate) struct Acc4(pub [f32; 4]);

impl Acc4 {
    #[inline(always)]
    pub fn add(&mut self, i: usize, v: f32) {
        self.0[i & 3] += v;
    }
    #[inline(always)]
    pub fn total(&self) -> f32 {
        let p = &self.0;
        (p[0] + p[2]) + (p[1] + p[3])
    }
}

#[inline(always)]
fn isum_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

/// Unpacks a 4-bit block (low nibbles first, then high nibbles) with an
/// offset, as Q4_0 stores it.
#[inline(always)]
fn unpack_nibbles(qs: &[u8; 16], offset: i8) -> [i8; 32] {
    let mut q = [0i8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0F) as i8 - offset;
        q[j + 16] = (qs[j] >> 4) as i8 - offset;
    }
    q
}

/// Unpacks a 5-bit block: nibbles plus the fifth bit from `qh`.
#[inline(always)]
fn unpack_q5(qs: &[u8; 16], qh: [u8; 4], offset: i8) -> [i8; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut q = [0i8; 32];
    for j in 0..16 {
        let h0 = (((qh >> j) & 1) << 4) as u8;
        let h1 = (((qh >> (j + 16)) & 1) << 4) as u8;
        q[j] = ((qs[j] & 0x0F) | h0) as i8 - offset;
        q[j + 16] = ((qs[j] >> 4) | h1) as i8 - offset;
    }
    q
}

/// Q4_0 weights × Q8_0 activations, block contributions in four interleaved
/// partial sums (see the module doc). Blocks past the shorter slice are
/// ignored.
pub fn dot_q4_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let isum = isum_i8(&unpack_nibbles(&x.qs, 8), &y.qs);
        acc.add(i, (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32);
    }
    acc.total()
}

/// Q4_1 weights × Q8_1 activations: as [`dot_q4_0`], plus each block's
/// minimum term `m * s`. Blocks past the shorter slice are ignored.
pub fn dot_q4_1(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let isum = isum_i8(&unpack_nibbles(&x.qs, 0), &y.qs);
        let v =
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
        acc.add(i, v);
    }
    acc.total()
}

/// Q5_0 weights × Q8_0 activations, summed as [`dot_q4_0`]. Blocks past the
/// shorter slice are ignored.
pub fn dot_q5_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let isum = isum_i8(&unpack_q5(&x.qs, x.qh, 16), &y.qs);
        acc.add(i, (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32);
    }
    acc.total()
}

/// Q5_1 weights × Q8_1 activations, summed as [`dot_q4_1`]. Blocks past the
/// shorter slice are ignored.
pub fn dot_q5_1(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let isum = isum_i8(&unpack_q5(&x.qs, x.qh, 0), &y.qs);
        let v =
            (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32 + f16_to_f32(x.m) * f16_to_f32(y.s);
        acc.add(i, v);
    }
    acc.total()
}

/// Q8_0 weights × Q8_0 activations, summed as [`dot_q4_0`]. Blocks past the
/// shorter slice are ignored.
pub fn dot_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let isum = isum_i8(&x.qs, &y.qs);
        acc.add(i, (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32);
    }
    acc.total()
}

/// IQ4_NL weights (codebook values) × Q8_0 activations, summed as
/// [`dot_q4_0`]. Blocks past the shorter slice are ignored.
pub fn dot_iq4_nl(w: &[BlockIQ4NL], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let q = codebook_values(&x.qs, &KVALUES_IQ4NL);
        let isum = isum_i8(&q, &y.qs);
        acc.add(i, (f16_to_f32(x.d) * f16_to_f32(y.d)) * isum as f32);
    }
    acc.total()
}

/// MXFP4 weights × Q8_0 activations. Per block this is ggml's
/// `vec_dot_mxfp4_q8_0`: `d = d_a * e8m0_half(e)`, then `d * (sumi1 +
/// sumi2)` (the two i32 halves add exactly, so one sum over 32 products is
/// the same). Blocks are summed as [`dot_q4_0`] (four interleaved partial
/// sums, where ggml's scalar code keeps one running sum), so that the SIMD
/// paths can be bit-exact. Blocks past the shorter slice are ignored.
pub fn dot_mxfp4(w: &[BlockMXFP4], a: &[BlockQ8_0]) -> f32 {
    let mut acc = Acc4::default();
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let q = codebook_values(&x.qs, &KVALUES_MXFP4);
        let isum = isum_i8(&q, &y.qs);
        acc.add(i, (f16_to_f32(y.d) * e8m0_to_f32_half(x.e)) * isum as f32);
    }
    acc.total()
}

/// Combines one super-block's exact integer sums into the running total.
#[inline(always)]
pub(crate) fn k_combine(acc: f32, d: f32, isum: i32, dmin: f32, msum: i32) -> f32 {
    acc + (d * isum as f32 - dmin * msum as f32)
}

/// Q2_K weights × Q8_K activations: exact integer sums per super-block,
/// the mins applied through the activations' `bsums`, then one running
/// f32 total. Blocks past the shorter slice are ignored.
pub fn dot_q2_k(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let (mut isum, mut msum) = (0i32, 0i32);
        for sub in 0..16 {
            let sc = x.scales[sub];
            let mut s = 0i32;
            for e in sub * 16..sub * 16 + 16 {
                let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
                let q = (x.qs[32 * n + l] >> (2 * j)) & 3;
                s += q as i32 * y.qs[e] as i32;
            }
            isum += (sc & 0x0F) as i32 * s;
            msum += (sc >> 4) as i32 * y.bsums[sub] as i32;
        }
        acc = k_combine(
            acc,
            f16_to_f32(x.d) * y.d,
            isum,
            f16_to_f32(x.dmin) * y.d,
            msum,
        );
    }
    acc
}

/// The sixteen signed 6-bit scales of a Q3_K block.
pub(crate) fn q3k_scales(s: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 { s[i] & 0x0F } else { s[i - 8] >> 4 };
        let high = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// Q3_K weights × Q8_K activations, one running f32 total over the
/// super-blocks' exact integer sums. Blocks past the shorter slice are ignored.
pub fn dot_q3_k(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let scales = q3k_scales(&x.scales);
        let mut isum = 0i32;
        for (sub, &sc) in scales.iter().enumerate() {
            let mut s = 0i32;
            for e in sub * 16..sub * 16 + 16 {
                let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
                let low = ((x.qs[32 * n + l] >> (2 * j)) & 3) as i32;
                let high = x.hmask[l] & (1 << (4 * n + j)) != 0;
                let q = low - if high { 0 } else { 4 };
                s += q * y.qs[e] as i32;
            }
            isum += sc as i32 * s;
        }
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, isum, 0.0, 0);
    }
    acc
}

/// Exact integer sums of a Q4_K/Q5_K super-block: the scaled quant sum and
/// the min-weighted activation sum.
#[inline(always)]
fn q45k_sums(q: &[u8; 256], scales: &[u8; 12], y: &BlockQ8K) -> (i32, i32) {
    let (mut isum, mut msum) = (0i32, 0i32);
    for sub in 0..8 {
        let (sc, m) = k_scale_min(sub, scales);
        let s: i32 = (sub * 32..sub * 32 + 32)
            .map(|e| q[e] as i32 * y.qs[e] as i32)
            .sum();
        isum += sc as i32 * s;
        msum += m as i32 * (y.bsums[2 * sub] as i32 + y.bsums[2 * sub + 1] as i32);
    }
    (isum, msum)
}

/// `acc` plus the term of one Q4_K/Q5_K super-block, its quants `q`
/// unpacked, its scales `d` and `dmin` as stored.
#[inline(always)]
fn q45k_add(
    acc: f32,
    q: &[u8; 256],
    scales: &[u8; 12],
    dm: (F16Bits, F16Bits),
    y: &BlockQ8K,
) -> f32 {
    let (isum, msum) = q45k_sums(q, scales, y);
    k_combine(
        acc,
        f16_to_f32(dm.0) * y.d,
        isum,
        f16_to_f32(dm.1) * y.d,
        msum,
    )
}

/// Q4_K weights × Q8_K activations: as [`dot_q2_k`], with 6-bit scales
/// and mins per 32 quants. Blocks past the shorter slice are ignored.
pub fn dot_q4_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut q = [0u8; 256];
        for j in 0..4 {
            for l in 0..32 {
                q[64 * j + l] = x.qs[32 * j + l] & 0x0F;
                q[64 * j + 32 + l] = x.qs[32 * j + l] >> 4;
            }
        }
        acc = q45k_add(acc, &q, &x.scales, (x.d, x.dmin), y);
    }
    acc
}

/// Q5_K weights × Q8_K activations, summed as [`dot_q4_k`]. Blocks past the
/// shorter slice are ignored.
pub fn dot_q5_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut q = [0u8; 256];
        for j in 0..4 {
            for l in 0..32 {
                let (h0, h1) = (x.qh[l] >> (2 * j) & 1, x.qh[l] >> (2 * j + 1) & 1);
                q[64 * j + l] = (x.qs[32 * j + l] & 0x0F) | (h0 << 4);
                q[64 * j + 32 + l] = (x.qs[32 * j + l] >> 4) | (h1 << 4);
            }
        }
        acc = q45k_add(acc, &q, &x.scales, (x.d, x.dmin), y);
    }
    acc
}

/// Q6_K weights × Q8_K activations, one running f32 total over the
/// super-blocks' exact integer sums. Blocks past the shorter slice are ignored.
pub fn dot_q6_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut q = [0i8; 256];
        for n in 0..2 {
            let (ql, qh) = (&x.ql[64 * n..], &x.qh[32 * n..]);
            for l in 0..32 {
                let e = 128 * n + l;
                q[e] = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
                q[e + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                q[e + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                q[e + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let mut isum = 0i32;
        for sub in 0..16 {
            let s = isum_i8(&q[sub * 16..sub * 16 + 16], &y.qs[sub * 16..sub * 16 + 16]);
            isum += x.scales[sub] as i32 * s;
        }
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, isum, 0.0, 0);
    }
    acc
}

/// The eight 6-bit sub-block scales of an IQ4_XS block, minus 32.
#[inline(always)]
pub(crate) fn iq4xs_scale(x: &BlockIQ4XS, ib: usize) -> i32 {
    let h = u16::from_le_bytes(x.scales_h);
    let low = (x.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
    let high = ((h >> (2 * ib)) & 3) as u8;
    (low | (high << 4)) as i32 - 32
}

/// IQ4_XS weights (codebook values) × Q8_K activations, one running f32 total
/// over the super-blocks' exact integer sums. Blocks past the shorter slice are
/// ignored.
pub fn dot_iq4_xs(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut isum = 0i32;
        for ib in 0..8 {
            let qs = &x.qs[16 * ib..16 * ib + 16];
            let yq = &y.qs[32 * ib..32 * ib + 32];
            let mut s = 0i32;
            for j in 0..16 {
                s += KVALUES_IQ4NL[(qs[j] & 0x0F) as usize] as i32 * yq[j] as i32;
                s += KVALUES_IQ4NL[(qs[j] >> 4) as usize] as i32 * yq[j + 16] as i32;
            }
            isum += iq4xs_scale(x, ib) * s;
        }
        acc = k_combine(acc, f16_to_f32(x.d) * y.d, isum, 0.0, 0);
    }
    acc
}

/// Sums `f(i)` for `i in 0..n` in eight interleaved partial sums.
#[inline(always)]
fn float_dot(n: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut p = [0.0f32; 8];
    for i in 0..n {
        p[i & 7] += f(i);
    }
    ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]))
}

/// f32 × f32 in eight interleaved partial sums, over the first
/// `min(w.len(), a.len())` elements.
pub fn dot_f32(w: &[f32], a: &[f32]) -> f32 {
    float_dot(w.len().min(a.len()), |i| w[i] * a[i])
}

/// f16 weights (raw bits) × f32, summed as [`dot_f32`].
pub fn dot_f16(w: &[F16Bits], a: &[f32]) -> f32 {
    float_dot(w.len().min(a.len()), |i| f16_to_f32(w[i]) * a[i])
}

/// bf16 weights (raw little-endian bits) × f32, summed as [`dot_f32`].
pub fn dot_bf16(w: &[[u8; 2]], a: &[f32]) -> f32 {
    float_dot(w.len().min(a.len()), |i| {
        f32::from_bits((u16::from_le_bytes(w[i]) as u32) << 16) * a[i]
    })
}
