//! The interleaved layout: packing round-trips, and products over packed
//! weights give the row-wise scalar reference's bits for every packable
//! type, shape, token count, thread count and SIMD level.

mod common;

use common::{product, row_major};
use minfer_kernels::matmul::row_bytes;
use minfer_kernels::packed::{dequantize_row, pack, packable, unpack_row, OneRow, TileTuning};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::quant::quantize_row;
use minfer_kernels::{
    matmul, ActScratch, GgmlType, KernelError, Kernels, Layout, MatRef, Product, SimdLevel,
};
use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};

const PACKABLE: [GgmlType; 13] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::Q3_K,
    GgmlType::Q2_K,
    GgmlType::MXFP4,
];

/// Elements per block of a packable type.
fn block_len(ty: GgmlType) -> usize {
    ty.block_size() as usize
}

/// Rows quantized from random values, some of them scaled far apart so
/// that block scales differ widely; a few rows are raw random quants with
/// small random scales, to reach every bit pattern.
fn random_matrix(ty: GgmlType, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let rb = row_bytes(ty, cols).unwrap();
    let mut data = vec![0u8; rows * rb];
    if matches!(
        ty,
        GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::IQ4_NL
            | GgmlType::IQ4_XS
            | GgmlType::Q3_K
            | GgmlType::Q2_K
            | GgmlType::MXFP4
    ) {
        // No quantizer here: random quants and scales, sane f16 factors
        // (Q6_K's `d` at the end, Q4_K/Q5_K's `d` and `dmin` first,
        // IQ4_NL's and IQ4_XS's `d` first, Q3_K's `d` and Q2_K's `d` and
        // `dmin` last). MXFP4's E8M0 byte comes first: mostly the range
        // real weights have, sometimes 0 and 1 (the subnormal scales).
        rng.fill(&mut data[..]);
        let bs = ty.type_size() as usize;
        for blk in data.chunks_exact_mut(bs) {
            if ty == GgmlType::Q6_K {
                blk[208..210].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
            } else if ty == GgmlType::Q3_K {
                blk[108..110].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
            } else if ty == GgmlType::Q2_K {
                blk[80..82].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
                blk[82..84].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
            } else if ty == GgmlType::MXFP4 {
                blk[0] = match rng.gen_range(0..8) {
                    0 => rng.gen_range(0..3),
                    _ => rng.gen_range(110..135),
                };
            } else if matches!(ty, GgmlType::IQ4_NL | GgmlType::IQ4_XS) {
                blk[0..2].copy_from_slice(&half(rng.gen_range(-0.05..0.05)));
            } else {
                blk[0..2].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
                blk[2..4].copy_from_slice(&half(rng.gen_range(-0.01..0.01)));
            }
        }
        return data;
    }
    let mut src = vec![0f32; cols];
    for r in 0..rows {
        let row = &mut data[r * rb..(r + 1) * rb];
        if r % 5 == 4 {
            rng.fill(row);
            let bs = ty.type_size() as usize;
            let min = matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1);
            for blk in row.chunks_exact_mut(bs) {
                blk[..2].copy_from_slice(&half(rng.gen_range(-0.05..0.05)));
                if min {
                    blk[2..4].copy_from_slice(&half(rng.gen_range(-0.5..0.5)));
                }
            }
        } else {
            let scale = 10f32.powi(rng.gen_range(-3..3));
            src.iter_mut()
                .for_each(|v| *v = scale * rng.gen_range(-1.0f32..1.0));
            quantize_row(ty, &src, row).unwrap();
        }
    }
    data
}

