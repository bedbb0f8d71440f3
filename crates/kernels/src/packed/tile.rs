//! The floor every tile kernel stands on: the group and tile sizes, the
//! tile of outputs, the prepared activations, the prefetch hint and the
//! i16 pair operand. The drivers, the layouts and the dispatcher all name
//! these, so they live below all of them and name none of their siblings.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};

/// Rows per interleaved group: one 512-bit register of i32 lanes.
pub const GROUP: usize = 16;

/// The most tokens one tile takes: each unpacked block serves this many.
/// The AVX-512 kernels (32 registers) take eight; a second pass over a
/// group unpacks every block again, so at eight sequences a tile of four
/// paid for the whole model's unpacking twice a step.
pub const TILE: usize = 8;

/// The most tokens the AVX2 kernels (sixteen registers) take in one tile;
/// past that their running sums would leave the registers.
pub const NARROW_TILE: usize = 4;

/// One tile's outputs: per token, the sixteen rows of the group.
pub type Tile = [[f32; GROUP]; TILE];

/// The quantized activations of one product, with per-block values the
/// kernels need widened once: the scale `d`, for Q8_1 the `s`, and the
/// integer start `-offset * sum(y)` (per block, or per sub-block for
/// Q6_K, Q3_K and IQ4_XS) that turns the unsigned stored quants' sums into
/// the signed ones; for Q4_K/Q5_K and Q2_K, the sub-blocks' `sum(y)`
/// their mins multiply.
pub struct Acts<'a> {
    pub(super) qs: &'a [u8],
    pub(super) a_row: usize,
    pub(super) blk: usize,
    pub(super) qs_at: usize,
    pub(super) quants: usize,
    pub(super) nb: usize,
    pub(super) inits: usize,
    pub(super) d: &'a [f32],
    pub(super) s: &'a [f32],
    pub(super) init: &'a [i32],
    /// How many bytes ahead of the block it reads the first tile of a
    /// group (`t0 == 0`), the one that reads it from memory, asks for
    /// (0: no hint). A lone token outruns the hardware prefetcher on some
    /// cores and not others (see `super::tuning`); the later tiles of a
    /// prefill find the group in the caches.
    pub(super) ahead: usize,
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

/// Two i16 values in one i32 (`lo` in the low half), the broadcast operand
/// of a `vpmaddwd`/`vpdpwssd` pair product, on either instruction set.
/// Both must fit an i16.
#[inline(always)]
pub(super) fn pair16(lo: i32, hi: i32) -> i32 {
    debug_assert!(i16::try_from(lo).is_ok() && i16::try_from(hi).is_ok());
    ((lo as u32 & 0xFFFF) | ((hi as u32) << 16)) as i32
}

/// Asks for the three cache lines from `p` on (a hint: never faults).
///
/// # Safety
/// SSE; `p` need not be valid.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn prefetch(p: *const u8) {
    // SAFETY: prefetches are hints that never fault, whatever the address;
    // `wrapping_add` keeps the pointer arithmetic defined.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(128) as *const i8);
    }
}
