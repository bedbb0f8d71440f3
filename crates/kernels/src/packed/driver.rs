//! The one SIMD tile driver over the interleaved layout, generic over the
//! instruction set ([`Simd`]) and the quantization family ([`KQuant`] for
//! the K-quants and IQ4_XS, [`LegacyQuant`] for the 32-quant formats).
//!
//! The driver owns what every kernel shares: the walk over a group's
//! blocks, the running sums per register part (eight rows on AVX2, all
//! sixteen on AVX-512) and token, the legacy formats' four partial sums by
//! `b % 4` and their combine `(s0 + s2) + (s1 + s3)`, the prefill loop
//! orders that keep a tall tile's sums in registers, and the store. A
//! family's side, per instruction set, is the inner product of one block
//! (or sub-block) against the tile's activations and its float step.
//!
//! Everything is `#[inline(always)]`: the `#[target_feature]` entry points
//! (`super::x86`) instantiate it per instruction set, family and tile
//! height, so the intrinsics inline with those features.

use super::acts::Acts;
use super::layout::Format;
use super::shape::GROUP;
use super::shape::{Tile, TILE};

/// How far ahead the kernels ask for weight bytes in the first tile of a
/// group (`t0 == 0`), the one that reads it from memory: the kernel
/// outruns the hardware prefetcher (measured on Zen 5, one token, Q6_K:
/// 18 GB/s from memory without, 34 GB/s with, 70 GB/s from cache), and so
/// does a tile of four tokens in a decode step of several sequences
/// (Q4_K and Q6_K twice as fast with the hint, `tile_levels`). The later
/// tiles of a prefill find the group in the caches and skip the hint.
pub(super) const PREFETCH: usize = 4096;

/// An instruction set's side of the driver: its float register of one
/// register part's rows and the few steps the driver takes on it.
pub(super) trait Simd {
    /// A float register of one part's rows (`GROUP / P` lanes).
    type F: Copy;
    /// Whether prefill heights (three tokens and more) run one register
    /// part at a time, so that fewer running sums are live beside the
    /// quant registers (AVX2's sixteen registers need it).
    const SPLIT: bool;

    /// A register of zeros.
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn zero() -> Self::F;

    /// `a + b`, lane by lane.
    ///
    /// # Safety
    /// The instruction set's features.
    unsafe fn add(a: Self::F, b: Self::F) -> Self::F;

    /// Stores `v` to `dst`.
    ///
    /// # Safety
    /// The instruction set's features; `dst` has room for one register.
    unsafe fn store(dst: *mut f32, v: Self::F);

    /// Asks for the cache line at `p` (a hint: never faults).
    ///
    /// # Safety
    /// SSE; `p` need not be valid.
    unsafe fn hint(p: *const u8);

    /// The legacy formats' prefetch of one group-block of `bytes` at `gb`,
    /// [`PREFETCH`] ahead, for a tile of `T` tokens from `t0`.
    ///
    /// # Safety
    /// SSE; `gb` need not be valid.
    unsafe fn block_hint<const T: usize>(gb: *const u8, bytes: usize, t0: usize);
}

/// Where a family's step reads: the group-block at `gb`, which is block
/// `b` of the group, and the activations of the tile's tokens from `t0`.
#[derive(Clone, Copy)]
pub(super) struct Block<'a> {
    /// The group-block.
    pub gb: *const u8,
    /// The product's activations.
    pub acts: &'a Acts<'a>,
    /// The tile's first token.
    pub t0: usize,
    /// The block's index in the group.
    pub b: usize,
}

/// A K-quant family (or IQ4_XS) as one instruction set computes it: per
/// super-block, integer sums over its sub-blocks, then a float step.
pub(super) trait KQuant<S: Simd> {
    /// Bytes per group-block.
    const GROUP_BLOCK: usize;
    /// Whether the family takes [`Simd::SPLIT`]'s loop order at prefill
    /// heights.
    const SPLIT: bool = true;
    /// The integer sums of one register part and token.
    type Sum: Copy;

    /// The integer sums of register parts `h0..h0 + N` of block `b` (at
    /// `gb`) for each token of the tile.
    ///
    /// # Safety
    /// The instruction set's features; `gb` points at a whole group-block,
    /// `b` is below the group's block count, `acts` covers tokens
    /// `t0..t0 + T` and `h0 + N` is at most the register part count.
    unsafe fn sums<const T: usize, const N: usize>(at: Block, h0: usize) -> [[Self::Sum; T]; N];

    /// Part `h`'s float step of block `b` with its sums into `acc`.
    ///
    /// # Safety
    /// As [`KQuant::sums`], for part `h`.
    unsafe fn finish<const T: usize>(
        at: Block,
        h: usize,
        isum: &[Self::Sum; T],
        acc: &mut [S::F; T],
    );
}