fn half(v: f32) -> [u8; 2] {
    minfer_kernels::blocks::f32_to_f16(v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn packed_products_give_the_scalar_row_products_bits(
        ty_index in 0..PACKABLE.len(),
        groups in 1usize..4,
        blocks in 1usize..11,
        n_tok in 1usize..19,
        threads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let ty = PACKABLE[ty_index];
        let (rows, cols) = (16 * groups, block_len(ty) * blocks);
        let mut rng = StdRng::seed_from_u64(seed);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let packed = pack(ty, rows, cols, &data).unwrap();
        // The unpacked sub-block scales: 4 more bytes per row and
        // super-block for Q4_K/Q5_K and Q3_K, 2 for IQ4_XS.
        let grow = match ty {
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q3_K => 4 * rows * (cols / 256),
            GgmlType::IQ4_XS => 2 * rows * (cols / 256),
            _ => 0,
        };
        prop_assert_eq!(packed.len(), data.len() + grow);
        let rb = row_bytes(ty, cols).unwrap();
        let mut row = vec![0u8; rb];
        let (mut a, mut b) = (vec![0f32; cols], vec![0f32; cols]);
        for r in 0..rows {
            unpack_row(ty, rows, cols, &packed, r, &mut row).unwrap();
            prop_assert_eq!(&row[..], &data[r * rb..(r + 1) * rb], "row {} round trip", r);
            // Row lookups on a packed table (a tied embedding).
            dequantize_row(ty, rows, cols, &packed, r, &mut a).unwrap();
            minfer_kernels::dequant::dequantize_row(ty, &data[r * rb..(r + 1) * rb], &mut b).unwrap();
            prop_assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "row {} values", r);
        }
        let x: Vec<f32> = (0..n_tok * cols).map(|_| rng.gen_range(-2.0..2.0)).collect();
        let rows_ref = row_major(ty, rows, cols, &data);
        let base = product(&Kernels::new(SimdLevel::Scalar).unwrap(), 1, &rows_ref, &x, n_tok);
        let packed_ref = MatRef { data: &packed, layout: Layout::Packed, ..rows_ref };
        for level in SimdLevel::supported() {
            let kernels = Kernels::new(level).unwrap();
            let got = product(&kernels, threads, &packed_ref, &x, n_tok);
            for (i, (a, b)) in got.iter().zip(&base).enumerate() {
                prop_assert_eq!(a.to_bits(), b.to_bits(), "{} {} vnni {} [{}]: {} vs {}",
                    ty, level, kernels.uses_vnni(), i, a, b);
            }
        }
    }
}

/// The largest integer sums the SIMD kernels can meet: every quant at its
/// extreme (all bits set, and for Q8_0 also -128, for IQ4_NL and IQ4_XS the
/// -127 of index 0; IQ4_XS's scales at both ends, 31 and -32) against
/// activations that
/// all quantize to +127 or -127. The AVX2 kernels sum byte products in
/// 16-bit lanes, exact only while these stay in range.
#[test]
fn extreme_quants_and_activations_stay_exact() {
    let (rows, blocks, n_tok) = (32, 3, 5);
    for ty in PACKABLE {
        let cols = block_len(ty) * blocks;
        let bs = ty.type_size() as usize;
        let fills: &[u8] = match ty {
            GgmlType::Q8_0 => &[0xFF, 0x80, 0x7F],
            // Codebook index 0 is its largest magnitude, -127.
            GgmlType::IQ4_NL => &[0xFF, 0x00, 0x0F],
            // Indices 7 and 15 are MXFP4's largest, 12 and -12.
            GgmlType::MXFP4 => &[0xFF, 0x77, 0x7F],
            // 0x00: index 0 (-127) with every scale at -32 (and, in every
            // other block, at 31); 0xFF: 113 with 31; 0x0F: -127 with the
            // scales' low bits set and high clear (-17).
            GgmlType::IQ4_XS => &[0xFF, 0x00, 0x0F],
            // 0x00: every Q3_K quant -4 with every scale -32; 0xFF: 3
            // with 31.
            GgmlType::Q3_K => &[0xFF, 0x00],
            _ => &[0xFF],
        };
        for &fill in fills {
            let mut data = vec![fill; rows * row_bytes(ty, cols).unwrap()];
            // Finite, positive block factors where the type keeps them.
            for (i, blk) in data.chunks_exact_mut(bs).enumerate() {
                match ty {
                    GgmlType::Q6_K => blk[208..210].copy_from_slice(&half(0.01)),
                    GgmlType::Q3_K => blk[108..110].copy_from_slice(&half(0.01)),
                    GgmlType::Q2_K => {
                        blk[80..82].copy_from_slice(&half(0.01));
                        blk[82..84].copy_from_slice(&half(0.02));
                    }
                    GgmlType::Q4_K | GgmlType::Q5_K => {
                        blk[0..2].copy_from_slice(&half(0.01));
                        blk[2..4].copy_from_slice(&half(0.02));
                    }
                    GgmlType::Q4_1 | GgmlType::Q5_1 => {
                        blk[0..2].copy_from_slice(&half(0.01));
                        blk[2..4].copy_from_slice(&half(-0.3));
                    }
                    GgmlType::IQ4_XS => {
                        blk[0..2].copy_from_slice(&half(0.01));
                        if i % 2 == 1 {
                            // `scales_h` and `scales_l` all set: 31.
                            blk[2..8].fill(0xFF);
                        }
                    }
                    // 2^-8 (E8M0 byte 121, halved).
                    GgmlType::MXFP4 => blk[0] = 121,
                    _ => blk[0..2].copy_from_slice(&half(0.01)),
                }
            }
            let packed = pack(ty, rows, cols, &data).unwrap();
            for sign in [1.0f32, -1.0] {
                let x = vec![sign; n_tok * cols];
                let rows_ref = row_major(ty, rows, cols, &data);
                let base = scalar_product(&rows_ref, &x, n_tok);
                let what = format!("{ty} fill {fill:#x} x {sign} ");
                assert_packed_bits(&rows_ref, &packed, &x, n_tok, &base, &what);
            }
        }
    }
}

