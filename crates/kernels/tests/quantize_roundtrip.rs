//! Quantize → dequantize error bounds, after llama.cpp's
//! `tests/test-quantize-fns.cpp`: the synthetic signal
//! `0.1 + 2 * cos(i + offset)` of 4096 values, the error
//! `sqrt(sum((x - y)^2)) / n` (summed in f64), and its thresholds
//! (MAX_QUANTIZATION_TOTAL_ERROR = 0.002 for every type tested here; the
//! 2-bit / 3-bit bounds apply to types we cannot quantize), plus its check
//! that the fast quantizer stays within 0.0001 of the reference one.

mod common;

use common::QUANTIZABLE;
use minfer_kernels::blocks::{f16_to_f32, f32_to_f16, BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K};
use minfer_kernels::dequant::dequantize_row;
use minfer_kernels::quant::{
    quantize_row, quantize_row_q8_0, quantize_row_q8_0_ref, quantize_row_q8_1,
    quantize_row_q8_1_ref, quantize_row_q8_k,
};
use minfer_kernels::GgmlType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TEST_SIZE: usize = 32 * 128;
const MAX_QUANTIZATION_TOTAL_ERROR: f32 = 0.002;
const MAX_QUANTIZATION_REFERENCE_ERROR: f32 = 0.0001;

/// llama.cpp's `generate_data`: the cosine is taken in f32, the 0.1 added
/// in f64 (a double literal), the result stored as f32.
fn generate_data(offset: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (0.1f64 + (2.0f32 * (i as f32 + offset).cos()) as f64) as f32)
        .collect()
}

/// llama.cpp's `array_rmse` (despite the name: root of the sum, over n).
fn array_rmse(a: &[f32], b: &[f32]) -> f32 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = (x - y) as f64;
            d * d
        })
        .sum();
    sum.sqrt() as f32 / a.len() as f32
}

/// Q8_1 has no dequantizer in ggml (it only feeds dot products); decode it
/// as `d * q` here.
fn dequantize_q8_1(blocks: &[BlockQ8_1]) -> Vec<f32> {
    blocks
        .iter()
        .flat_map(|b| {
            let d = f16_to_f32(b.d);
            b.qs.iter().map(move |&q| q as f32 * d)
        })
        .collect()
}

fn roundtrip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    let mut bytes = vec![0u8; ty.bytes_for(x.len() as u64).unwrap() as usize];
    quantize_row(ty, x, &mut bytes).unwrap();
    if ty == GgmlType::Q8_1 {
        let blocks: &[BlockQ8_1] = bytemuck::cast_slice(&bytes);
        return dequantize_q8_1(blocks);
    }
    let mut y = vec![0.0f32; x.len()];
    dequantize_row(ty, &bytes, &mut y).unwrap();
    y
}

#[test]
fn total_quantization_error_within_llama_cpp_bounds() {
    let x = generate_data(0.0, TEST_SIZE);
    // The weight types and, beyond them, the activation types.
    let types = QUANTIZABLE
        .into_iter()
        .chain([GgmlType::Q8_1, GgmlType::Q8_K]);
    let mut failed = Vec::new();
    for ty in types {
        let err = array_rmse(&x, &roundtrip(ty, &x));
        let ok = err < MAX_QUANTIZATION_TOTAL_ERROR;
        eprintln!(
            "{:>5} absolute quantization error: {} ({err:.6})",
            ty.name(),
            if ok { "ok" } else { "FAILED" }
        );
        if !ok {
            failed.push(format!("{ty}: {err}"));
        }
    }
    assert!(failed.is_empty(), "over the bound: {failed:?}");
}