/// A legacy (32-quant) format as one instruction set computes it.
pub(super) trait LegacyQuant<S: Simd> {
    /// Register part `h` of block `b` (at `gb`) for every token of the
    /// tile, added to running sums `acc` (one per token).
    ///
    /// # Safety
    /// The instruction set's features; `gb` points at a whole group-block
    /// of `f`, `b` is below the group's block count, `acts` covers tokens
    /// `t0..t0 + T` and `h` is below the register part count.
    unsafe fn part<const T: usize>(f: &Format, at: Block, h: usize, acc: &mut [S::F; T]);
}

/// Two i16 values in one i32 (`lo` in the low half), the broadcast operand
/// of a `vpmaddwd` pair product. Both must fit an i16.
#[inline(always)]
pub(super) fn pair16(lo: i32, hi: i32) -> i32 {
    debug_assert!(i16::try_from(lo).is_ok() && i16::try_from(hi).is_ok());
    ((lo as u32 & 0xFFFF) | ((hi as u32) << 16)) as i32
}

/// Asks for the three cache lines from `p` on (a hint: never faults).
///
/// # Safety
/// SSE; `p` need not be valid.
#[inline(always)]
pub(super) unsafe fn prefetch3<S: Simd>(p: *const u8) {
    // SAFETY: prefetches are hints that never fault, whatever the address;
    // `wrapping_add` keeps the pointer arithmetic defined.
    unsafe {
        S::hint(p);
        S::hint(p.wrapping_add(64));
        S::hint(p.wrapping_add(128));
    }
}

/// Stores running sums (one per register part and token) into a tile.
///
/// # Safety
/// The instruction set's features; `P` parts cover the group's rows.
#[inline(always)]
unsafe fn store<S: Simd, const T: usize, const P: usize>(acc: &[[S::F; T]; P]) -> Tile {
    let mut out = [[0.0f32; GROUP]; TILE];
    for (h, acc) in acc.iter().enumerate() {
        for (out, acc) in out.iter_mut().zip(acc) {
            // SAFETY: `out` has sixteen lanes; part `h` writes its
            // `GROUP / P` at `GROUP / P * h`.
            unsafe { S::store(out.as_mut_ptr().add(GROUP / P * h), *acc) };
        }
    }
    out
}

/// `T` tokens from `t0` against one group of `nb` super-blocks of `K`, in
/// `P` register parts.
///
/// Up to two tokens, all parts share the sub-block loop; from three (where
/// both [`Simd::SPLIT`] and [`KQuant::SPLIT`] ask for it), each part runs
/// it alone, so that only one running sum per token is live beside the
/// quant registers.
///
/// # Safety
/// The instruction set's features; `group` holds `nb` group-blocks of `K`
/// and `acts` covers tokens `t0..t0 + T`.
#[inline(always)]
pub(super) unsafe fn tile_k<const T: usize, const P: usize, S: Simd, K: KQuant<S>>(
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: the CPU features and bounds are the caller's contract; every
    // group-block read lies at `b * GROUP_BLOCK` with `b < nb`, and the
    // family gets parts below `P`.
    unsafe {
        debug_assert!(group.len() >= nb * K::GROUP_BLOCK);
        let mut acc = [[S::zero(); T]; P];
        for b in 0..nb {
            let gb = group.as_ptr().add(b * K::GROUP_BLOCK);
            if T > 2 && S::SPLIT && K::SPLIT {
                for (h, acc) in acc.iter_mut().enumerate() {
                    let [isum] = K::sums::<T, 1>(Block { gb, acts, t0, b }, h);
                    K::finish::<T>(Block { gb, acts, t0, b }, h, &isum, acc);
                }
            } else {
                let isum = K::sums::<T, P>(Block { gb, acts, t0, b }, 0);
                for (h, (isum, acc)) in isum.iter().zip(&mut acc).enumerate() {
                    K::finish::<T>(Block { gb, acts, t0, b }, h, isum, acc);
                }
            }
        }
        store::<S, T, P>(&acc)
    }
}

/// One legacy block (every register part) for every token of the tile.
///
/// # Safety
/// As [`LegacyQuant::part`], for every part.
#[inline(always)]
unsafe fn legacy_block<const T: usize, const P: usize, S: Simd, L: LegacyQuant<S>>(
    f: &Format,
    gb: *const u8,
    acts: &Acts,
    t0: usize,
    b: usize,
    acc: &mut [[S::F; T]; P],
) {
    // SAFETY: the caller's contract, for each part.
    unsafe {
        S::block_hint::<T>(gb, f.group_block_bytes(), t0);
        for (h, acc) in acc.iter_mut().enumerate() {
            L::part::<T>(f, Block { gb, acts, t0, b }, h, acc);
        }
    }
}