/// Every MXFP4 scale byte from 0 (the subnormal 2^-128) to 143, row `r`
/// scaled by byte `r` alone, widened by the tiles exactly as the reference
/// does.
#[test]
fn mxfp4_tiles_widen_every_scale_byte_exactly() {
    let ty = GgmlType::MXFP4;
    let (rows, blocks, n_tok) = (144, 5, 3);
    let cols = 32 * blocks;
    let mut rng = StdRng::seed_from_u64(7);
    let mut data = vec![0u8; rows * row_bytes(ty, cols).unwrap()];
    rng.fill(&mut data[..]);
    for (i, blk) in data.chunks_exact_mut(17).enumerate() {
        blk[0] = (i / blocks) as u8;
    }
    let packed = pack(ty, rows, cols, &data).unwrap();
    let x: Vec<f32> = (0..n_tok * cols)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    let rows_ref = row_major(ty, rows, cols, &data);
    let base = scalar_product(&rows_ref, &x, n_tok);
    assert!(base.iter().all(|v| v.is_finite() && *v != 0.0));
    assert_packed_bits(&rows_ref, &packed, &x, n_tok, &base, "");
}

/// The product of `w` and `x` on the scalar path, one thread.
fn scalar_product(w: &MatRef, x: &[f32], n_tok: usize) -> Vec<f32> {
    product(&Kernels::new(SimdLevel::Scalar).unwrap(), 1, w, x, n_tok)
}

/// The product of `packed` (the packed form of `rows_ref`) and `x` gives
/// `base`'s bits at every SIMD level; `what` begins each failure's message.
fn assert_packed_bits(
    rows_ref: &MatRef,
    packed: &[u8],
    x: &[f32],
    n_tok: usize,
    base: &[f32],
    what: &str,
) {
    let packed_ref = MatRef {
        data: packed,
        layout: Layout::Packed,
        ..*rows_ref
    };
    for level in SimdLevel::supported() {
        let got = product(&Kernels::new(level).unwrap(), 2, &packed_ref, x, n_tok);
        for (i, (a, b)) in got.iter().zip(base).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what}{level} [{i}]: {a} vs {b}");
        }
    }
}

#[test]
fn shapes_without_the_layout_are_refused() {
    assert!(packable(GgmlType::Q5_0, 32, 896));
    assert!(
        !packable(GgmlType::Q5_0, 24, 896),
        "rows not a multiple of 16"
    );
    assert!(packable(GgmlType::Q6_K, 32, 4864));
    assert!(
        !packable(GgmlType::Q6_K, 32, 896),
        "Q6_K rows of whole super-blocks only"
    );
    assert!(packable(GgmlType::Q4_K, 32, 256));
    assert!(packable(GgmlType::Q2_K, 32, 256));
    assert!(
        !packable(GgmlType::IQ2_XXS, 32, 256),
        "no interleaved IQ2_XXS"
    );
    let data = vec![0u8; 24 * 28 * 22];
    assert!(matches!(
        pack(GgmlType::Q5_0, 24, 896, &data),
        Err(KernelError::UnsupportedType { .. })
    ));
    assert!(matches!(
        pack(GgmlType::Q5_0, 16, 896, &data),
        Err(KernelError::BadLength { .. })
    ));
    let w = MatRef {
        ty: GgmlType::Q5_0,
        rows: 16,
        cols: 896,
        data: &data,
        layout: Layout::Packed,
    };
    let mut row = vec![0f32; 896];
    assert!(matches!(
        dequantize_row(GgmlType::Q5_0, 16, 896, &data[..16 * 28 * 22], 16, &mut row),
        Err(KernelError::RowOutOfRange { .. })
    ));
    let kernels = Kernels::detect();
    let pool = ThreadPool::new(1);
    let mut out = vec![0f32; 16];
    let r = matmul(
        &kernels,
        &pool,
        &w,
        &[0.0; 896],
        1,
        &mut out,
        &mut ActScratch::default(),
    );
    assert!(matches!(r, Err(KernelError::BadLength { .. })));
}

