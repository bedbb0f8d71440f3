//! What the kernel tests (and the matvec bench, which includes this file)
//! share: the lists of weight types they sweep, and weight operands.

// Each test includes this module and uses part of it.
#![allow(dead_code)]

use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, GgmlType, Kernels, Layout, MatRef};

/// The block types with a dot kernel of their own (and a four-row form).
pub const BLOCK_TYPES: [GgmlType; 13] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::MXFP4,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_XS,
];

/// The grid types (Q8_K activations, no four-row form, not repacked).
pub const GRID_TYPES: [GgmlType; 6] = [
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
];

/// The float types.
pub const FLOAT_TYPES: [GgmlType; 3] = [GgmlType::F32, GgmlType::F16, GgmlType::BF16];

/// Every weight type with a dot kernel: the block, grid and float types,
/// in that order.
pub fn dot_types() -> Vec<GgmlType> {
    [&BLOCK_TYPES[..], &GRID_TYPES, &FLOAT_TYPES].concat()
}

/// The weight types `quantize_row` makes from random f32 rows (and
/// `dequantize_row` reads back): the float types and the legacy blocks.
pub const QUANTIZABLE: [GgmlType; 8] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
];

/// `data` as a `rows` × `cols` matrix of `ty` in the file's row layout.
pub fn row_major(ty: GgmlType, rows: usize, cols: usize, data: &[u8]) -> MatRef<'_> {
    MatRef {
        ty,
        rows,
        cols,
        data,
        layout: Layout::Rows,
    }
}

/// `w` times the `n_tok` activation rows `x` on `threads` threads; the
/// output starts as NaN, so a value the product leaves unwritten shows.
pub fn product(kernels: &Kernels, threads: usize, w: &MatRef, x: &[f32], n_tok: usize) -> Vec<f32> {
    let pool = ThreadPool::new(threads);
    let mut out = vec![f32::NAN; n_tok * w.rows];
    let mut scratch = ActScratch::default();
    matmul(kernels, &pool, w, x, n_tok, &mut out, &mut scratch).unwrap();
    out
}