/// The x86 activation quantizers against the portable references, with
/// llama.cpp's `reference_quantization_error` bound.
#[test]
fn fast_quantizers_match_reference_within_bound() {
    let x = generate_data(0.0, TEST_SIZE);
    let nb = TEST_SIZE / QK;
    let zero0 = BlockQ8_0 {
        d: [0; 2],
        qs: [0; QK],
    };
    let (mut a, mut b) = (vec![zero0; nb], vec![zero0; nb]);
    quantize_row_q8_0(&x, &mut a);
    quantize_row_q8_0_ref(&x, &mut b);
    let mut ya = vec![0.0f32; TEST_SIZE];
    let mut yb = vec![0.0f32; TEST_SIZE];
    minfer_kernels::dequant::dequantize_q8_0(&a, &mut ya);
    minfer_kernels::dequant::dequantize_q8_0(&b, &mut yb);
    let err = array_rmse(&ya, &yb);
    eprintln!(" Q8_0 reference implementation error: {err:.6}");
    assert!(err < MAX_QUANTIZATION_REFERENCE_ERROR, "Q8_0: {err}");

    let zero1 = BlockQ8_1 {
        d: [0; 2],
        s: [0; 2],
        qs: [0; QK],
    };
    let (mut a, mut b) = (vec![zero1; nb], vec![zero1; nb]);
    quantize_row_q8_1(&x, &mut a);
    quantize_row_q8_1_ref(&x, &mut b);
    let err = array_rmse(&dequantize_q8_1(&a), &dequantize_q8_1(&b));
    eprintln!(" Q8_1 reference implementation error: {err:.6}");
    assert!(err < MAX_QUANTIZATION_REFERENCE_ERROR, "Q8_1: {err}");
    // Same scale either way; `s` is the unrounded f32 scale times the sum
    // of the quants, rounded to f16 once.
    for ((fa, fb), xs) in a.iter().zip(&b).zip(x.chunks_exact(QK)) {
        assert_eq!(fa.d, fb.d);
        let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let sum: i32 = fa.qs.iter().map(|&q| q as i32).sum();
        assert_eq!(fa.s, f32_to_f16(amax / 127.0 * sum as f32));
    }
}

/// Every element of a Q8_0 / Q8_1 round trip lies within half a step of its
/// source, up to the rounding of the scale to f16 (at most 127 times the
/// scale's rounding error), on signals of very different magnitudes.
#[test]
fn q8_roundtrip_within_half_a_step() {
    let mut rng = StdRng::seed_from_u64(80);
    let mut signals = vec![generate_data(0.0, TEST_SIZE), generate_data(1.0, TEST_SIZE)];
    for scale in [1e-4f32, 1.0, 300.0] {
        signals.push(
            (0..TEST_SIZE)
                .map(|_| rng.gen_range(-1.0f32..1.0) * scale)
                .collect(),
        );
    }
    // A block of zeros and a block with a single non-zero value.
    let mut edge = vec![0.0f32; 2 * QK];
    edge[QK + 5] = -3.25;
    signals.push(edge);

    for x in &signals {
        let nb = x.len() / QK;
        let mut q = vec![
            BlockQ8_0 {
                d: [0; 2],
                qs: [0; QK]
            };
            nb
        ];
        quantize_row_q8_0(x, &mut q);
        let mut y = vec![0.0f32; x.len()];
        minfer_kernels::dequant::dequantize_q8_0(&q, &mut y);
        for (bi, blk) in q.iter().enumerate() {
            let xs = &x[bi * QK..(bi + 1) * QK];
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let d16 = f16_to_f32(blk.d);
            let bound = 0.5 * d + 127.0 * (d16 - d).abs() + amax * 1e-6;
            for j in 0..QK {
                let e = (xs[j] - y[bi * QK + j]).abs();
                assert!(
                    e <= bound,
                    "block {bi} elem {j}: x {} y {} err {e} > {bound} (d {d})",
                    xs[j],
                    y[bi * QK + j]
                );
            }
        }
        // Q8_1 carries the same quants and scale.
        let mut q1 = vec![
            BlockQ8_1 {
                d: [0; 2],
                s: [0; 2],
                qs: [0; QK]
            };
            nb
        ];
        quantize_row_q8_1(x, &mut q1);
        for (a, b) in q.iter().zip(&q1) {
            assert_eq!((a.d, a.qs), (b.d, b.qs));
        }
    }
}

/// Q8_K keeps its scale in f32, so its round trip is within half a step
/// (plus float rounding) everywhere, and its block sums are exact.
#[test]
fn q8_k_roundtrip_within_half_a_step() {
    let mut rng = StdRng::seed_from_u64(256);
    for scale in [1e-3f32, 1.0, 1e3] {
        let x: Vec<f32> = (0..TEST_SIZE)
            .map(|_| rng.gen_range(-1.0f32..1.0) * scale)
            .collect();
        let mut q: Vec<BlockQ8K> = vec![bytemuck::Zeroable::zeroed(); TEST_SIZE / QK_K];
        quantize_row_q8_k(&x, &mut q);
        for (bi, blk) in q.iter().enumerate() {
            let xs = &x[bi * QK_K..(bi + 1) * QK_K];
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let bound = 0.5 * blk.d.abs() + amax * 1e-6;
            for (j, (&v, &q)) in xs.iter().zip(&blk.qs).enumerate() {
                let e = (v - blk.d * q as f32).abs();
                assert!(e <= bound, "block {bi} elem {j}: err {e} > {bound}");
            }
            for (g, &s) in blk.bsums.iter().enumerate() {
                let want: i32 = blk.qs[16 * g..16 * g + 16].iter().map(|&v| v as i32).sum();
                assert_eq!(s as i32, want);
            }
        }
    }
}
