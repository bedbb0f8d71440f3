//! The activation quantizers in scalar form (Q8_0 and Q8_1 as llama.cpp's
//! x86 build runs them, their portable references, Q8_K) with the
//! rounding helpers they share: the definitions the vector forms in
//! `super::x86` reproduce and fall back on.

use crate::blocks::{f32_to_f16, BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K};

/// llama.cpp's `nearest_int`: adding 1.5 * 2^23 leaves the rounded integer
/// in the low mantissa bits (round half to even, as the FPU rounds). Valid
/// for `|x| <= 4194303`, which every caller guarantees by construction; out
/// of range it returns a wrong value but never panics, like the original.
#[inline(always)]
pub fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000
}

/// Max |x| of a block, as the AVX2 code reduces it. With no NaNs the order
/// of a max reduction does not change the result.
#[inline(always)]
fn abs_max(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, &v| m.max(v.abs()))
}

/// Rounds half to even, as `f32::round_ties_even`, for `|x| < 2^22` and
/// for non-finite `x` (both give the same integer after an `as` cast).
/// Adding and subtracting 1.5 * 2^23 leaves no fraction bits, so the FPU's
/// default rounding does the work; `round_ties_even` itself becomes a libm
/// call without SSE4.1, which cost a tenth of prefill time. Quantizer inputs
/// are within ±127 (or non-finite), far inside the exact range.
#[inline(always)]
pub(super) fn round_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// One block by llama.cpp's x86 AVX2 rule: `d = amax / 127`, `q =
/// round_half_even(x * (127 / amax))`, saturated to i8, into `qs`;
/// returns `d` and the integer sum of the quants (Q8_1's `s` before its
/// scaling). The x86 code sums the rounded int32 values before packing
/// them down to i8; in range the two are equal.
#[inline(always)]
fn block_x86(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    let amax = abs_max(x);
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        // `as i32` then the clamp saturates like the packs instructions
        // (NaN gives 0, as `as i8` would).
        let r = round_small(v * id) as i32;
        sum += r;
        *q = r.clamp(-128, 127) as i8;
    }
    (d, sum)
}

/// One block by llama.cpp's portable `_ref` rule (round half away from
/// zero, `id = 1 / d`) into `qs`; returns `d` and the sum of the quants.
#[inline(always)]
fn block_ref(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    let amax = abs_max(x);
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
        sum += *q as i32;
    }
    (d, sum)
}

/// Q8_0 activation quantizer, as llama.cpp's x86 AVX2 `quantize_row_q8_0`
/// (see [`block_x86`]). Writes `blocks.len()` blocks, or fewer if `src`
/// runs out.
pub fn quantize_row_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, _) = block_x86(x, &mut y.qs);
        y.d = f32_to_f16(d);
    }
}

/// Q8_1 activation quantizer, as llama.cpp's x86 AVX2 `quantize_row_q8_1`:
/// the quants and `d` of [`quantize_row_q8_0`], plus `s = d * sum(q)`.
pub fn quantize_row_q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, sum) = block_x86(x, &mut y.qs);
        y.d = f32_to_f16(d);
        y.s = f32_to_f16(d * sum as f32);
    }
}

/// llama.cpp's portable `quantize_row_q8_0_ref`. Not what x86 llama.cpp
/// runs for activations; kept for tests and for files that must match the
/// reference quantizer.
pub fn quantize_row_q8_0_ref(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, _) = block_ref(x, &mut y.qs);
        y.d = f32_to_f16(d);
    }
}

/// llama.cpp's portable `quantize_row_q8_1_ref`.
pub fn quantize_row_q8_1_ref(src: &[f32], dst: &mut [BlockQ8_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst.iter_mut()) {
        let (d, sum) = block_ref(x, &mut y.qs);
        y.d = f32_to_f16(d);
        y.s = f32_to_f16(sum as f32 * d);
    }
}

/// Q8_K activation quantizer: llama.cpp's `quantize_row_q8_K_ref`, which is
/// also what its x86 build runs. An all-zero block gets `d = 0`, zero quants
/// and zero sums (the reference leaves the sums unwritten; they are only
/// ever multiplied by `d`).
pub fn quantize_row_q8_k(src: &[f32], dst: &mut [BlockQ8K]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.iter_mut()) {
        // The signed value of largest magnitude; the first one wins ties.
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in x {
            let ax = v.abs();
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax == 0.0 {
            y.d = 0.0;
            y.qs = [0; QK_K];
            y.bsums = [0; QK_K / 16];
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            // The C code stores `MIN(127, v)` into an int8_t; the value is
            // never below -127 for finite input.
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
    }
}
