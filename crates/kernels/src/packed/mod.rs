//! Matrix products over weights repacked at load time into an interleaved
//! layout (see [`layout`]): sixteen rows per group, so the SIMD kernel
//! produces sixteen outputs per register without horizontal sums and
//! reuses each unpacked block across a tile of tokens.
//!
//! Results are bit-identical to the row-wise scalar dot products on the
//! original rows: the integer block sums are exact and the float steps are
//! the same, in the same order (the tests compare every type, shape and
//! token count).

pub mod layout;
pub mod scalar;

#[cfg(target_arch = "x86_64")]
mod avx512;

use std::ops::Range;

use minfer_gguf::GgmlType;

pub use layout::{pack, pack_groups, packable, unpack_row, Format, GROUP};

use crate::blocks::{f16_to_f32, QK};
use crate::error::KernelError;
use crate::matmul::{ActScratch, MatRef};
use crate::pool::ThreadPool;

/// Tokens per tile: each unpacked block serves this many tokens.
pub const TILE: usize = 4;

/// One tile's outputs: per token, the sixteen rows of the group.
pub type Tile = [[f32; GROUP]; TILE];

/// A tile kernel: `nt` tokens (1 to [`TILE`]) from `t0` against one group
/// of `nb` blocks of format `f`.
pub type TileFn =
    fn(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile;

/// The quantized activations of one product, with per-block values the
/// kernels need widened once: the scale `d`, for Q8_1 the `s`, and the
/// integer start `-offset * sum(y)` that turns the unsigned stored quants'
/// sums into the signed ones.
pub struct Acts<'a> {
    qs: &'a [u8],
    a_row: usize,
    blk: usize,
    qs_at: usize,
    nb: usize,
    d: &'a [f32],
    s: &'a [f32],
    init: &'a [i32],
}

impl Acts<'_> {
    /// The 32 signed quants of block `b` of token `t`, as bytes.
    #[inline(always)]
    pub fn quants(&self, t: usize, b: usize) -> &[u8] {
        let at = t * self.a_row + b * self.blk + self.qs_at;
        &self.qs[at..at + QK]
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

    /// The block's integer start value.
    #[inline(always)]
    pub fn init(&self, t: usize, b: usize) -> i32 {
        self.init[t * self.nb + b]
    }
}

/// The fastest tile kernel the CPU has, with the AVX-512 VNNI one only
/// when `vnni` (the caller's check of the CPU).
pub(crate) fn tile_fn(vnni: bool) -> TileFn {
    #[cfg(target_arch = "x86_64")]
    if vnni {
        return vnni_tile;
    }
    let _ = vnni;
    scalar::tile
}

#[cfg(target_arch = "x86_64")]
fn vnni_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    assert!(group.len() >= nb * f.group_block_bytes() && nt <= TILE);
    assert!(acts.nb == nb && acts.d.len() >= (t0 + nt) * nb && acts.init.len() >= (t0 + nt) * nb);
    assert!(!f.min || acts.s.len() >= (t0 + nt) * nb);
    assert!(acts.qs.len() >= (t0 + nt) * acts.a_row);
    // SAFETY: `tile_fn` hands this out only when the caller confirmed AVX-512
    // F/BW/VNNI (with AVX2, FMA and F16C, implied on every such CPU); the
    // asserts above are the kernel's bounds contract.
    unsafe { avx512::tile(f, nb, group, acts, t0, nt) }
}

