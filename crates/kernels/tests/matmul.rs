//! Matrix products: every thread count and SIMD level gives the same bits
//! as one thread at the scalar level, and the result stays close to an f64
//! product of the dequantized weights.

mod common;

use common::{row_major, GRID_TYPES, QUANTIZABLE};
use minfer_kernels::dequant::dequantize_row;
use minfer_kernels::matmul::{matmul_reference, row_bytes};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::quant::quantize_row;
use minfer_kernels::{matmul, ActScratch, GgmlType, KernelError, Kernels, MatRef, SimdLevel};
use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};

fn random_matrix(ty: GgmlType, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let rb = row_bytes(ty, cols).unwrap();
    let mut data = vec![0u8; rows * rb];
    let mut src = vec![0f32; cols];
    for r in 0..rows {
        src.iter_mut().for_each(|v| *v = rng.gen_range(-1.0..1.0));
        quantize_row(ty, &src, &mut data[r * rb..(r + 1) * rb]).unwrap();
    }
    data
}

/// The activations as the kernels see them: quantized to the weight
/// type's activation format and back. A product with these is exact up to
/// float rounding, so it checks the kernels' semantics tightly.
fn as_seen_by_kernels(ty: GgmlType, x: &[f32], cols: usize) -> Vec<f32> {
    let act = minfer_kernels::act_type(ty).unwrap();
    if act == GgmlType::F32 {
        return x.to_vec();
    }
    let mut buf = vec![0u8; row_bytes(act, cols).unwrap() + 8];
    // Q8_K blocks hold an f32 and need 4-byte alignment.
    let off = buf.as_ptr().align_offset(4);
    let q = &mut buf[off..off + row_bytes(act, cols).unwrap()];
    let mut out = vec![0f32; x.len()];
    for (src, dst) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        quantize_row(act, src, q).unwrap();
        dequantize_row(act, q, dst).unwrap_or_else(|_| dequantize_q8_1(q, dst));
    }
    out
}

/// Q8_1 has no dequantizer of its own; its quants and scale read like Q8_0's.
fn dequantize_q8_1(q: &[u8], dst: &mut [f32]) {
    for (blk, out) in q.chunks_exact(36).zip(dst.chunks_exact_mut(32)) {
        let d = minfer_kernels::blocks::f16_to_f32([blk[0], blk[1]]);
        for (o, &b) in out.iter_mut().zip(&blk[4..36]) {
            *o = d * (b as i8) as f32;
        }
    }
}

/// Bound for |kernel - f64 reference|: float rounding over `n` terms.
fn close(a: f32, b: f32, scale: f32) -> bool {
    (a - b).abs() <= 1e-5 * scale + 1e-6
}

/// Sum of |w·x| terms, the scale of the rounding error of a dot product.
fn abs_dot_scale(w: &MatRef, x: &[f32], n_tok: usize) -> Vec<f32> {
    let wr = row_bytes(w.ty, w.cols).unwrap();
    let mut row = vec![0f32; w.cols];
    let mut out = vec![0f32; n_tok * w.rows];
    for r in 0..w.rows {
        dequantize_row(w.ty, &w.data[r * wr..(r + 1) * wr], &mut row).unwrap();
        for t in 0..n_tok {
            let xs = &x[t * w.cols..(t + 1) * w.cols];
            out[t * w.rows + r] = row.iter().zip(xs).map(|(a, b)| (a * b).abs()).sum();
        }
    }
    out
}

fn run(level: SimdLevel, threads: usize, w: &MatRef, x: &[f32], n_tok: usize) -> Vec<f32> {
    common::product(&Kernels::new(level).unwrap(), threads, w, x, n_tok)
}