/// `T` tokens from `t0` against one group of `nb` blocks of legacy format
/// `f`, in `P` register parts: blocks into four running sums by `b % 4`,
/// combined as the reference's `(s0 + s2) + (s1 + s3)`.
///
/// # Safety
/// The instruction set's features; `group` holds `nb` group-blocks of `f`,
/// and `acts` covers tokens `t0..t0 + T` with `nb` blocks each.
#[inline(always)]
pub(super) unsafe fn tile_legacy<const T: usize, const P: usize, S: Simd, L: LegacyQuant<S>>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    if S::SPLIT && T > 2 {
        // SAFETY: the same contract.
        return unsafe { tile_by_partial::<T, P, S, L>(f, nb, group, acts, t0) };
    }
    // SAFETY: as the function's contract; `legacy_block` gets `b < nb` and
    // the group-block at `b * gbytes`, inside `group` (`nb * gbytes`
    // bytes).
    unsafe {
        let gbytes = f.group_block_bytes();
        debug_assert!(group.len() >= nb * gbytes);
        let base = group.as_ptr();
        let z = [[S::zero(); T]; P];
        let mut acc = [z; 4];
        // Plain calls, no closure: a closure would not inherit the entry
        // point's target features and its intrinsics would not inline.
        let mut b = 0;
        while b + 4 <= nb {
            let [a0, a1, a2, a3] = &mut acc;
            legacy_block::<T, P, S, L>(f, base.add(b * gbytes), acts, t0, b, a0);
            legacy_block::<T, P, S, L>(f, base.add((b + 1) * gbytes), acts, t0, b + 1, a1);
            legacy_block::<T, P, S, L>(f, base.add((b + 2) * gbytes), acts, t0, b + 2, a2);
            legacy_block::<T, P, S, L>(f, base.add((b + 3) * gbytes), acts, t0, b + 3, a3);
            b += 4;
        }
        for (s, acc) in acc.iter_mut().enumerate().take(nb - b) {
            legacy_block::<T, P, S, L>(f, base.add((b + s) * gbytes), acts, t0, b + s, acc);
        }
        // The reference's combine: `(s0 + s2) + (s1 + s3)`.
        let mut sum = [[S::zero(); T]; P];
        for (h, sum) in sum.iter_mut().enumerate() {
            for (t, sum) in sum.iter_mut().enumerate() {
                *sum = S::add(
                    S::add(acc[0][h][t], acc[2][h][t]),
                    S::add(acc[1][h][t], acc[3][h][t]),
                );
            }
        }
        store::<S, T, P>(&sum)
    }
}

/// [`tile_legacy`] for prefill heights, with the same sums in the same
/// order but another loop order: part by part, and within a part partial
/// sum by partial sum (blocks `p, p + 4, …` add into partial `p`), so that
/// only `T` running sums are live beside the eight quant registers. Taking
/// all four partials at once needs `8 T` sums, more than AVX2's sixteen
/// registers, and the spilled sums cost a load and a store per block and
/// token. The blocks are then read with a stride of four, all from the
/// caches, since a prefill tile re-reads a group the tile before it read.
///
/// # Safety
/// As [`tile_legacy`].
#[inline(always)]
unsafe fn tile_by_partial<const T: usize, const P: usize, S: Simd, L: LegacyQuant<S>>(
    f: &Format,
    nb: usize,
    group: &[u8],
    acts: &Acts,
    t0: usize,
) -> Tile {
    // SAFETY: as `tile_legacy`: `part` gets `b < nb`, `h < P` and the
    // group-block at `b * gbytes`, inside `group`.
    unsafe {
        let gbytes = f.group_block_bytes();
        debug_assert!(group.len() >= nb * gbytes);
        let base = group.as_ptr();
        let mut sum = [[S::zero(); T]; P];
        // The first tile of a group reads it from memory, in an order the
        // hardware prefetcher does not follow: while its first part runs,
        // fetch the next group (which the same thread usually takes next)
        // block by block. Later tiles find both in the caches.
        let ahead = t0 == 0;
        let next = base.wrapping_add(nb * gbytes);
        for (h, sum) in sum.iter_mut().enumerate() {
            let mut part = [[S::zero(); T]; 4];
            for (p, acc) in part.iter_mut().enumerate() {
                let mut b = p;
                while b < nb {
                    if ahead && h == 0 {
                        let mut line = 0;
                        while line < gbytes {
                            S::hint(next.wrapping_add(b * gbytes + line));
                            line += 64;
                        }
                    }
                    L::part::<T>(
                        f,
                        Block {
                            gb: base.add(b * gbytes),
                            acts,
                            t0,
                            b,
                        },
                        h,
                        acc,
                    );
                    b += 4;
                }
            }
            // The reference's combine: `(s0 + s2) + (s1 + s3)`.
            for (t, sum) in sum.iter_mut().enumerate() {
                *sum = S::add(
                    S::add(part[0][t], part[2][t]),
                    S::add(part[1][t], part[3][t]),
                );
            }
        }
        store::<S, T, P>(&sum)
    }
}