/// Many products run as one job give each product's own bits: interleaved
/// and row-major weights mixed, products with no tokens, more products than
/// one job takes, every level and thread count; an output of the wrong
/// length is an error.
#[test]
fn products_run_together_give_their_own_bits() {
    let mut rng = StdRng::seed_from_u64(11);
    let types = [
        GgmlType::Q4_K,
        GgmlType::MXFP4,
        GgmlType::Q8_0,
        GgmlType::Q6_K,
    ];
    let mut mats = Vec::new();
    for i in 0..40 {
        let ty = types[i % types.len()];
        let (rows, cols) = (16 * (1 + i % 3), 256 * (1 + i % 2));
        let data = random_matrix(ty, rows, cols, &mut rng);
        let packed = i % 5 != 3;
        let bytes = if packed {
            pack(ty, rows, cols, &data).unwrap()
        } else {
            data
        };
        let n_tok = [1, 0, 3, 5][i % 4];
        let x: Vec<f32> = (0..n_tok * cols)
            .map(|_| rng.gen_range(-2.0..2.0))
            .collect();
        mats.push((ty, rows, cols, bytes, packed, n_tok, x));
    }
    fn mref(m: &(GgmlType, usize, usize, Vec<u8>, bool, usize, Vec<f32>)) -> MatRef<'_> {
        MatRef {
            ty: m.0,
            rows: m.1,
            cols: m.2,
            data: &m.3,
            layout: if m.4 { Layout::Packed } else { Layout::Rows },
        }
    }
    for level in SimdLevel::supported()
        .into_iter()
        .filter(|l| *l != SimdLevel::Scalar)
    {
        let kernels = Kernels::new(level).unwrap();
        for threads in [1, 2, 3] {
            let pool = ThreadPool::new(threads);
            let alone: Vec<Vec<f32>> = mats
                .iter()
                .map(|m| product(&kernels, threads, &mref(m), &m.6, m.5))
                .collect();
            let mut outs: Vec<Vec<f32>> = mats.iter().map(|m| vec![f32::NAN; m.5 * m.1]).collect();
            let mut scratch = ActScratch::default();
            let products = mats.iter().zip(outs.iter_mut()).map(|(m, out)| Product {
                w: mref(m),
                x: &m.6,
                n_tok: m.5,
                out,
            });
            minfer_kernels::matmul_many(&kernels, &pool, products, &mut scratch).unwrap();
            for (i, (a, b)) in outs.iter().zip(&alone).enumerate() {
                assert!(
                    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{level} threads {threads} product {i}"
                );
            }
            // An output of the wrong length is refused.
            let mut outs: Vec<Vec<f32>> = mats.iter().map(|m| vec![0.0; m.5 * m.1 + 1]).collect();
            let products = mats.iter().zip(outs.iter_mut()).map(|(m, out)| Product {
                w: mref(m),
                x: &m.6,
                n_tok: m.5,
                out,
            });
            let err = minfer_kernels::matmul_many(&kernels, &pool, products, &mut scratch);
            assert!(matches!(err, Err(KernelError::BadLength { .. })));
        }
    }
}

/// Products of one job that read the same activations in the same format
/// (a layer's gate and up, Q, K and V) quantize them once: each still gets
/// its own bits, beside products of the same rows in other formats, of a
/// prefix of them, and of other rows.
#[test]
fn products_of_one_input_keep_their_own_bits() {
    let mut rng = StdRng::seed_from_u64(12);
    let (cols, n_tok) = (512, 5);
    let x: Vec<f32> = (0..n_tok * cols)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    let other: Vec<f32> = (0..n_tok * cols)
        .map(|_| rng.gen_range(-2.0..2.0))
        .collect();
    // (type, rows, which input: 0 all of `x`, 1 its first three rows, 2 `other`)
    let specs = [
        (GgmlType::Q4_K, 32, 0),
        (GgmlType::Q6_K, 16, 0),
        (GgmlType::Q8_0, 48, 0),
        (GgmlType::Q4_0, 16, 0),
        (GgmlType::Q5_1, 32, 0),
        (GgmlType::Q4_1, 16, 0),
        (GgmlType::Q4_K, 16, 1),
        (GgmlType::Q8_0, 16, 1),
        (GgmlType::Q4_K, 16, 2),
        (GgmlType::Q8_0, 32, 0),
    ];
    let mats: Vec<Mat> = specs
        .iter()
        .map(|&(ty, rows, input)| {
            let data = random_matrix(ty, rows, cols, &mut rng);
            let x: &[f32] = match input {
                0 => &x,
                1 => &x[..3 * cols],
                _ => &other,
            };
            (ty, rows, pack(ty, rows, cols, &data).unwrap(), x)
        })
        .collect();
    type Mat<'a> = (GgmlType, usize, Vec<u8>, &'a [f32]);
    fn mref<'m>(m: &'m Mat<'_>, cols: usize) -> MatRef<'m> {
        MatRef {
            ty: m.0,
            rows: m.1,
            cols,
            data: &m.2,
            layout: Layout::Packed,
        }
    }
    for level in SimdLevel::supported() {
        let kernels = Kernels::new(level).unwrap();
        for threads in [1, 2] {
            let pool = ThreadPool::new(threads);
            let alone: Vec<Vec<f32>> = mats
                .iter()
                .map(|m| product(&kernels, threads, &mref(m, cols), m.3, m.3.len() / cols))
                .collect();
            let mut outs: Vec<Vec<f32>> = mats
                .iter()
                .map(|m| vec![f32::NAN; m.3.len() / cols * m.1])
                .collect();
            let products = mats.iter().zip(outs.iter_mut()).map(|(m, out)| Product {
                w: mref(m, cols),
                x: m.3,
                n_tok: m.3.len() / cols,
                out,
            });
            let mut scratch = ActScratch::default();
            minfer_kernels::matmul_many(&kernels, &pool, products, &mut scratch).unwrap();
            for (i, (a, b)) in outs.iter().zip(&alone).enumerate() {
                assert!(
                    a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{level} threads {threads} product {i} ({:?})",
                    mats[i].0
                );
            }
        }
    }
}

