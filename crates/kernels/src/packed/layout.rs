//! The interleaved layout: weight rows regrouped sixteen at a time so that
//! one 512-bit register holds the same four quants of sixteen rows.
//!
//! With that layout a byte dot product (`vpdpbusd`) against four
//! activation bytes broadcast to every lane yields sixteen rows' partial
//! sums at once, already in separate lanes: the per-block sums need no
//! horizontal reduction, and each activation load serves sixteen rows.
//! The layout keeps the source's bit density (same byte count), so decode,
//! which streams every weight byte, reads no more than before.
//!
//! A group of sixteen rows stores its blocks one after another; block `b`
//! of group `g` starts at byte `(g * nb + b) * group_block_bytes`. Inside,
//! with `k` in `0..8` naming quants `4k..4k + 4` of every row:
//!
//! - quants: for the 4-bit and 5-bit types, four 64-byte chunks, chunk `c`
//!   holding bytes `4c..4c + 4` of each row's `qs` (row `r` at `4r`); their
//!   low nibbles are quants `4c..4c + 4` and the high nibbles quants
//!   `16 + 4c..16 + 4c + 4`. For Q8_0, eight 64-byte chunks of four quants
//!   per row, each quant stored as `q + 128` (an unsigned byte, which is
//!   what `vpdpbusd` multiplies).
//!   IQ4_NL and MXFP4 are laid out as Q4_0; their nibbles index their
//!   codebooks.
//! - Q5_0/Q5_1 fifth bits: one little-endian `u32` per row, with the fifth
//!   bit of quant `4k + j` at bit `k` of byte `j`, so a single shift brings
//!   the bits of quants `4k..4k + 4` to bit 4 of their own bytes.
//! - the sixteen `d` (f16; for MXFP4 its sixteen E8M0 scale bytes, kept
//!   as bytes so that the layout stays the file's size), then for
//!   Q4_1/Q5_1 the sixteen `m` (f16).

use minfer_gguf::GgmlType;

use crate::blocks::*;
use crate::error::KernelError;

pub use super::tile::GROUP;

/// The family of a packed format: the legacy 32-quant blocks described
/// here, or the K-quants' super-blocks (see [`super::layout_k`] and
/// [`super::layout_k23`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4.
    Legacy,
    /// Q6_K.
    Q6K,
    /// Q4_K and Q5_K (`fifth` tells them apart).
    Q45K,
    /// IQ4_XS (see [`super::layout_k23`]).
    IQ4XS,
    /// Q3_K (see [`super::layout_k23`]).
    Q3K,
    /// Q2_K (see [`super::layout_k23`]).
    Q2K,
}

/// Where the parts of one interleaved group-block lie, per weight type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// The weight type.
    pub ty: GgmlType,
    /// Its family.
    pub kind: Kind,
    /// Quants stored as nibbles (two per byte) rather than bytes.
    pub nibbles: bool,
    /// Fifth bits present (Q5_0, Q5_1).
    pub fifth: bool,
    /// A per-block minimum `m` present (Q4_1, Q5_1).
    pub min: bool,
    /// What the stored unsigned quants exceed the signed ones by (0 for
    /// the types with a minimum, whose quants are unsigned already). For
    /// IQ4_NL and IQ4_XS, what the kernels that take unsigned bytes add to
    /// the codebook values (128); the activations' integer start
    /// (`-offset * sum(y)`) takes it back out.
    pub offset: i32,
    /// The nibbles index a codebook ([`Format::book`]) instead of being
    /// the quants themselves; laid out as Q4_0's.
    pub codebook: bool,
    /// The block scales are MXFP4's E8M0 bytes (one byte each, read as
    /// [`e8m0_to_f32_half`]) rather than f16.
    pub e8m0: bool,
}

