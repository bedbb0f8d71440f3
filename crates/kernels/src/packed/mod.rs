//! Matrix products over weights repacked at load time into an interleaved
//! layout (see [`layout`]): sixteen rows per group, so the SIMD kernel
//! produces sixteen outputs per register without horizontal sums and
//! reuses each unpacked block across a tile of tokens.
//!
//! Results are bit-identical to the row-wise scalar dot products on the
//! original rows: the integer block sums are exact and the float steps are
//! the same, in the same order (the tests compare every type, shape and
//! token count).

/// `f::<N, G…>(args)` for the tile height `N` (1 to [`NARROW_TILE`]) that
/// `nt` names: the SIMD kernels are instantiated per height so that their
/// per-token loops unroll into registers. The AVX2 kernels' form.
macro_rules! by_height {
    ($nt:expr, $f:ident::<_ $(, $g:tt)*>($($a:expr),* $(,)?)) => {
        match $nt {
            4 => $f::<4 $(, $g)*>($($a),*),
            3 => $f::<3 $(, $g)*>($($a),*),
            2 => $f::<2 $(, $g)*>($($a),*),
            1 => $f::<1 $(, $g)*>($($a),*),
            nt => unreachable!("a narrow tile of {nt} tokens"),
        }
    };
}

/// [`by_height`] for heights 1 to [`TILE`]: the AVX-512 kernels' form.
macro_rules! by_height_wide {
    ($nt:expr, $f:ident::<_ $(, $g:tt)*>($($a:expr),* $(,)?)) => {
        match $nt {
            8 => $f::<8 $(, $g)*>($($a),*),
            7 => $f::<7 $(, $g)*>($($a),*),
            6 => $f::<6 $(, $g)*>($($a),*),
            5 => $f::<5 $(, $g)*>($($a),*),
            _ => by_height!($nt, $f::<_ $(, $g)*>($($a),*)),
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
pub mod measure;
pub mod scalar;
mod tile;
pub mod tuning;

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
pub use tile::{Acts, Tile, GROUP, NARROW_TILE, TILE};
pub use tuning::{OneRow, TileTuning};

use crate::blocks::{f16_to_f32, QK, QK_K};
use crate::error::{check_len, KernelError};
use crate::operand::{quantize_rows, ActScratch, MatRef, Product};
use crate::pool::ThreadPool;

/// A tile kernel: `nt` tokens (1 to its height, at most [`TILE`]) from `t0` against one group
/// of `nb` blocks of format `f`. [`matmul`] runs a group's tiles in token
/// order, so the tile at `t0 == 0` is the one that reads the group from
/// memory; the SIMD kernels prefetch ahead in that tile only.
pub type TileFn =
    fn(f: &Format, nb: usize, group: &[u8], acts: &Acts, t0: usize, nt: usize) -> Tile;

/// The tile kernels of one instruction set, and how a lone token's
/// product reads each type of weights with them (see [`tuning`]).
#[derive(Clone, Copy, Debug)]
pub struct Tiles {
    /// The instruction set's own kernel ([`tile_fn`]).
    wide: TileFn,
    /// The AVX2 kernel beside an AVX-512 one, for a lone token where the
    /// tuning finds it faster.
    narrow: Option<TileFn>,
    /// Per weight type, the lone token's kernel and prefetch distance.
    tuning: TileTuning,
    /// The most tokens `wide` takes in one tile.
    height: usize,
    /// The instruction set, whose quantizers prepare the activations.
    isa: crate::Isa,
}

impl Tiles {
    /// The kernels of `isa` with `tuning`.
    pub(crate) fn new(isa: crate::Isa, tuning: TileTuning) -> Tiles {
        let (wide, height) = tile_fn(isa);
        Tiles {
            wide,
            narrow: narrow_tile_fn(isa),
            tuning,
            height,
            isa,
        }
    }

    /// The kernel, prefetch distance and tile height of a product of
    /// `n_tok` tokens over weights of type `ty`.
    fn for_product(&self, ty: GgmlType, n_tok: usize) -> (TileFn, usize, usize) {
        if n_tok != 1 {
            return (self.wide, tuning::DEFAULT_AHEAD, self.height);
        }
        let one = self.tuning.one_row(ty);
        let tile = match self.narrow {
            Some(narrow) if one.narrow => narrow,
            _ => self.wide,
        };
        (tile, one.ahead(), 1)
    }
}

/// The AVX2 kernel beside the AVX-512 VNNI one: it reads the same
/// interleaved layout and gives the same bits, and the AVX-512 level
/// implies AVX2, FMA and F16C.
fn narrow_tile_fn(isa: crate::Isa) -> Option<TileFn> {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() && isa.vnni() && isa.avx2() {
        return Some(avx2_tile);
    }
    let _ = isa;
    None
}

/// The fastest tile kernel of `isa` and the most tokens it takes in one
/// tile: the AVX-512 VNNI one with AVX-512 VNNI, the AVX2 one fused by
/// AVX-VNNI with that, the AVX2 one with AVX2 (FMA and F16C), the scalar
/// reference otherwise.
fn tile_fn(isa: crate::Isa) -> (TileFn, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa.avx512() && isa.vnni() {
            return (vnni_tile, TILE);
        }
        if isa.avx_vnni() {
            return (avx_vnni_tile, NARROW_TILE);
        }
        if isa.avx2() {
            return (avx2_tile, NARROW_TILE);
        }
    }
    let _ = isa;
    (scalar::tile, TILE)
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
    assert!(nt <= NARROW_TILE);
    // SAFETY: `tile_fn` and `narrow_tile_fn` hand this out only when the
    // caller confirmed AVX2, FMA and F16C (`Isa::avx2`); `check_tile` is the kernels' bounds contract.
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
    assert!(nt <= NARROW_TILE);
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
    tiles: &Tiles,
    pool: &ThreadPool,
    w: &MatRef,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    scratch: &mut ActScratch,
) -> Result<(), KernelError> {
    let mut one = [Some(Product {
        w: *w,
        x,
        n_tok,
        out,
    })];
    matmul_many(tiles, pool, &mut one, scratch)
}

/// One product over interleaved weights, checked and with its activations
/// prepared, ready to run beside others ([`run_parts`]).
pub(crate) struct Part<'a> {
    f: Format,
    /// The kernel for this product's tiles.
    tile: TileFn,
    /// The most tokens `tile` takes at once.
    height: usize,
    nb: usize,
    data: &'a [u8],
    acts: Acts<'a>,
    n_tok: usize,
    rows: usize,
    out: crate::pool::SharedMut<f32>,
}

/// The format of `w`, after checking that it is an interleaved matrix of
/// that format and that `x` and `out` fit it for `n_tok` rows.
fn check_product(p: &Product) -> Result<Format, KernelError> {
    let w = &p.w;
    let f = Format::of(w.ty).ok_or(KernelError::UnsupportedType {
        ty: w.ty,
        op: "interleaved product",
    })?;
    if !packable(w.ty, w.rows, w.cols) || w.data.len() != f.packed_len(w.rows, w.cols) {
        return Err(KernelError::BadLength {
            what: "packed weight bytes",
            expected: f.packed_len(w.rows, w.cols),
            got: w.data.len(),
        });
    }
    check_len("activations", p.n_tok * w.cols, p.x.len())?;
    check_len("output", p.n_tok * w.rows, p.out.len())?;
    Ok(f)
}

/// Every product of `products` (interleaved weights; `None` entries are
/// skipped) as one pool job, their activations side by side in `scratch`.
pub(crate) fn matmul_many(
    tiles: &Tiles,
    pool: &ThreadPool,
    products: &mut [Option<Product>],
    scratch: &mut ActScratch,
) -> Result<(), KernelError> {
    // First every check and the scratch's whole size, so that one growth
    // serves all and the products' activations can be carved from it.
    let mut need = [0usize; 3];
    for p in products.iter().flatten() {
        let f = check_product(p)?;
        for (n, s) in need.iter_mut().zip(act_sizes(&f, p.w.cols, p.n_tok)) {
            *n += s;
        }
    }
    let ActScratch { words, table, init } = scratch;
    if words.len() < need[0] {
        words.resize(need[0], 0);
    }
    if table.len() < need[1] {
        table.resize(need[1], 0.0);
    }
    if init.len() < need[2] {
        init.resize(need[2], 0);
    }
    let (mut words, mut table, mut init) = (&mut words[..], &mut table[..], &mut init[..]);
    let mut parts: [Option<Part>; crate::operand::MAX_PRODUCTS] = std::array::from_fn(|_| None);
    // The rows quantized so far: where they were read, in which format.
    type Key = (*const f32, usize, GgmlType);
    let mut done: [(Key, &[u8]); crate::operand::MAX_PRODUCTS] =
        [((std::ptr::null(), 0, GgmlType::F32), &[]); crate::operand::MAX_PRODUCTS];
    let mut n_done = 0;
    for (part, p) in parts.iter_mut().zip(products.iter_mut()) {
        let Some(p) = p.take() else { continue };
        let f = check_product(&p)?;
        let [nw, nt, ni] = act_sizes(&f, p.w.cols, p.n_tok);
        let (w, rest) = std::mem::take(&mut words).split_at_mut(nw);
        words = rest;
        let (t, rest) = std::mem::take(&mut table).split_at_mut(nt);
        table = rest;
        let (i, rest) = std::mem::take(&mut init).split_at_mut(ni);
        init = rest;
        if p.n_tok == 0 {
            continue;
        }
        let (tile, ahead, height) = tiles.for_product(p.w.ty, p.n_tok);
        // Products that read the same rows in the same format (a layer's
        // Q, K and V, its gate and up) share one quantization.
        let act = act_format(&f).0;
        let key = (p.x.as_ptr(), p.x.len(), act);
        let same = done[..n_done]
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, q)| q);
        let mut acts = prepare(
            pool,
            tiles.isa,
            &f,
            p.x,
            p.w.cols,
            p.n_tok,
            ActBufs {
                words: w,
                table: t,
                init: i,
                quantized: same,
            },
        )?;
        if same.is_none() && n_done < done.len() {
            done[n_done] = (key, acts.qs);
            n_done += 1;
        }
        acts.ahead = ahead;
        *part = Some(Part {
            f,
            tile,
            height,
            nb: p.w.cols / f.block_quants(),
            data: p.w.data,
            acts,
            n_tok: p.n_tok,
            rows: p.w.rows,
            out: crate::pool::SharedMut::new(p.out.as_mut_ptr()),
        });
    }
    run_parts(pool, &parts);
    Ok(())
}

