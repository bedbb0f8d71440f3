//! Quantization of f32 rows: the activation formats the integer dot products
//! consume (Q8_0, Q8_1, Q8_K) and the reference quantizers of the legacy
//! weight types, F16 and BF16 (for tests, fixtures and tools).
//!
//! The activation quantizers reproduce what llama.cpp's CPU backend runs on
//! x86-64, where our golden data was produced, so that the integer dot
//! products see the very same int8 values:
//!
//! - Q8_0 / Q8_1: the AVX2 `quantize_row_q8_0` / `quantize_row_q8_1` of
//!   `ggml-cpu/arch/x86/quants.c`. They differ from the portable
//!   `quantize_row_q8_0_ref` in two ways: the multiplier is `127 / amax`
//!   (not `1 / (amax / 127)`, which can differ in the last bit), and the
//!   rounding is `_mm256_round_ps(.., _MM_ROUND_NEAREST)`, i.e. half to
//!   even (the reference uses `roundf`, half away from zero). The stored
//!   scale is `amax / 127` either way. Q8_1's `s` is `d * sum(q)` with the
//!   sum taken over the rounded integers.
//! - Q8_K: llama.cpp's x86 build has no SIMD variant; `quantize_row_q8_K`
//!   there simply calls `quantize_row_q8_K_ref`, which this follows: the
//!   signed value of largest magnitude (first one wins), `iscale = -127 / max`,
//!   `nearest_int` (the `+ 12582912` trick, half to even), clamp at 127,
//!   `d = 1 / iscale`, and the sums of each 16 quants.
//!
//! The typed functions process the whole blocks that fit in both slices and
//! never panic; [`quantize_row`] is the checked entry point for raw bytes,
//! and [`quantize_row_on`] the same with the AVX2 or AVX-512 forms of the
//! three activation quantizers (module `x86`), which write the same bytes.

use minfer_gguf::GgmlType;

use crate::blocks::{
    as_blocks_mut, f32_to_f16, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8K, QK, QK_K,
};
use crate::error::KernelError;
use crate::simd::Isa;

mod act;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use act::{
    nearest_int, quantize_row_q8_0, quantize_row_q8_0_ref, quantize_row_q8_1,
    quantize_row_q8_1_ref, quantize_row_q8_k,
};

/// Whether [`quantize_row`] handles `ty`.
pub fn is_supported(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | Q8_K
    )
}

/// The checks of [`quantize_row`]; returns the byte length `dst` has.
fn check_row(ty: GgmlType, src: &[f32], dst: &[u8]) -> Result<usize, KernelError> {
    if !is_supported(ty) {
        return Err(KernelError::UnsupportedType { ty, op: "quantize" });
    }
    let n = src.len();
    let block = ty.block_size() as usize;
    if !n.is_multiple_of(block) {
        return Err(KernelError::NotBlockAligned { ty, n, block });
    }
    let expected = n / block * ty.type_size() as usize;
    if dst.len() != expected {
        return Err(KernelError::BadLength {
            what: "quantize destination bytes",
            expected,
            got: dst.len(),
        });
    }
    Ok(expected)
}