impl Format {
    /// The format of `ty`, when the layout has one.
    pub fn of(ty: GgmlType) -> Option<Format> {
        use GgmlType::*;
        let f = |nibbles, fifth, min, offset| Format {
            ty,
            kind: Kind::Legacy,
            nibbles,
            fifth,
            min,
            offset,
            codebook: false,
            e8m0: false,
        };
        Some(match ty {
            Q4_0 => f(true, false, false, 8),
            Q4_1 => f(true, false, true, 0),
            Q5_0 => f(true, true, false, 16),
            Q5_1 => f(true, true, true, 0),
            Q8_0 => f(false, false, false, 128),
            IQ4_NL => Format {
                codebook: true,
                ..f(true, false, false, 128)
            },
            MXFP4 => Format {
                codebook: true,
                e8m0: true,
                ..f(true, false, false, 128)
            },
            Q6_K => Format {
                kind: Kind::Q6K,
                ..f(false, false, false, 32)
            },
            Q4_K => Format {
                kind: Kind::Q45K,
                ..f(true, false, true, 0)
            },
            Q5_K => Format {
                kind: Kind::Q45K,
                ..f(true, true, true, 0)
            },
            IQ4_XS => Format {
                kind: Kind::IQ4XS,
                codebook: true,
                ..f(true, false, false, 128)
            },
            Q3_K => Format {
                kind: Kind::Q3K,
                ..f(false, false, false, 4)
            },
            Q2_K => Format {
                kind: Kind::Q2K,
                ..f(false, false, true, 0)
            },
            _ => return None,
        })
    }

    /// Bytes of the quant chunks.
    pub const fn qs_bytes(&self) -> usize {
        if self.nibbles {
            4 * 64
        } else {
            8 * 64
        }
    }

    /// Offset of the fifth-bit words.
    pub const fn qh_at(&self) -> usize {
        self.qs_bytes()
    }

    /// Offset of the sixteen scales.
    pub const fn d_at(&self) -> usize {
        self.qs_bytes() + if self.fifth { 4 * GROUP } else { 0 }
    }

    /// Bytes of one block scale: 2 (f16), or 1 (E8M0).
    pub const fn scale_bytes(&self) -> usize {
        if self.e8m0 {
            1
        } else {
            2
        }
    }

    /// Offset of the sixteen minimums (types with a minimum).
    pub const fn m_at(&self) -> usize {
        self.d_at() + self.scale_bytes() * GROUP
    }

    /// The codebook the nibbles index (formats with [`Format::codebook`]).
    pub const fn book(&self) -> &'static [i8; 16] {
        if self.e8m0 {
            &KVALUES_MXFP4
        } else {
            &KVALUES_IQ4NL
        }
    }

    /// Block scale `j` of a legacy group-block, widened exactly to f32.
    pub fn scale(&self, gb: &[u8], j: usize) -> f32 {
        let at = self.d_at() + self.scale_bytes() * j;
        if self.e8m0 {
            e8m0_to_f32_half(gb[at])
        } else {
            f16_to_f32([gb[at], gb[at + 1]])
        }
    }

    /// Bytes of one group-block: sixteen source blocks.
    pub const fn group_block_bytes(&self) -> usize {
        match self.kind {
            Kind::Legacy => self.m_at() + if self.min { 2 * GROUP } else { 0 },
            Kind::Q6K => super::layout_k::Q6K_GROUP_BLOCK,
            Kind::Q45K => super::layout_k::q45k_group_block(self.fifth),
            Kind::IQ4XS => super::layout_k23::IQ4XS_GROUP_BLOCK,
            Kind::Q3K => super::layout_k23::Q3K_GROUP_BLOCK,
            Kind::Q2K => super::layout_k23::Q2K_GROUP_BLOCK,
        }
    }

    /// Bytes of one source block (in ggml's layout).
    pub fn block_bytes(&self) -> usize {
        self.ty.type_size() as usize
    }

    /// Bytes of a `rows × cols` matrix in the interleaved layout (the
    /// file's size, but for Q4_K/Q5_K, Q3_K and IQ4_XS, whose unpacked
    /// scales take 4, 4 and 2 more bytes per row and super-block).
    pub fn packed_len(&self, rows: usize, cols: usize) -> usize {
        rows / GROUP * (cols / self.block_quants()) * self.group_block_bytes()
    }

    /// Quants per block.
    pub const fn block_quants(&self) -> usize {
        match self.kind {
            Kind::Legacy => QK,
            Kind::Q6K | Kind::Q45K | Kind::IQ4XS | Kind::Q3K | Kind::Q2K => QK_K,
        }
    }
}