/// Runs `parts` as one pool job: their groups are spread over the threads
/// together, so several small products wait once, not once each.
pub(crate) fn run_parts(pool: &ThreadPool, parts: &[Option<Part>]) {
    let groups = |p: &Option<Part>| p.as_ref().map_or(0, |p| p.rows / GROUP);
    let total: usize = parts.iter().map(groups).sum();
    pool.for_chunks(total, 1, 4, |range: Range<usize>| {
        // Group `i` of the job is group `i - first` of the part at `j`.
        let (mut j, mut first) = (0, 0);
        for i in range {
            while first + groups(&parts[j]) <= i {
                first += groups(&parts[j]);
                j += 1;
            }
            if let Some(p) = &parts[j] {
                run_group(p, i - first);
            }
        }
    });
}

/// Every tile of group `g` of one product, written to its outputs.
fn run_group(p: &Part, g: usize) {
    let gbytes = p.nb * p.f.group_block_bytes();
    let group = &p.data[g * gbytes..(g + 1) * gbytes];
    let mut t0 = 0;
    while t0 < p.n_tok {
        let nt = (p.n_tok - t0).min(p.height);
        let v = (p.tile)(&p.f, p.nb, group, &p.acts, t0, nt);
        for (t, v) in v.iter().enumerate().take(nt) {
            // SAFETY: each group of a part is run by one chunk of the job
            // alone, so rows `16g..16g + 16` of every token have one
            // writer; the offset is below `n_tok * rows`, the length
            // `part` checked.
            unsafe {
                let dst = p.out.get().add((t0 + t) * p.rows + g * GROUP);
                std::ptr::copy_nonoverlapping(v.as_ptr(), dst, GROUP);
            }
        }
        t0 += nt;
    }
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

/// The activation format of `f`'s products: the type, the offset of the
/// quants in its block, and the per-block table entries (2 with Q8_1's
/// `s`).
fn act_format(f: &Format) -> (GgmlType, usize, usize) {
    match (f.kind, f.min) {
        (Kind::Legacy, true) => (GgmlType::Q8_1, 4, 2),
        (Kind::Legacy, false) => (GgmlType::Q8_0, 2, 1),
        _ => (GgmlType::Q8_K, 4, 1),
    }
}

/// What [`prepare`] takes of a scratch for `n_tok` rows of `cols`: u64
/// words of quantized bytes, table entries and start values.
fn act_sizes(f: &Format, cols: usize, n_tok: usize) -> [usize; 3] {
    let (act, _, per) = act_format(f);
    let n = n_tok * (cols / f.block_quants());
    let bytes = n * act.type_size() as usize;
    [bytes.div_ceil(8), per * n, inits_per_block(f) * n]
}

/// One product's share of an [`ActScratch`], each part at least
/// [`act_sizes`] long.
struct ActBufs<'s> {
    words: &'s mut [u64],
    table: &'s mut [f32],
    init: &'s mut [i32],
    /// The same rows already quantized to this product's format for
    /// another product of the job, if any.
    quantized: Option<&'s [u8]>,
}

