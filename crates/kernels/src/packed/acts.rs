//! The quantized activations of one interleaved product and the tile
//! shape the kernels share: what every tile kernel reads and returns.

use minfer_gguf::GgmlType;

use super::layout::{Format, Kind};
use super::shape::{Tile, TILE};
use crate::blocks::{f16_to_f32, QK, QK_K};
use crate::error::KernelError;
use crate::operand::{bytes_mut, quantize_rows, ActScratch};
use crate::pool::ThreadPool;

/// A tile kernel: `nt` tokens (1 to [`TILE`]) from `t0` against one group
/// of `nb` blocks of format `f`. [`matmul`] runs a group's tiles in token
/// order, so the tile at `t0 == 0` is the one that reads the group from
/// memory; the SIMD kernels prefetch ahead in that tile only.
pub type TileFn =
    fn(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile;

/// The quantized activations of one product, with per-block values the
/// kernels need widened once: the scale `d`, for Q8_1 the `s`, and the
/// integer start `-offset * sum(y)` (per block, or per sub-block for
/// Q6_K, Q3_K and IQ4_XS) that turns the unsigned stored quants' sums into
/// the signed ones; for Q4_K/Q5_K and Q2_K, the sub-blocks' `sum(y)`
/// their mins multiply.
pub struct Acts<'a> {
    qs: &'a [u8],
    a_row: usize,
    blk: usize,
    qs_at: usize,
    quants: usize,
    nb: usize,
    inits: usize,
    d: &'a [f32],
    s: &'a [f32],
    init: &'a [i32],
}

impl Acts<'_> {
    /// The signed quants of block `b` of token `t`, as bytes.
    #[inline(always)]
    pub fn quants(&self, t: usize, b: usize) -> &[u8] {
        let at = t * self.a_row + b * self.blk + self.qs_at;
        &self.qs[at..at + self.quants]
    }

    /// The block's scale.
    #[inline(always)]
    pub fn d(&self, t: usize, b: usize) -> f32 {
        self.d[t * self.nb + b]
    }

    /// The block's `s` (Q8_1).
    #[inline(always)]
    pub fn s(&self, t: usize, b: usize) -> f32 {
        self.s[t * self.nb + b]
    }

    /// The block's integer start value (the first one, for the K-quants).
    #[inline(always)]
    pub fn init(&self, t: usize, b: usize) -> i32 {
        self.init[(t * self.nb + b) * self.inits]
    }

    /// The block's integer start values, one per sub-block for the
    /// K-quants and IQ4_XS (see `inits_per_block`).
    #[inline(always)]
    pub fn inits(&self, t: usize, b: usize) -> &[i32] {
        let at = (t * self.nb + b) * self.inits;
        &self.init[at..at + self.inits]
    }
}

/// The bounds contract every SIMD tile kernel relies on.
pub(super) fn check_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) {
    let n = (t0 + nt) * nb;
    assert!(group.len() >= nb * f.group_block_bytes() && nt <= TILE);
    assert!(acts.nb == nb && acts.quants == f.block_quants());
    assert!(acts.d.len() >= n && acts.init.len() >= n * acts.inits);
    assert!(!f.min || f.kind != Kind::Legacy || acts.s.len() >= n);
    assert!(acts.qs.len() >= (t0 + nt) * acts.a_row);
    assert!(acts.inits == inits_per_block(f));
}

/// Integer start values per block: one for the legacy types, one per
/// 16-quant sub-block for Q6_K (`-32 * bsum`) and Q3_K (`-4 * bsum`) and
/// for Q2_K (`bsum`, which its mins multiply), one per 32-quant sub-block
/// for Q4_K/Q5_K (the activation sums their mins multiply) and for IQ4_XS
/// (`-128 * bsum`, which takes back out the 128 its VNNI kernels add to
/// the codebook values).
fn inits_per_block(f: &Format) -> usize {
    match f.kind {
        Kind::Legacy => 1,
        Kind::Q6K | Kind::Q3K | Kind::Q2K => 16,
        Kind::Q45K | Kind::IQ4XS => 8,
    }
}

/// Quantizes the activations (Q8_0, Q8_1 for the types with a minimum,
/// Q8_K for the K-quants) and fills the per-block tables.
pub(super) fn prepare<'s>(
    pool: &ThreadPool,
    f: &Format,
    x: &[f32],
    cols: usize,
    n_tok: usize,
    scratch: &'s mut ActScratch,
) -> Result<Acts<'s>, KernelError> {
    let (act, qs_at) = match (f.kind, f.min) {
        (Kind::Legacy, true) => (GgmlType::Q8_1, 4),
        (Kind::Legacy, false) => (GgmlType::Q8_0, 2),
        _ => (GgmlType::Q8_K, 4),
    };
    let inits = inits_per_block(f);
    let quants = f.block_quants();
    let blk = act.type_size() as usize;
    let (nb, a_row) = (cols / quants, cols / quants * blk);
    let ActScratch { words, table, init } = scratch;
    let qs = bytes_mut(words, n_tok * a_row);
    quantize_rows(pool, act, x, cols, qs, a_row)?;
    let qs = &*qs;
    let n = n_tok * nb;
    let per = if f.min && f.kind == Kind::Legacy {
        2
    } else {
        1
    };
    if table.len() < per * n {
        table.resize(per * n, 0.0);
    }
    if init.len() < inits * n {
        init.resize(inits * n, 0);
    }
    let (d, rest) = table.split_at_mut(n);
    for (i, b) in qs.chunks_exact(blk).enumerate() {
        let init = &mut init[inits * i..inits * (i + 1)];
        match f.kind {
            Kind::Q45K | Kind::IQ4XS => {
                d[i] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                // Per 32-quant sub-block, its two 16-quant `bsums` (times
                // the offset for IQ4_XS; Q4_K/Q5_K's is 0 and they take
                // the sums as they are, for their mins).
                let by = if f.kind == Kind::IQ4XS { -f.offset } else { 1 };
                for (j, v) in init.iter_mut().enumerate() {
                    let at = 4 + QK_K + 4 * j;
                    *v = by
                        * (i16::from_le_bytes([b[at], b[at + 1]]) as i32
                            + i16::from_le_bytes([b[at + 2], b[at + 3]]) as i32);
                }
            }
            Kind::Q6K | Kind::Q3K | Kind::Q2K => {
                d[i] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                // `bsums` follow the 256 quants: sixteen i16. Q2_K's mins
                // take them as they are (it has no offset).
                let by = if f.min { 1 } else { -f.offset };
                for (s, v) in init.iter_mut().enumerate() {
                    let at = 4 + QK_K + 2 * s;
                    *v = by * i16::from_le_bytes([b[at], b[at + 1]]) as i32;
                }
            }
            Kind::Legacy => {
                d[i] = f16_to_f32([b[0], b[1]]);
                if f.min {
                    rest[i] = f16_to_f32([b[2], b[3]]);
                }
                init[0] = if f.offset == 0 {
                    0
                } else {
                    let sum: i32 = b[qs_at..qs_at + QK].iter().map(|&q| q as i8 as i32).sum();
                    -f.offset * sum
                };
            }
        }
    }
    Ok(Acts {
        qs,
        a_row,
        blk,
        qs_at,
        quants,
        nb,
        inits,
        d: &table[..n],
        s: if per == 2 {
            &table[n..2 * n]
        } else {
            &table[..0]
        },
        init: &init[..inits * n],
    })
}