/// Whether a `rows × cols` matrix of `ty` can take the interleaved layout.
pub fn packable(ty: GgmlType, rows: usize, cols: usize) -> bool {
    Format::of(ty).is_some_and(|f| {
        rows > 0 && rows.is_multiple_of(GROUP) && cols > 0 && cols.is_multiple_of(f.block_quants())
    })
}

/// The fields of one source block, whatever its type.
struct Fields {
    d: F16Bits,
    m: F16Bits,
    qh: u32,
    /// The sixteen nibble bytes, or the 32 quants (as `q + 128`).
    qs: [u8; 32],
}

fn read_block(f: &Format, b: &[u8]) -> Fields {
    let mut out = Fields {
        d: [0; 2],
        m: [0; 2],
        qh: 0,
        qs: [0; 32],
    };
    match f.ty {
        GgmlType::Q4_0 => {
            let x: &BlockQ4_0 = bytemuck::from_bytes(b);
            out.d = x.d;
            out.qs[..16].copy_from_slice(&x.qs);
        }
        GgmlType::IQ4_NL => {
            let x: &BlockIQ4NL = bytemuck::from_bytes(b);
            out.d = x.d;
            out.qs[..16].copy_from_slice(&x.qs);
        }
        GgmlType::MXFP4 => {
            let x: &BlockMXFP4 = bytemuck::from_bytes(b);
            out.d = [x.e, 0];
            out.qs[..16].copy_from_slice(&x.qs);
        }
        GgmlType::Q4_1 => {
            let x: &BlockQ4_1 = bytemuck::from_bytes(b);
            (out.d, out.m) = (x.d, x.m);
            out.qs[..16].copy_from_slice(&x.qs);
        }
        GgmlType::Q5_0 => {
            let x: &BlockQ5_0 = bytemuck::from_bytes(b);
            (out.d, out.qh) = (x.d, u32::from_le_bytes(x.qh));
            out.qs[..16].copy_from_slice(&x.qs);
        }
        GgmlType::Q5_1 => {
            let x: &BlockQ5_1 = bytemuck::from_bytes(b);
            (out.d, out.m, out.qh) = (x.d, x.m, u32::from_le_bytes(x.qh));
            out.qs[..16].copy_from_slice(&x.qs);
        }
        _ => {
            let x: &BlockQ8_0 = bytemuck::from_bytes(b);
            out.d = x.d;
            for (o, q) in out.qs.iter_mut().zip(x.qs) {
                *o = (q as u8) ^ 0x80;
            }
        }
    }
    out
}