/// [`quantize_row`] with `isa`'s vector code for the activation formats
/// (Q8_0, Q8_1 and Q8_K, see `x86`): the same bytes, several times
/// faster. Other types, and Q8_K into misaligned bytes, take the scalar
/// code.
///
/// # Errors
/// As [`quantize_row`].
pub fn quantize_row_on(
    isa: Isa,
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), KernelError> {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && matches!(ty, GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8_K) {
        check_row(ty, src, dst)?;
        let wide = isa.avx512();
        // The blocks of each format, on the level's form of its quantizer;
        // misaligned bytes (Q8_K holds an f32) fall through to the scalar
        // code below.
        macro_rules! vector {
            ($wide:ident, $narrow:ident) => {
                if let Some(b) = as_blocks_mut(dst) {
                    // SAFETY: an `Isa` at AVX2 or above was validated
                    // against this CPU (AVX-512 F/BW/VL at its AVX-512
                    // level); the blocks are whole.
                    unsafe {
                        if wide {
                            x86::$wide(src, b)
                        } else {
                            x86::$narrow(src, b)
                        }
                    }
                    return Ok(());
                }
            };
        }
        match ty {
            GgmlType::Q8_0 => vector!(q8_0_512, q8_0_256),
            GgmlType::Q8_1 => vector!(q8_1_512, q8_1_256),
            _ => vector!(q8_k_512, q8_k_256),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    quantize_row(ty, src, dst)
}

/// Quantizes `src` into the raw bytes of type `ty`.
///
/// Q8_0 and Q8_1 use the x86 activation quantizers ([`quantize_row_q8_0`],
/// [`quantize_row_q8_1`]), Q8_K [`quantize_row_q8_k`], the other quantized
/// types llama.cpp's reference quantizers.
///
/// # Errors
/// [`KernelError::UnsupportedType`] for a type this module cannot produce,
/// [`KernelError::NotBlockAligned`] when `src.len()` is not a multiple of
/// the block size, [`KernelError::BadLength`] when `dst` is not exactly the
/// byte size of `src.len()` elements.
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    let expected = check_row(ty, src, dst)?;
    let got = dst.len();
    let bad = || KernelError::BadLength {
        what: "quantize destination bytes",
        expected,
        got,
    };
    match ty {
        GgmlType::F32 => {
            for (x, out) in src.iter().zip(dst.chunks_exact_mut(4)) {
                out.copy_from_slice(&x.to_le_bytes());
            }
        }
        GgmlType::F16 => quantize_row_f16(src, dst),
        GgmlType::BF16 => quantize_row_bf16(src, dst),
        GgmlType::Q4_0 => quantize_row_q4_0(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q4_1 => quantize_row_q4_1(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q5_0 => quantize_row_q5_0(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q5_1 => quantize_row_q5_1(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q8_0 => quantize_row_q8_0(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q8_1 => quantize_row_q8_1(src, as_blocks_mut(dst).ok_or_else(bad)?),
        GgmlType::Q8_K => {
            // `BlockQ8K` holds an f32, so `dst` may be too misaligned to view
            // as blocks; build each block on the stack and copy its bytes.
            let size = std::mem::size_of::<BlockQ8K>();
            for (x, out) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(size)) {
                let mut b: BlockQ8K = bytemuck::Zeroable::zeroed();
                quantize_row_q8_k(x, std::slice::from_mut(&mut b));
                out.copy_from_slice(bytemuck::bytes_of(&b));
            }
        }
        // Kept in step with `is_supported`; an error rather than a panic if
        // the two ever drift apart.
        _ => return Err(KernelError::UnsupportedType { ty, op: "quantize" }),
    }
    Ok(())
}

/// Signed max-magnitude value of a block (first one wins ties), as the
/// legacy reference quantizers pick it.
#[inline(always)]
fn signed_abs_max(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Min and max of a block, starting from ±f32::MAX as the C code does.
#[inline(always)]
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// llama.cpp's `quantize_row_q4_0_ref`.
pub fn quantize_row_q4_0(src: &[f32], dst: &mut [BlockQ4_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let max = signed_abs_max(x);
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        for j in 0..QK / 2 {
            // C truncates toward zero into an int8_t; `as i8` does too.
            let x0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let x1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            y.qs[j] = x0 | (x1 << 4);
        }
    }
}

/// llama.cpp's `quantize_row_q4_1_ref`.
pub fn quantize_row_q4_1(src: &[f32], dst: &mut [BlockQ4_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        y.m = f32_to_f16(min);
        for j in 0..QK / 2 {
            let x0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let x1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            y.qs[j] = x0 | (x1 << 4);
        }
    }
}

/// llama.cpp's `quantize_row_q5_0_ref`.
pub fn quantize_row_q5_0(src: &[f32], dst: &mut [BlockQ5_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let max = signed_abs_max(x);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let x0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
            let x1 = ((x[j + QK / 2] * id + 16.5) as i8).min(31) as u8;
            y.qs[j] = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
            qh |= ((x0 as u32 & 0x10) >> 4) << j;
            qh |= ((x1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

/// llama.cpp's `quantize_row_q5_1_ref`.
pub fn quantize_row_q5_1(src: &[f32], dst: &mut [BlockQ5_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f32_to_f16(d);
        y.m = f32_to_f16(min);
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            // The reference has no clamp here: `(x - min) * id` is at most 31.
            let x0 = ((x[j] - min) * id + 0.5) as u8;
            let x1 = ((x[j + QK / 2] - min) * id + 0.5) as u8;
            y.qs[j] = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
            qh |= ((x0 as u32 & 0x10) >> 4) << j;
            qh |= ((x1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

/// f32 → little-endian f16 bytes, round to nearest even (F16C's
/// `_mm256_cvtps_ph(.., 0)`, which ggml uses on x86). Converts as many
/// values as fit in both slices.
pub fn quantize_row_f16(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f32_to_f16(*x));
    }
}

/// f32 → bf16 as ggml's scalar `GGML_FP32_TO_BF16`: NaNs are kept and made
/// quiet, everything else is rounded to nearest even.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7FFF_FFFF) > 0x7F80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    // Cannot overflow: the largest finite input rounds up to infinity.
    ((u as u64 + 0x7FFF + ((u as u64 >> 16) & 1)) >> 16) as u16
}

/// f32 → little-endian bf16 bytes via [`f32_to_bf16`]. Converts as many
/// values as fit in both slices.
pub fn quantize_row_bf16(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f32_to_bf16(*x).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::act::round_small;
    use super::*;
    use crate::blocks::{BlockQ8_0, BlockQ8_1};

    /// The fast rounding agrees with `round_ties_even` after the integer
    /// cast on every input the quantizers can produce, ties included.
    #[test]
    fn round_small_matches_round_ties_even() {
        let mut x = -130.0f32;
        while x <= 130.0 {
            for v in [x, x + 0.5, x.next_up(), (x + 0.5).next_down()] {
                assert_eq!(round_small(v) as i32, v.round_ties_even() as i32, "{v}");
                assert_eq!(round_small(v) as i8, v.round_ties_even() as i8, "{v}");
            }
            x += 0.25;
        }
        for v in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            4194303.5,
        ] {
            assert_eq!(round_small(v) as i32, v.round_ties_even() as i32, "{v}");
        }
    }

    #[test]
    fn rejects_unsupported_types() {
        let src = [0.0f32; 256];
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::IQ4_NL,
            GgmlType::I8,
        ] {
            let mut dst = vec![0u8; ty.bytes_for(256).unwrap() as usize];
            assert_eq!(
                quantize_row(ty, &src, &mut dst),
                Err(KernelError::UnsupportedType { ty, op: "quantize" })
            );
        }
    }

    #[test]
    fn rejects_bad_lengths_without_panicking() {
        let src = vec![0.5f32; 257];
        for &ty in GgmlType::ALL.iter().filter(|&&t| is_supported(t)) {
            let need = ty.bytes_for(256).unwrap() as usize;
            for got in [0, need - 1, need + 1] {
                let mut dst = vec![0u8; got];
                assert_eq!(
                    quantize_row(ty, &src[..256], &mut dst),
                    Err(KernelError::BadLength {
                        what: "quantize destination bytes",
                        expected: need,
                        got
                    }),
                    "{ty} into {got} bytes"
                );
            }
            let block = ty.block_size() as usize;
            if block > 1 {
                let mut dst = vec![0u8; need];
                assert_eq!(
                    quantize_row(ty, &src[..block + 1], &mut dst),
                    Err(KernelError::NotBlockAligned {
                        ty,
                        n: block + 1,
                        block
                    })
                );
            }
            assert_eq!(quantize_row(ty, &[], &mut []), Ok(()));
        }
    }

    #[test]
    fn typed_functions_tolerate_mismatched_slices() {
        let src = [1.0f32; 40];
        let mut dst = [BlockQ8_0 {
            d: [0; 2],
            qs: [0; QK],
        }; 2];
        // Only one whole block of input: the second block stays untouched.
        quantize_row_q8_0(&src, &mut dst);
        assert_eq!(dst[0].qs, [127; QK]);
        assert_eq!(dst[1].qs, [0; QK]);
        let mut none: [BlockQ8K; 0] = [];
        quantize_row_q8_k(&[1.0; 256], &mut none);
    }

    #[test]
    fn q8_0_rounds_half_to_even_like_avx2() {
        // amax = 127 makes the multiplier exactly 1, so x * id = x.
        let mut x = [0.0f32; QK];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -2.5;
        x[3] = 3.5;
        x[4] = 0.5;
        let mut b = [BlockQ8_0 {
            d: [0; 2],
            qs: [0; QK],
        }];
        quantize_row_q8_0(&x, &mut b);
        assert_eq!(&b[0].qs[..5], &[127, 2, -2, 4, 0]);
        // The reference rounds half away from zero.
        quantize_row_q8_0_ref(&x, &mut b);
        assert_eq!(&b[0].qs[..5], &[127, 3, -3, 4, 1]);
    }

    #[test]
    fn q8_1_sum_and_zero_block() {
        let x: Vec<f32> = (0..QK).map(|i| i as f32 - 10.0).collect();
        let mut b = [BlockQ8_1 {
            d: [0; 2],
            s: [0; 2],
            qs: [0; QK],
        }];
        quantize_row_q8_1(&x, &mut b);
        let d = crate::blocks::f16_to_f32(b[0].d);
        let sum: i32 = b[0].qs.iter().map(|&q| q as i32).sum();
        assert_eq!(b[0].s, f32_to_f16((21.0f32 / 127.0) * sum as f32));
        assert_eq!(d, crate::blocks::f16_to_f32(f32_to_f16(21.0 / 127.0)));
        quantize_row_q8_1(&[0.0; QK], &mut b);
        assert_eq!(b[0].qs, [0; QK]);
        assert_eq!(b[0].s, [0; 2]);
    }

    #[test]
    fn q8_k_follows_the_reference() {
        let mut x = [0.0f32; QK_K];
        for (i, v) in x.iter_mut().enumerate() {
            *v = (i as f32 * 0.37).sin();
        }
        x[7] = -3.0; // the largest magnitude is negative
        let mut b: [BlockQ8K; 1] = bytemuck::Zeroable::zeroed();
        quantize_row_q8_k(&x, &mut b);
        // The signed extreme always maps to -127.
        assert_eq!(b[0].qs[7], -127);
        assert_eq!(b[0].d, 1.0 / (-127.0 / -3.0));
        for (j, &s) in b[0].bsums.iter().enumerate() {
            let want: i32 = b[0].qs[16 * j..16 * j + 16].iter().map(|&q| q as i32).sum();
            assert_eq!(s as i32, want);
        }
        // Misaligned raw bytes through the dispatcher give the same block.
        let mut raw = vec![0u8; 293];
        quantize_row(GgmlType::Q8_K, &x, &mut raw[1..]).unwrap();
        assert_eq!(&raw[1..], bytemuck::bytes_of(&b[0]));
    }

    #[test]
    fn nearest_int_is_half_even() {
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-127.4), -127);
        assert_eq!(nearest_int(0.49999997), 0);
    }

    #[test]
    fn bf16_rounding() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // Exactly half way, even below: stays.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        // Exactly half way, odd below: rounds up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
    }
}