/// Quantizes the activations (Q8_0, Q8_1 for the types with a minimum,
/// Q8_K for the K-quants) into `bufs.words`, or takes them from
/// `bufs.quantized`, and fills the per-block tables in `bufs.table` and
/// `bufs.init`.
fn prepare<'s>(
    pool: &ThreadPool,
    isa: crate::Isa,
    f: &Format,
    x: &[f32],
    cols: usize,
    n_tok: usize,
    bufs: ActBufs<'s>,
) -> Result<Acts<'s>, KernelError> {
    let ActBufs {
        words,
        table,
        init,
        quantized,
    } = bufs;
    let (act, qs_at, per) = act_format(f);
    let inits = inits_per_block(f);
    let quants = f.block_quants();
    let blk = act.type_size() as usize;
    let (nb, a_row) = (cols / quants, cols / quants * blk);
    let qs: &'s [u8] = match quantized {
        Some(q) if q.len() == n_tok * a_row => q,
        _ => {
            let qs = &mut bytemuck::cast_slice_mut(words)[..n_tok * a_row];
            quantize_rows(pool, isa, act, x, cols, qs, a_row)?;
            qs
        }
    };
    let n = n_tok * nb;
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
        d: &d[..n],
        s: if per == 2 { &rest[..n] } else { &rest[..0] },
        init: &init[..inits * n],
        ahead: tuning::DEFAULT_AHEAD,
    })
}
