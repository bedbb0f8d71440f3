//! Matrix products over weights repacked at load time into an interleaved
//! layout (see [`layout`]): sixteen rows per group, so the SIMD kernel
//! produces sixteen outputs per register without horizontal sums and
//! reuses each unpacked block across a tile of tokens.
//!
//! Results are bit-identical to the row-wise scalar dot products on the
//! original rows: the integer block sums are exact and the float steps are
//! the same, in the same order (the tests compare every type, shape and
//! token count).

/// `f::<N, G…>(args)` for the tile height `N` (1 to [`TILE`]) that `nt`
/// names: the SIMD kernels are instantiated per height so that their
/// per-token loops unroll into registers.
macro_rules! by_height {
    ($nt:expr, $f:ident::<_ $(, $g:tt)*>($($a:expr),* $(,)?)) => {
        match $nt {
            4.. => $f::<4 $(, $g)*>($($a),*),
            3 => $f::<3 $(, $g)*>($($a),*),
            2 => $f::<2 $(, $g)*>($($a),*),
            _ => $f::<1 $(, $g)*>($($a),*),
        }
    };
}

/// `f::<NIB, FIFTH, MIN, G…>(args)` for the legacy format `fmt`: nibbles
/// or bytes, fifth bits, a minimum (`f::<.., G…>` names the trailing
/// generics).
macro_rules! by_legacy_format {
    ($fmt:expr, $f:ident $(::<.. $(, $g:tt)*>)? ($($a:expr),* $(,)?)) => {
        match ($fmt.nibbles, $fmt.fifth, $fmt.min) {
            (false, _, _) => $f::<false, false, false $($(, $g)*)?>($($a),*),
            (true, false, false) => $f::<true, false, false $($(, $g)*)?>($($a),*),
            (true, false, true) => $f::<true, false, true $($(, $g)*)?>($($a),*),
            (true, true, false) => $f::<true, true, false $($(, $g)*)?>($($a),*),
            (true, true, true) => $f::<true, true, true $($(, $g)*)?>($($a),*),
        }
    };
}

pub mod layout;
pub mod layout_k;
pub mod layout_k23;
pub mod scalar;
mod tile;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_k;
#[cfg(target_arch = "x86_64")]
mod avx2_k23;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_k;
#[cfg(target_arch = "x86_64")]
mod avx512_k23;

use std::ops::Range;

use minfer_gguf::GgmlType;

pub use layout::{dequantize_row, pack, pack_groups, packable, unpack_row, Format, Kind};
pub use tile::{Acts, Tile, GROUP, TILE};

use crate::blocks::{f16_to_f32, QK, QK_K};
use crate::error::{check_len, KernelError};
use crate::operand::{bytes_mut, quantize_rows, ActScratch, MatRef};
use crate::pool::ThreadPool;

/// A tile kernel: `nt` tokens (1 to [`TILE`]) from `t0` against one group
/// of `nb` blocks of format `f`. [`matmul`] runs a group's tiles in token
/// order, so the tile at `t0 == 0` is the one that reads the group from
/// memory; the SIMD kernels prefetch ahead in that tile only.
pub type TileFn =
    fn(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile;

/// The fastest tile kernel of `isa`: the AVX-512 VNNI one with AVX-512
/// VNNI, the AVX2 one fused by AVX-VNNI with that, the AVX2 one with AVX2
/// (FMA and F16C), the scalar reference otherwise.
pub(crate) fn tile_fn(isa: crate::Isa) -> TileFn {
    #[cfg(target_arch = "x86_64")]
    {
        if isa.avx512() && isa.vnni() {
            return vnni_tile;
        }
        if isa.avx_vnni() {
            return avx_vnni_tile;
        }
        if isa.avx2() {
            return avx2_tile;
        }
    }
    let _ = isa;
    scalar::tile
}

/// The bounds contract every SIMD tile kernel relies on.
fn check_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) {
    let n = (t0 + nt) * nb;
    assert!(group.len() >= nb * f.group_block_bytes() && nt <= TILE);
    assert!(acts.nb == nb && acts.quants == f.block_quants());
    assert!(acts.d.len() >= n && acts.init.len() >= n * acts.inits);
    assert!(!f.min || f.kind != Kind::Legacy || acts.s.len() >= n);
    assert!(acts.qs.len() >= (t0 + nt) * acts.a_row);
    assert!(acts.inits == inits_per_block(f));
}

#[cfg(target_arch = "x86_64")]
fn avx2_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    check_tile(f, nb, group, acts, t0, nt);
    // SAFETY: `tile_fn` hands this out only when the caller confirmed AVX2,
    // FMA and F16C; `check_tile` is the kernels' bounds contract.
    unsafe {
        match f.kind {
            Kind::Legacy => avx2::tile(f, nb, group, acts, t0, nt),
            Kind::Q6K => avx2_k::tile_q6k(nb, group, acts, t0, nt),
            Kind::Q45K => avx2_k::tile_q45k(f.fifth, nb, group, acts, t0, nt),
            Kind::IQ4XS => avx2_k23::tile_iq4xs(nb, group, acts, t0, nt),
            Kind::Q3K | Kind::Q2K => avx2_k23::tile_q23k(f.min, nb, group, acts, t0, nt),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn avx_vnni_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    check_tile(f, nb, group, acts, t0, nt);
    // SAFETY: `tile_fn` hands this out only for `SimdLevel::Avx2Vnni`,
    // which `Isa::new` grants only on a CPU with AVX2, FMA, F16C and
    // AVX-VNNI; `check_tile` is the kernels' bounds contract.
    unsafe {
        match f.kind {
            Kind::Legacy => avx2::tile_vnni(f, nb, group, acts, t0, nt),
            Kind::Q6K => avx2_k::tile_q6k_vnni(nb, group, acts, t0, nt),
            Kind::Q45K => avx2_k::tile_q45k_vnni(f.fifth, nb, group, acts, t0, nt),
            Kind::IQ4XS => avx2_k23::tile_iq4xs_vnni(nb, group, acts, t0, nt),
            Kind::Q3K | Kind::Q2K => avx2_k23::tile_q23k_vnni(f.min, nb, group, acts, t0, nt),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn vnni_tile(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile {
    check_tile(f, nb, group, acts, t0, nt);
    // SAFETY: `tile_fn` hands this out only when the caller confirmed AVX-512
    // F/BW/VNNI (with AVX2, FMA and F16C, implied on every such CPU);
    // `check_tile` is the kernels' bounds contract.
    unsafe {
        match f.kind {
            Kind::Legacy => avx512::tile(f, nb, group, acts, t0, nt),
            Kind::Q6K => avx512_k::tile_q6k(nb, group, acts, t0, nt),
            Kind::Q45K => avx512_k::tile_q45k(f.fifth, nb, group, acts, t0, nt),
            Kind::IQ4XS => avx512_k23::tile_iq4xs(nb, group, acts, t0, nt),
            Kind::Q3K | Kind::Q2K => avx512_k23::tile_q23k(f.min, nb, group, acts, t0, nt),
        }
    }
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
fn prepare<'s>(
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