/// How a lone token's products read the weights (the tile kernel and the
/// prefetch distance, which `Kernels::measure_tuning` picks per machine)
/// changes their speed only: every choice gives the default's bits, for a
/// lone token and for a product of several.
#[test]
fn every_one_row_tuning_gives_the_same_bits() {
    let mut rng = StdRng::seed_from_u64(5);
    for ty in PACKABLE {
        let (rows, cols) = (48, 512);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let packed = pack(ty, rows, cols, &data).unwrap();
        let w = MatRef {
            ty,
            rows,
            cols,
            data: &packed,
            layout: Layout::Packed,
        };
        for level in SimdLevel::supported() {
            let kernels = Kernels::new(level).unwrap();
            for n_tok in [1, 5] {
                let x: Vec<f32> = (0..n_tok * cols)
                    .map(|_| rng.gen_range(-2.0..2.0))
                    .collect();
                let base = product(&kernels, 2, &w, &x, n_tok);
                for ahead_kib in [0, 4, 8, 32] {
                    for narrow in [false, true] {
                        let mut tuning = TileTuning::default();
                        tuning.set_one_row(ty, OneRow { ahead_kib, narrow });
                        let got = product(&kernels.with_tuning(tuning), 2, &w, &x, n_tok);
                        assert!(
                            got.iter()
                                .zip(&base)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{ty} {level} n_tok {n_tok} ahead {ahead_kib} KiB narrow {narrow}"
                        );
                    }
                }
            }
        }
    }
}

/// The measurement picks, for each interleaved type among its probes, one
/// of the choices it tries, and leaves other types at the default; a
/// probe that is not interleaved is refused and leaves its type alone.
#[test]
fn measured_tuning_picks_a_tried_choice_per_type() {
    let mut rng = StdRng::seed_from_u64(8);
    let (rows, cols) = (256, 1024);
    let mats: Vec<(GgmlType, Vec<u8>, Layout)> = [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0]
        .into_iter()
        .map(|ty| {
            let data = random_matrix(ty, rows, cols, &mut rng);
            match ty {
                GgmlType::Q8_0 => (ty, data, Layout::Rows),
                _ => (ty, pack(ty, rows, cols, &data).unwrap(), Layout::Packed),
            }
        })
        .collect();
    let probes: Vec<MatRef> = mats
        .iter()
        .map(|(ty, data, layout)| MatRef {
            ty: *ty,
            rows,
            cols,
            data,
            layout: *layout,
        })
        .collect();
    let kernels = Kernels::detect();
    let tuning = kernels.measure_tuning(&ThreadPool::new(2), &probes);
    let wide = kernels.isa().avx512() && kernels.uses_vnni();
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let one = tuning.one_row(ty);
        assert!([0, 4, 8].contains(&one.ahead_kib), "{ty}: {one:?}");
        assert!(
            !one.narrow || wide,
            "{ty}: the AVX2 tile beside no wider one"
        );
    }
    assert_eq!(tuning.one_row(GgmlType::Q8_0), OneRow::DEFAULT);
    assert_eq!(tuning.one_row(GgmlType::Q5_0), OneRow::DEFAULT);
}
