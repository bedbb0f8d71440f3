//! The on-disk block layouts of the ggml quantized types.
//!
//! Every weight block is `#[repr(C)]` with byte-array fields only, so its
//! alignment is 1 and any byte slice of the right length can be viewed as a
//! slice of blocks without copying. Half-precision scales are kept as raw
//! little-endian bits (`[u8; 2]`) and converted where they are used.
//! `BlockQ8K` is an activation format that only this engine creates, so it
//! keeps native `f32`/`i16` fields.

use bytemuck::{Pod, Zeroable};

/// Elements per block of the legacy types (Q4_0 … Q8_1, IQ4_NL, MXFP4).
pub const QK: usize = 32;
/// Elements per super-block of the K-quants and the IQ types other than
/// IQ4_NL.
pub const QK_K: usize = 256;

/// Raw f16 bits as stored in a block.
pub type F16Bits = [u8; 2];

macro_rules! block {
    ($(#[$m:meta])* $name:ident, $size:expr, { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Pod, Zeroable)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
        const _: () = assert!(std::mem::size_of::<$name>() == $size);
    };
}

block! {
    /// 4-bit, scale only: `x = d * (q - 8)`.
    BlockQ4_0, 18, {
        /// Scale (f16).
        d: F16Bits,
        /// Byte `j` holds quant `j` in its low nibble and quant `j + 16` in
        /// its high nibble.
        qs: [u8; QK / 2],
    }
}

block! {
    /// 4-bit with minimum: `x = d * q + m`.
    BlockQ4_1, 20, {
        /// Scale (f16).
        d: F16Bits,
        /// Minimum (f16), added to every element.
        m: F16Bits,
        /// Quants, packed as in [`BlockQ4_0`].
        qs: [u8; QK / 2],
    }
}

block! {
    /// 5-bit, scale only; `qh` holds the fifth bits: `x = d * (q - 16)`.
    BlockQ5_0, 22, {
        /// Scale (f16).
        d: F16Bits,
        /// Fifth bit of quant `j` at bit `j` of this little-endian `u32`.
        qh: [u8; 4],
        /// Low four bits of the quants, packed as in [`BlockQ4_0`].
        qs: [u8; QK / 2],
    }
}

block! {
    /// 5-bit with minimum: `x = d * q + m`.
    BlockQ5_1, 24, {
        /// Scale (f16).
        d: F16Bits,
        /// Minimum (f16), added to every element.
        m: F16Bits,
        /// Fifth bits, as in [`BlockQ5_0`].
        qh: [u8; 4],
        /// Low four bits, as in [`BlockQ5_0`].
        qs: [u8; QK / 2],
    }
}

block! {
    /// 8-bit, scale only. Also the activation format of the legacy types.
    BlockQ8_0, 34, {
        /// Scale (f16).
        d: F16Bits,
        /// Signed quants, one per element.
        qs: [i8; QK],
    }
}

block! {
    /// 8-bit with `s = d * sum(qs)`: the activation format for Q4_1/Q5_1.
    BlockQ8_1, 36, {
        /// Scale (f16).
        d: F16Bits,
        /// `d * sum(qs)` (f16), which carries the weights' minimum term.
        s: F16Bits,
        /// Signed quants, one per element.
        qs: [i8; QK],
    }
}

block! {
    /// 2-bit K-quant: 16 sub-blocks of 16, 4-bit scales and mins.
    BlockQ2K, 84, {
        /// Per sub-block: the scale in the low nibble, the min in the high.
        scales: [u8; QK_K / 16],
        /// 2-bit quants, four per byte; the order is that of
        /// [`dequantize_q2_k`](crate::dequant::dequantize_q2_k).
        qs: [u8; QK_K / 4],
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
        /// Factor of the sub-block mins (f16).
        dmin: F16Bits,
    }
}

block! {
    /// 3-bit K-quant: 16 sub-blocks of 16, 6-bit scales packed in 12 bytes.
    BlockQ3K, 110, {
        /// Third bit of each quant; a clear bit subtracts 4 from the quant.
        hmask: [u8; QK_K / 8],
        /// Low two bits of the quants, four per byte.
        qs: [u8; QK_K / 4],
        /// Sixteen 6-bit sub-block scales, biased by 32.
        scales: [u8; 12],
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
    }
}

block! {
    /// 4-bit K-quant: 8 sub-blocks of 32, 6-bit scales and mins in 12 bytes.
    BlockQ4K, 144, {
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
        /// Factor of the sub-block mins (f16).
        dmin: F16Bits,
        /// Eight 6-bit scales and eight 6-bit mins; see
        /// [`k_scale_min`].
        scales: [u8; 12],
        /// Quants, two per byte: each 32-byte run holds one sub-block in
        /// its low nibbles and the next in its high nibbles.
        qs: [u8; QK_K / 2],
    }
}

block! {
    /// 5-bit K-quant: as Q4_K plus one high bit per weight.
    BlockQ5K, 176, {
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
        /// Factor of the sub-block mins (f16).
        dmin: F16Bits,
        /// Scales and mins, as in [`BlockQ4K`].
        scales: [u8; 12],
        /// Fifth bits: bit `2c` of byte `l` for element `l` of 64-element
        /// chunk `c`, bit `2c + 1` for element `l + 32`.
        qh: [u8; QK_K / 8],
        /// Low four bits, packed as in [`BlockQ4K`].
        qs: [u8; QK_K / 2],
    }
}

block! {
    /// 6-bit K-quant: 16 sub-blocks of 16 with signed 8-bit scales.
    BlockQ6K, 210, {
        /// Low four bits of the quants, two per byte.
        ql: [u8; QK_K / 2],
        /// High two bits of the quants, four per byte.
        qh: [u8; QK_K / 4],
        /// Signed scale of each sub-block.
        scales: [i8; QK_K / 16],
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
    }
}

block! {
    /// Non-linear 4-bit with a 16-entry codebook, blocks of 32.
    BlockIQ4NL, 18, {
        /// Scale (f16).
        d: F16Bits,
        /// Indices into [`KVALUES_IQ4NL`], packed as in [`BlockQ4_0`].
        qs: [u8; QK / 2],
    }
}

block! {
    /// MXFP4 (OCP microscaling FP4), blocks of 32: 4-bit e2m1 values with a
    /// shared power-of-two scale. ggml's `block_mxfp4`.
    BlockMXFP4, 17, {
        /// The E8M0 scale exponent; see [`e8m0_to_f32_half`].
        e: u8,
        /// Indices into [`KVALUES_MXFP4`], packed as in [`BlockQ4_0`].
        qs: [u8; QK / 2],
    }
}

block! {
    /// Non-linear 4-bit super-blocks with 6-bit sub-block scales.
    BlockIQ4XS, 136, {
        /// Factor of the sub-block scales (f16).
        d: F16Bits,
        /// High two bits of the eight sub-block scales (little-endian
        /// `u16`, two bits per sub-block).
        scales_h: [u8; 2],
        /// Low four bits of the sub-block scales, two per byte.
        scales_l: [u8; QK_K / 64],
        /// Codebook indices, 16 bytes per sub-block of 32, packed as in
        /// [`BlockIQ4NL`].
        qs: [u8; QK_K / 2],
    }
}

// The IQ2/IQ3/IQ1 super-blocks below index the codebooks of
// `crate::iq_grids`: each group of 8 (or 4) weights is one grid entry, and a
// sub-block of 32 weights has one scale. ggml declares some fields as
// `uint16_t` arrays; here they are the same bytes, read little-endian, so
// that every block keeps alignment 1.

block! {
    /// IQ2_XXS, 2.0625 bits per weight: per sub-block of 32, four 8-bit
    /// indices into [`IQ2XXS_GRID`](crate::iq_grids::IQ2XXS_GRID), four
    /// 7-bit sign codes and a 4-bit scale.
    BlockIQ2XXS, 66, {
        /// Scale (f16).
        d: F16Bits,
        /// Per sub-block `ib`, 8 bytes (ggml's `uint16_t qs[32]`): bytes
        /// `8ib..8ib + 4` are the grid indices of its four groups of 8;
        /// bytes `8ib + 4..8ib + 8`, a little-endian `u32`, hold the four
        /// 7-bit sign codes (bits `7l..7l + 7`, into
        /// [`KSIGNS_IQ2XS`](crate::iq_grids::KSIGNS_IQ2XS)) and the scale
        /// in bits 28..32.
        qs: [u8; 64],
    }
}

block! {
    /// IQ2_XS, 2.3125 bits per weight: per group of 8 a 9-bit index into
    /// [`IQ2XS_GRID`](crate::iq_grids::IQ2XS_GRID) and a 7-bit sign code; a
    /// 4-bit scale per 16 weights.
    BlockIQ2XS, 74, {
        /// Scale (f16).
        d: F16Bits,
        /// 32 little-endian `u16`, one per group of 8: the grid index in
        /// the low 9 bits, the sign code in the high 7.
        qs: [u8; 64],
        /// Per sub-block of 32: the scale of its first 16 weights in the
        /// low nibble, of its last 16 in the high nibble.
        scales: [u8; 8],
    }
}

block! {
    /// IQ2_S, 2.5625 bits per weight: per group of 8 a 10-bit index into
    /// [`IQ2S_GRID`](crate::iq_grids::IQ2S_GRID) and 8 explicit sign bits; a
    /// 4-bit scale per 16 weights.
    BlockIQ2S, 82, {
        /// Scale (f16).
        d: F16Bits,
        /// Bytes `0..32`: the low 8 bits of each group's grid index. Bytes
        /// `32..64`: each group's sign byte (bit `j` negates weight `j`).
        qs: [u8; 64],
        /// Per sub-block of 32: bits `2l..2l + 2` are bits 8..10 of the
        /// grid index of its group `l`.
        qh: [u8; 8],
        /// Per sub-block of 32: the scale of its first 16 weights in the
        /// low nibble, of its last 16 in the high nibble.
        scales: [u8; 8],
    }
}

block! {
    /// IQ3_XXS, 3.0625 bits per weight: per group of 4 an 8-bit index into
    /// [`IQ3XXS_GRID`](crate::iq_grids::IQ3XXS_GRID); per sub-block of 32
    /// four 7-bit sign codes and a 4-bit scale.
    BlockIQ3XXS, 98, {
        /// Scale (f16).
        d: F16Bits,
        /// Bytes `0..64`: the grid indices, 8 per sub-block. Bytes
        /// `64..96`: per sub-block `ib`, a little-endian `u32` at
        /// `64 + 4ib` with the four 7-bit sign codes (bits `7l..7l + 7`)
        /// and the scale in bits 28..32.
        qs: [u8; 96],
    }
}

block! {
    /// IQ3_S, 3.4375 bits per weight: per group of 4 a 9-bit index into
    /// [`IQ3S_GRID`](crate::iq_grids::IQ3S_GRID), explicit sign bits, and a
    /// 4-bit scale per sub-block of 32.
    BlockIQ3S, 110, {
        /// Scale (f16).
        d: F16Bits,
        /// The low 8 bits of the grid indices, 8 per sub-block.
        qs: [u8; 64],
        /// Per sub-block of 32: bit `k` is bit 8 of the index of its
        /// group `k`.
        qh: [u8; 8],
        /// One bit per weight, in order (bit `j` of byte `i` negates
        /// weight `8i + j`).
        signs: [u8; 32],
        /// Per pair of sub-blocks: the first one's scale in the low nibble,
        /// the second one's in the high nibble.
        scales: [u8; 4],
    }
}

block! {
    /// IQ1_S, 1.5625 bits per weight: per group of 8 an 11-bit index into
    /// [`IQ1S_GRID`](crate::iq_grids::IQ1S_GRID) (values -1, 0, 1), per
    /// sub-block of 32 a 3-bit scale and the sign of a ±1/8 shift.
    BlockIQ1S, 50, {
        /// Scale (f16).
        d: F16Bits,
        /// The low 8 bits of each group's grid index.
        qs: [u8; 32],
        /// 8 little-endian `u16`, one per sub-block: bits `3l..3l + 3` are
        /// bits 8..11 of the index of its group `l`, bits 12..15 the scale,
        /// bit 15 set for a shift of -1/8 (clear: +1/8).
        qh: [u8; 16],
    }
}

/// 8-bit activation super-block for the K-quant dot products. `bsums` holds
/// the sums of each group of 16 quants, which the K-quant dots use to apply
/// the sub-block minimums without touching the quants again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale.
    pub d: f32,
    /// Quants.
    pub qs: [i8; QK_K],
    /// Sums of each group of 16 quants.
    pub bsums: [i16; QK_K / 16],
}
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == 292);