/// Every level and thread count gives the scalar bits, and those are the
/// f64 product of the dequantized weights up to rounding.
fn levels_agree_and_round_exact(ty: GgmlType, w: &MatRef, x: &[f32], n_tok: usize) {
    let cols = w.cols;
    let base = run(SimdLevel::Scalar, 1, w, x, n_tok);
    for level in SimdLevel::supported() {
        for threads in [1, 2, 3] {
            let got = run(level, threads, w, x, n_tok);
            assert!(
                got.iter()
                    .zip(&base)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{ty} {level} x{threads}"
            );
        }
    }
    let seen = as_seen_by_kernels(ty, x, cols);
    let reference = matmul_reference(w, &seen, n_tok).unwrap();
    let scale = abs_dot_scale(w, &seen, n_tok);
    for ((a, b), s) in base.iter().zip(&reference).zip(&scale) {
        assert!(close(*a, *b, *s), "{ty}: {a} vs exact {b}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn thread_counts_and_levels_agree(
        ty_index in 0..QUANTIZABLE.len(),
        rows in 1usize..23,
        blocks in 1usize..5,
        n_tok in 1usize..11,
        threads in 1usize..5,
        seed in any::<u64>(),
    ) {
        let ty = QUANTIZABLE[ty_index];
        let cols = 32 * blocks;
        let mut rng = StdRng::seed_from_u64(seed);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = row_major(ty, rows, cols, &data);
        let x: Vec<f32> = (0..n_tok * cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let base = run(SimdLevel::Scalar, 1, &w, &x, n_tok);
        for level in SimdLevel::supported() {
            let got = run(level, threads, &w, &x, n_tok);
            for (i, (a, b)) in got.iter().zip(&base).enumerate() {
                if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
                    prop_assert!((a - b).abs() <= 1e-5 * cols as f32, "{ty} {level} [{i}] {a} vs {b}");
                } else {
                    prop_assert_eq!(a.to_bits(), b.to_bits(), "{} {} [{}]", ty, level, i);
                }
            }
        }
        // Exact, up to rounding, given the quantized activations.
        let seen = as_seen_by_kernels(ty, &x, cols);
        let reference = matmul_reference(&w, &seen, n_tok).unwrap();
        let scale = abs_dot_scale(&w, &seen, n_tok);
        // Q8_1 carries the block sum `s` as f16, as llama.cpp does, so the
        // minimum term of Q4_1/Q5_1 is off by up to 2^-11 of |m * s|
        // (weights here are at most 1 in magnitude).
        let q8_1 = minfer_kernels::act_type(ty) == Some(GgmlType::Q8_1);
        for (i, ((a, b), s)) in base.iter().zip(&reference).zip(&scale).enumerate() {
            let t = i / rows;
            let sum_abs: f32 = seen[t * cols..(t + 1) * cols].iter().map(|v| v.abs()).sum();
            let ok = if q8_1 {
                (a - b).abs() <= 1e-5 * s + 1e-3 * sum_abs
            } else {
                close(*a, *b, *s)
            };
            prop_assert!(ok, "{ty}: {a} vs exact {b}");
        }
    }
}

#[test]
fn k_quant_matrices_from_real_shapes() {
    // K-quant rows cannot be produced by our quantizers, so use random
    // blocks with sane scales and compare levels and thread counts.
    let mut rng = StdRng::seed_from_u64(3);
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        let (rows, cols) = (37, 512);
        let rb = row_bytes(ty, cols).unwrap();
        let mut data: Vec<u8> = (0..rows * rb).map(|_| rng.gen()).collect();
        let d_off = if ty == GgmlType::Q6_K { 208 } else { 0 };
        for blk in data.chunks_exact_mut(ty.type_size() as usize) {
            blk[d_off..d_off + 2].copy_from_slice(&half_bits(0.01));
            if ty != GgmlType::Q6_K {
                blk[2..4].copy_from_slice(&half_bits(0.005));
            }
        }
        let w = row_major(ty, rows, cols, &data);
        let x: Vec<f32> = (0..3 * cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
        levels_agree_and_round_exact(ty, &w, &x, 3);
    }
}

/// The grid types (random bytes are valid blocks; the f16 scale comes
/// first): every level and thread count gives the scalar bits for five
/// tokens (these types have no four-row kernel, so each token takes the
/// single-row one), and the result is the f64 product of the dequantized
/// weights up to rounding.
#[test]
fn grid_type_matrices_agree_across_levels_and_threads() {
    let mut rng = StdRng::seed_from_u64(4);
    for ty in GRID_TYPES {
        let (rows, cols, n_tok) = (37, 768, 5);
        let rb = row_bytes(ty, cols).unwrap();
        let mut data: Vec<u8> = (0..rows * rb).map(|_| rng.gen()).collect();
        for blk in data.chunks_exact_mut(ty.type_size() as usize) {
            blk[..2].copy_from_slice(&half_bits(rng.gen_range(0.001..0.01)));
        }
        let w = row_major(ty, rows, cols, &data);
        let x: Vec<f32> = (0..n_tok * cols)
            .map(|_| rng.gen_range(-1.0..1.0))
            .collect();
        levels_agree_and_round_exact(ty, &w, &x, n_tok);
    }
}

/// MXFP4 (random bytes are valid blocks; the E8M0 scale byte comes first,
/// kept near 2^-8 so the sums stay finite): every level and thread count
/// gives the scalar bits, through the four-row kernel for four of the five
/// tokens, and the result is the f64 product of the dequantized weights up
/// to rounding. Its activations are Q8_0, and its rows are whole 17-byte
/// blocks.
#[test]
fn mxfp4_matrices_agree_across_levels_and_threads() {
    let ty = GgmlType::MXFP4;
    assert_eq!(minfer_kernels::act_type(ty), Some(GgmlType::Q8_0));
    assert_eq!(row_bytes(ty, 64), Some(34));
    assert_eq!(row_bytes(ty, 48), None);
    // Repacked from AVX2 up (the interleaved tiles keep the E8M0 bytes;
    // `tests/packed.rs` checks them); these row-major matrices test the
    // row kernels, which take what is not repacked.
    assert!(minfer_kernels::packed::layout::packable(ty, 16, 32));
    for level in SimdLevel::supported() {
        let k = Kernels::new(level).unwrap();
        assert_eq!(k.packs(ty), level != SimdLevel::Scalar, "{level}");
    }
    let mut rng = StdRng::seed_from_u64(5);
    let (rows, cols, n_tok) = (37, 768, 5);
    let rb = row_bytes(ty, cols).unwrap();
    let mut data: Vec<u8> = (0..rows * rb).map(|_| rng.gen()).collect();
    for blk in data.chunks_exact_mut(ty.type_size() as usize) {
        blk[0] = rng.gen_range(118..=130);
    }
    let w = row_major(ty, rows, cols, &data);
    let x: Vec<f32> = (0..n_tok * cols)
        .map(|_| rng.gen_range(-1.0..1.0))
        .collect();
    levels_agree_and_round_exact(ty, &w, &x, n_tok);
}

fn half_bits(v: f32) -> [u8; 2] {
    minfer_kernels::blocks::f32_to_f16(v)
}

#[test]
fn bad_shapes_are_errors() {
    let kernels = Kernels::new(SimdLevel::Scalar).unwrap();
    let pool = ThreadPool::new(2);
    let mut scratch = ActScratch::default();
    let data = vec![0u8; 18 * 2];
    let w = row_major(GgmlType::Q4_0, 2, 32, &data);
    let mut out = vec![0f32; 2];
    let x = vec![0f32; 32];
    matmul(&kernels, &pool, &w, &x, 1, &mut out, &mut scratch).unwrap();
    assert!(matches!(
        matmul(&kernels, &pool, &w, &x[..31], 1, &mut out, &mut scratch),
        Err(KernelError::BadLength { .. })
    ));
    assert!(matches!(
        matmul(&kernels, &pool, &w, &x, 1, &mut out[..1], &mut scratch),
        Err(KernelError::BadLength { .. })
    ));
    let bad = row_major(GgmlType::Q4_0, 2, 33, &data);
    assert!(matches!(
        matmul(&kernels, &pool, &bad, &x, 1, &mut out, &mut scratch),
        Err(KernelError::NotBlockAligned { .. })
    ));
    let iq = row_major(GgmlType::IQ1_M, 1, 256, &data);
    assert!(matches!(
        matmul(&kernels, &pool, &iq, &x, 1, &mut out, &mut scratch),
        Err(KernelError::UnsupportedType { .. })
    ));
}