fn write_block(f: &Format, x: &Fields, b: &mut [u8]) {
    match f.ty {
        GgmlType::Q4_0 => {
            let o: &mut BlockQ4_0 = bytemuck::from_bytes_mut(b);
            o.d = x.d;
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        GgmlType::IQ4_NL => {
            let o: &mut BlockIQ4NL = bytemuck::from_bytes_mut(b);
            o.d = x.d;
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        GgmlType::MXFP4 => {
            let o: &mut BlockMXFP4 = bytemuck::from_bytes_mut(b);
            o.e = x.d[0];
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        GgmlType::Q4_1 => {
            let o: &mut BlockQ4_1 = bytemuck::from_bytes_mut(b);
            (o.d, o.m) = (x.d, x.m);
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        GgmlType::Q5_0 => {
            let o: &mut BlockQ5_0 = bytemuck::from_bytes_mut(b);
            (o.d, o.qh) = (x.d, x.qh.to_le_bytes());
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        GgmlType::Q5_1 => {
            let o: &mut BlockQ5_1 = bytemuck::from_bytes_mut(b);
            (o.d, o.m, o.qh) = (x.d, x.m, x.qh.to_le_bytes());
            o.qs.copy_from_slice(&x.qs[..16]);
        }
        _ => {
            let o: &mut BlockQ8_0 = bytemuck::from_bytes_mut(b);
            o.d = x.d;
            for (o, q) in o.qs.iter_mut().zip(x.qs) {
                *o = (q ^ 0x80) as i8;
            }
        }
    }
}

/// The source's fifth-bit word rearranged as the layout stores it.
fn spread_fifth(qh: u32) -> u32 {
    let mut h = 0u32;
    for k in 0..8 {
        for j in 0..4 {
            h |= ((qh >> (4 * k + j)) & 1) << (8 * j + k);
        }
    }
    h
}

fn gather_fifth(h: u32) -> u32 {
    let mut qh = 0u32;
    for k in 0..8 {
        for j in 0..4 {
            qh |= ((h >> (8 * j + k)) & 1) << (4 * k + j);
        }
    }
    qh
}

/// Checks the shape, and that `len` is the matrix's length in ggml's
/// layout (or, with `packed`, in the interleaved one); returns the blocks
/// per row.
fn check(
    f: &Format,
    rows: usize,
    cols: usize,
    len: usize,
    packed: bool,
) -> Result<usize, KernelError> {
    if !packable(f.ty, rows, cols) {
        return Err(KernelError::UnsupportedType {
            ty: f.ty,
            op: "interleaved packing of this shape",
        });
    }
    let nb = cols / f.block_quants();
    let expected = if packed {
        f.packed_len(rows, cols)
    } else {
        rows * nb * f.block_bytes()
    };
    if len != expected {
        return Err(KernelError::BadLength {
            what: "weight bytes",
            expected,
            got: len,
        });
    }
    Ok(nb)
}

/// Rearranges the 16-row groups `groups` of a row-major matrix (`src`, the
/// whole matrix) into `dst`, which holds exactly those groups.
///
/// # Errors
/// [`KernelError::UnsupportedType`] when the type or shape has no
/// interleaved form, [`KernelError::BadLength`] when `src` or `dst` do not
/// fit the shape.
pub fn pack_groups(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    src: &[u8],
    groups: std::ops::Range<usize>,
    dst: &mut [u8],
) -> Result<(), KernelError> {
    let f = Format::of(ty).ok_or(KernelError::UnsupportedType {
        ty,
        op: "interleaved packing",
    })?;
    let nb = check(&f, rows, cols, src.len(), false)?;
    let (bs, gb) = (f.block_bytes(), f.group_block_bytes());
    let want = groups.len() * nb * gb;
    if dst.len() != want || groups.end * GROUP > rows {
        return Err(KernelError::BadLength {
            what: "packed bytes",
            expected: want,
            got: dst.len(),
        });
    }
    for (gi, g) in groups.enumerate() {
        for b in 0..nb {
            let out = &mut dst[(gi * nb + b) * gb..(gi * nb + b + 1) * gb];
            for r in 0..GROUP {
                let at = ((g * GROUP + r) * nb + b) * bs;
                let blk = &src[at..at + bs];
                match (f.kind, f.fifth) {
                    (Kind::Q6K, _) => super::layout_k::q6k_put(bytemuck::from_bytes(blk), r, out),
                    (Kind::Q45K, false) => {
                        super::layout_k::q4k_put(bytemuck::from_bytes(blk), r, out)
                    }
                    (Kind::Q45K, true) => {
                        super::layout_k::q5k_put(bytemuck::from_bytes(blk), r, out)
                    }
                    (Kind::IQ4XS, _) => {
                        super::layout_k23::iq4xs_put(bytemuck::from_bytes(blk), r, out)
                    }
                    (Kind::Q3K, _) => super::layout_k23::q3k_put(bytemuck::from_bytes(blk), r, out),
                    (Kind::Q2K, _) => super::layout_k23::q2k_put(bytemuck::from_bytes(blk), r, out),
                    (Kind::Legacy, _) => {}
                }
                if f.kind != Kind::Legacy {
                    continue;
                }
                let x = read_block(&f, &src[at..at + bs]);
                let chunks = f.qs_bytes() / 64;
                for c in 0..chunks {
                    out[64 * c + 4 * r..64 * c + 4 * r + 4]
                        .copy_from_slice(&x.qs[4 * c..4 * c + 4]);
                }
                if f.fifth {
                    let at = f.qh_at() + 4 * r;
                    out[at..at + 4].copy_from_slice(&spread_fifth(x.qh).to_le_bytes());
                }
                let (at, sb) = (f.d_at() + f.scale_bytes() * r, f.scale_bytes());
                out[at..at + sb].copy_from_slice(&x.d[..sb]);
                if f.min {
                    out[f.m_at() + 2 * r..f.m_at() + 2 * r + 2].copy_from_slice(&x.m);
                }
            }
        }
    }
    Ok(())
}

/// The whole matrix in the interleaved layout (same length as `src`).
///
/// # Errors
/// As [`pack_groups`].
pub fn pack(ty: GgmlType, rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>, KernelError> {
    let len = Format::of(ty).map_or(0, |f| f.packed_len(rows, cols));
    let mut dst = vec![0u8; len];
    pack_groups(ty, rows, cols, src, 0..rows / GROUP.max(1), &mut dst)?;
    Ok(dst)
}

/// Row `r` of a packed matrix back in ggml's block layout, into `dst`
/// (one row's bytes). The inverse of [`pack`], used by tests.
///
/// # Errors
/// As [`pack_groups`].
pub fn unpack_row(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    packed: &[u8],
    r: usize,
    dst: &mut [u8],
) -> Result<(), KernelError> {
    let (f, nb) = row_check(ty, rows, cols, packed, r)?;
    let bs = f.block_bytes();
    if dst.len() != nb * bs {
        return Err(KernelError::BadLength {
            what: "unpacked row",
            expected: nb * bs,
            got: dst.len(),
        });
    }
    for (b, dst) in dst.chunks_exact_mut(bs).enumerate() {
        unpack_block(&f, nb, packed, r, b, dst);
    }
    Ok(())
}

/// Row `r` of a packed matrix dequantized into `dst` (`cols` values),
/// block by block through a buffer on the stack: what a row lookup
/// (`get_rows`) on a packed embedding table needs, with no allocation.
///
/// # Errors
/// As [`pack_groups`], and [`KernelError::BadLength`] for `dst`.
pub fn dequantize_row(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    packed: &[u8],
    r: usize,
    dst: &mut [f32],
) -> Result<(), KernelError> {
    let (f, nb) = row_check(ty, rows, cols, packed, r)?;
    if dst.len() != cols {
        return Err(KernelError::BadLength {
            what: "dequantized row",
            expected: cols,
            got: dst.len(),
        });
    }
    let (bs, bq) = (f.block_bytes(), f.block_quants());
    let mut buf = [0u8; 256];
    for (b, dst) in dst.chunks_exact_mut(bq).enumerate() {
        unpack_block(&f, nb, packed, r, b, &mut buf[..bs]);
        crate::dequant::dequantize_row(ty, &buf[..bs], dst)?;
    }
    Ok(())
}

fn row_check(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    packed: &[u8],
    r: usize,
) -> Result<(Format, usize), KernelError> {
    let f = Format::of(ty).ok_or(KernelError::UnsupportedType {
        ty,
        op: "interleaved packing",
    })?;
    let nb = check(&f, rows, cols, packed.len(), true)?;
    if r >= rows {
        return Err(KernelError::RowOutOfRange {
            row: r as i64,
            len: cols,
            data: rows * cols,
        });
    }
    Ok((f, nb))
}

/// Block `b` of row `r` back in ggml's layout (`dst`: one block's bytes).
fn unpack_block(f: &Format, nb: usize, packed: &[u8], r: usize, b: usize, dst: &mut [u8]) {
    let gb = f.group_block_bytes();
    let (g, j) = (r / GROUP, r % GROUP);
    let src = &packed[(g * nb + b) * gb..(g * nb + b + 1) * gb];
    match (f.kind, f.fifth) {
        (Kind::Q6K, _) => return super::layout_k::q6k_get(src, j, bytemuck::from_bytes_mut(dst)),
        (Kind::Q45K, false) => {
            return super::layout_k::q4k_get(src, j, bytemuck::from_bytes_mut(dst))
        }
        (Kind::Q45K, true) => {
            return super::layout_k::q5k_get(src, j, bytemuck::from_bytes_mut(dst))
        }
        (Kind::IQ4XS, _) => {
            return super::layout_k23::iq4xs_get(src, j, bytemuck::from_bytes_mut(dst))
        }
        (Kind::Q3K, _) => return super::layout_k23::q3k_get(src, j, bytemuck::from_bytes_mut(dst)),
        (Kind::Q2K, _) => return super::layout_k23::q2k_get(src, j, bytemuck::from_bytes_mut(dst)),
        (Kind::Legacy, _) => {}
    }
    let mut d = [0u8; 2];
    let (at, sb) = (f.d_at() + f.scale_bytes() * j, f.scale_bytes());
    d[..sb].copy_from_slice(&src[at..at + sb]);
    let mut x = Fields {
        d,
        m: [0; 2],
        qh: 0,
        qs: [0; 32],
    };
    if f.min {
        x.m = [src[f.m_at() + 2 * j], src[f.m_at() + 2 * j + 1]];
    }
    if f.fifth {
        let at = f.qh_at() + 4 * j;
        let h = u32::from_le_bytes([src[at], src[at + 1], src[at + 2], src[at + 3]]);
        x.qh = gather_fifth(h);
    }
    for c in 0..f.qs_bytes() / 64 {
        x.qs[4 * c..4 * c + 4].copy_from_slice(&src[64 * c + 4 * j..64 * c + 4 * j + 4]);
    }
    write_block(f, &x, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifth_bits_round_trip_and_land_where_the_kernel_shifts_them() {
        for qh in [0u32, 1, 0x8000_0001, 0xdead_beef, u32::MAX, 0x0123_4567] {
            let h = spread_fifth(qh);
            assert_eq!(gather_fifth(h), qh);
            for k in 0..8 {
                for j in 0..4 {
                    let want = (qh >> (4 * k + j)) & 1;
                    // The kernel's shift for quants 4k..4k+4: left by 4 - k
                    // (k < 4) or right by k - 4, then bit 4 of each byte.
                    let shifted = if k <= 4 { h << (4 - k) } else { h >> (k - 4) };
                    assert_eq!((shifted >> (8 * j + 4)) & 1, want, "qh {qh:#x} k {k} j {j}");
                }
            }
        }
    }

    #[test]
    fn group_block_sizes_match_sixteen_source_blocks() {
        for (ty, bytes) in [
            (GgmlType::Q4_0, 18),
            (GgmlType::Q4_1, 20),
            (GgmlType::Q5_0, 22),
            (GgmlType::Q5_1, 24),
            (GgmlType::Q8_0, 34),
            (GgmlType::IQ4_NL, 18),
            (GgmlType::MXFP4, 17),
        ] {
            let f = Format::of(ty).unwrap();
            assert_eq!(f.group_block_bytes(), 16 * bytes, "{ty}");
            assert_eq!(ty.type_size() as usize, bytes);
        }
    }
}
