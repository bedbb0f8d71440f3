//! The interleaved product: the activations quantized once, then each
//! thread's groups of sixteen rows tile by tile, with the fastest tile
//! kernel the CPU runs.

use std::ops::Range;

use super::acts::{prepare, TileFn};
use super::layout::{packable, Format};
use super::scalar;
use super::shape::{GROUP, TILE};
use crate::error::{check_len, KernelError};
use crate::operand::{ActScratch, MatRef};
use crate::pool::ThreadPool;

/// The fastest tile kernel of `isa`: the AVX-512 VNNI one with AVX-512
/// VNNI, the AVX2 one fused by AVX-VNNI with that, the AVX2 one with AVX2
/// (FMA and F16C), the scalar reference otherwise.
pub(crate) fn tile_fn(isa: crate::Isa) -> TileFn {
    #[cfg(target_arch = "x86_64")]
    {
        if isa.avx512() && isa.vnni() {
            return super::x86::vnni_tile;
        }
        if isa.avx_vnni() {
            return super::x86::avx_vnni_tile;
        }
        if isa.avx2() {
            return super::x86::avx2_tile;
        }
    }
    let _ = isa;
    scalar::tile
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
    let nb = w.cols / f.block_quants();
    if !packable(w.ty, w.rows, w.cols) || w.data.len() != f.packed_len(w.rows, w.cols) {
        return Err(KernelError::BadLength {
            what: "packed weight bytes",
            expected: f.packed_len(w.rows, w.cols),
            got: w.data.len(),
        });
    }
    check_len("activations", n_tok * w.cols, x.len())?;
    check_len("output", n_tok * w.rows, out.len())?;
    if n_tok == 0 {
        return Ok(());
    }
    let acts = prepare(pool, &f, x, w.cols, n_tok, scratch)?;
    let gbytes = nb * f.group_block_bytes();
    let rows = w.rows;
    let out_ptr = crate::pool::SharedMut::new(out.as_mut_ptr());
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