/// The 16 values of the IQ4_NL / IQ4_XS codebook.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The 16 values of MXFP4: the e2m1 values doubled, so that they are
/// integers (the scale, [`e8m0_to_f32_half`], is halved to match).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The 32 codebook values of a block of 16 nibble pairs (IQ4_NL's and
/// MXFP4's layout): value `j` from the low nibble of byte `j`, value
/// `j + 16` from its high nibble.
pub fn codebook_values(qs: &[u8; 16], book: &[i8; 16]) -> [i8; 32] {
    let mut q = [0i8; 32];
    for (j, &b) in qs.iter().enumerate() {
        q[j] = book[(b & 0x0F) as usize];
        q[j + 16] = book[(b >> 4) as usize];
    }
    q
}

/// Half the value of an E8M0 scale (`2^(e - 128)`), as ggml's
/// `GGML_E8M0_TO_FP32_HALF`: the halving compensates for
/// [`KVALUES_MXFP4`] being doubled. Exact for every `e`: `e` 0 and 1 give
/// the subnormals 2^-128 and 2^-127, 255 gives 2^127 (ggml has no NaN
/// here either).
#[inline(always)]
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e - 1) as u32) << 23
    };
    f32::from_bits(bits)
}

/// Converts raw f16 bits to f32 (exact).
#[inline(always)]
pub fn f16_to_f32(bits: F16Bits) -> f32 {
    half::f16::from_bits(u16::from_le_bytes(bits)).to_f32()
}

/// Converts f32 to raw f16 bits, rounding to nearest even as ggml does.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> F16Bits {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

/// Views a byte slice as blocks. `None` when the length is not a whole
/// number of blocks (or, for `BlockQ8K`, the slice is misaligned).
pub fn as_blocks<T: Pod>(bytes: &[u8]) -> Option<&[T]> {
    bytemuck::try_cast_slice(bytes).ok()
}

/// Mutable version of [`as_blocks`].
pub fn as_blocks_mut<T: Pod>(bytes: &mut [u8]) -> Option<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes).ok()
}

/// The little-endian `u32` at byte `at` of `b` (a field of a block that
/// ggml declares as wider integers; callers pass offsets that leave four
/// bytes).
#[inline(always)]
pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian `u16` at byte `at` of `b` (see [`le32`]).
#[inline(always)]
pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Unpacks the 6-bit scale and min of sub-block `j` (0..8) of Q4_K/Q5_K.
#[inline(always)]
pub fn k_scale_min(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}