/// Computes `out[t][r] = dot(w[r], x[t])` for weights in the interleaved
/// layout (`w.data` as [`pack`] made it), with the same results as
/// [`crate::matmul::matmul`] on the original rows.
pub(crate) fn matmul(
    tile: TileFn,
    pool: &ThreadPool,
    w: &MatRef,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    scratch: &mut ActScratch,
) -> Result<(), KernelError> {
    let f = Format::of(w.ty).ok_or(KernelError::UnsupportedType {
        ty: w.ty,
        op: "interleaved product",
    })?;
    if !packable(w.ty, w.rows, w.cols) || w.data.len() != w.rows * (w.cols / QK) * f.block_bytes() {
        return Err(KernelError::BadLength {
            what: "packed weight bytes",
            expected: w.rows * (w.cols / QK) * f.block_bytes(),
            got: w.data.len(),
        });
    }
    let check = |what, expected: usize, got: usize| {
        if expected == got {
            Ok(())
        } else {
            Err(KernelError::BadLength {
                what,
                expected,
                got,
            })
        }
    };
    check("activations", n_tok * w.cols, x.len())?;
    check("output", n_tok * w.rows, out.len())?;
    if n_tok == 0 {
        return Ok(());
    }
    let acts = prepare(pool, &f, x, w.cols, n_tok, scratch)?;
    let nb = w.cols / QK;
    let gbytes = nb * f.group_block_bytes();
    let rows = w.rows;
    let out_ptr = crate::matmul::OutPtr(out.as_mut_ptr());
    pool.for_chunks(rows / GROUP, 1, 4, |groups: Range<usize>| {
        for g in groups {
            let group = &w.data[g * gbytes..(g + 1) * gbytes];
            let mut t0 = 0;
            while t0 < n_tok {
                let nt = (n_tok - t0).min(TILE);
                let v = tile(&f, nb, group, &acts, t0, nt);
                for (t, v) in v.iter().enumerate().take(nt) {
                    // SAFETY: group `g` belongs to this chunk alone, so rows
                    // `16g..16g + 16` of every token have one writer; the
                    // offset is below `n_tok * rows`, the checked length.
                    unsafe {
                        let dst = out_ptr.get().add((t0 + t) * rows + g * GROUP);
                        std::ptr::copy_nonoverlapping(v.as_ptr(), dst, GROUP);
                    }
                }
                t0 += nt;
            }
        }
    });
    Ok(())
}

/// Quantizes the activations (Q8_0, or Q8_1 for the types with a minimum)
/// and fills the per-block tables.
fn prepare<'s>(
    pool: &ThreadPool,
    f: &Format,
    x: &[f32],
    cols: usize,
    n_tok: usize,
    scratch: &'s mut ActScratch,
) -> Result<Acts<'s>, KernelError> {
    let act = if f.min {
        GgmlType::Q8_1
    } else {
        GgmlType::Q8_0
    };
    let blk = act.type_size() as usize;
    let (nb, a_row) = (cols / QK, cols / QK * blk);
    let qs_at = if f.min { 4 } else { 2 };
    let ActScratch { words, table, init } = scratch;
    let qs = crate::matmul::bytes_mut(words, n_tok * a_row);
    crate::matmul::quantize_rows(pool, act, x, cols, qs, a_row)?;
    let qs = &*qs;
    let n = n_tok * nb;
    let per = if f.min { 2 } else { 1 };
    if table.len() < per * n {
        table.resize(per * n, 0.0);
    }
    if init.len() < n {
        init.resize(n, 0);
    }
    let (d, rest) = table.split_at_mut(n);
    let s = if f.min {
        &mut rest[..n]
    } else {
        &mut rest[..0]
    };
    for (i, blockb) in qs.chunks_exact(blk).enumerate() {
        d[i] = f16_to_f32([blockb[0], blockb[1]]);
        if f.min {
            s[i] = f16_to_f32([blockb[2], blockb[3]]);
        }
        init[i] = if f.offset == 0 {
            0
        } else {
            let sum: i32 = blockb[qs_at..qs_at + QK]
                .iter()
                .map(|&q| q as i8 as i32)
                .sum();
            -f.offset * sum
        };
    }
    Ok(Acts {
        qs,
        a_row,
        blk,
        qs_at,
        nb,
        d: &table[..n],
        s: if f.min { &table[n..2 * n] } else { &table[..0] },
        init: &init[..n],
    })
}
