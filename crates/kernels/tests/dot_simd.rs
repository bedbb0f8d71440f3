//! Every SIMD dot product equals the scalar reference on random blocks:
//! bit for bit for the quantized types (their sums are exact integers and
//! the float steps are the same operations in the same order), and within
//! rounding for the float types (FMA lanes versus the scalar order).

mod common;

use common::{dot_types, GRID_TYPES};
use minfer_kernels::blocks::*;
use minfer_kernels::{scale_table, scale_table_len, GgmlType, Kernels, SimdLevel};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// A random finite f16 scale of moderate size.
fn scale(rng: &mut StdRng) -> F16Bits {
    f32_to_f16(rng.gen_range(-0.05f32..0.05))
}

/// Random weight rows of `nb` blocks, with every f16 scale field finite.
fn weights(ty: GgmlType, nb: usize, rng: &mut StdRng) -> Vec<u8> {
    let size = ty.type_size() as usize;
    let mut b: Vec<u8> = (0..nb * size).map(|_| rng.gen()).collect();
    // Offsets of the f16 fields within each block.
    let halves: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL | GgmlType::Q5_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::IQ4_XS => &[0],
        // The E8M0 scale byte: mostly moderate, sometimes the subnormal and
        // boundary exponents (254 and 255 would overflow the sums).
        GgmlType::MXFP4 => {
            for blk in b.chunks_exact_mut(size) {
                blk[0] = if rng.gen_range(0..8) == 0 {
                    [0, 1, 2, 127, 128][rng.gen_range(0..5)]
                } else {
                    rng.gen_range(100..=150)
                };
            }
            &[]
        }
        // Every grid type keeps its one f16 scale first; any bits elsewhere
        // are a valid block (each index field reaches exactly the grid).
        GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S
        | GgmlType::IQ1_S => &[0],
        GgmlType::F16 => {
            for h in b.chunks_exact_mut(2) {
                h.copy_from_slice(&f32_to_f16(rng.gen_range(-2.0f32..2.0)));
            }
            &[]
        }
        GgmlType::BF16 => {
            for h in b.chunks_exact_mut(2) {
                let v = rng.gen_range(-2.0f32..2.0).to_bits() >> 16;
                h.copy_from_slice(&(v as u16).to_le_bytes());
            }
            &[]
        }
        GgmlType::F32 => {
            for f in b.chunks_exact_mut(4) {
                f.copy_from_slice(&rng.gen_range(-2.0f32..2.0).to_le_bytes());
            }
            &[]
        }
        _ => unreachable!(),
    };
    for blk in b.chunks_exact_mut(size) {
        for &o in halves {
            blk[o..o + 2].copy_from_slice(&scale(rng));
        }
    }
    b
}

fn q8(rng: &mut StdRng) -> [i8; 32] {
    std::array::from_fn(|_| rng.gen_range(-127..=127))
}

/// Random activations in format `act` for `n` elements.
fn activations(act: GgmlType, n: usize, rng: &mut StdRng) -> Vec<u8> {
    match act {
        GgmlType::Q8_0 => {
            let v: Vec<BlockQ8_0> = (0..n / 32)
                .map(|_| BlockQ8_0 {
                    d: scale(rng),
                    qs: q8(rng),
                })
                .collect();
            bytemuck::cast_slice(&v).to_vec()
        }
        GgmlType::Q8_1 => {
            let v: Vec<BlockQ8_1> = (0..n / 32)
                .map(|_| {
                    let qs = q8(rng);
                    let d = rng.gen_range(0.0f32..0.05);
                    let sum: i32 = qs.iter().map(|&q| q as i32).sum();
                    BlockQ8_1 {
                        d: f32_to_f16(d),
                        s: f32_to_f16(d * sum as f32),
                        qs,
                    }
                })
                .collect();
            bytemuck::cast_slice(&v).to_vec()
        }
        GgmlType::Q8_K => {
            let v: Vec<BlockQ8K> = (0..n / 256)
                .map(|_| {
                    let qs: [i8; 256] = std::array::from_fn(|_| rng.gen_range(-127..=127));
                    let bsums = std::array::from_fn(|j| {
                        qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum()
                    });
                    BlockQ8K {
                        d: rng.gen_range(-0.01f32..0.01),
                        qs,
                        bsums,
                    }
                })
                .collect();
            bytemuck::cast_slice(&v).to_vec()
        }
        GgmlType::F32 => (0..n)
            .flat_map(|_| rng.gen_range(-2.0f32..2.0).to_le_bytes())
            .collect(),
        _ => unreachable!(),
    }
}

#[test]
fn simd_dots_equal_scalar_reference() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    let levels = SimdLevel::supported();
    eprintln!("SIMD levels tested here: {levels:?}");
    let mut rng = StdRng::seed_from_u64(7);
    let mut checked = 0;
    for level in levels.into_iter().filter(|&l| l != SimdLevel::Scalar) {
        let k = Kernels::new(level).unwrap();
        for ty in dot_types() {
            let reference = scalar.dot(ty).unwrap();
            let fast = k.dot(ty).unwrap();
            let block = ty.block_size() as usize;
            let unit = block.max(256);
            for &blocks_per_row in &[1usize, 2, 3, 4, 5, 7, 8, 9, 17, 28, 36] {
                let n = if block == 1 {
                    blocks_per_row * 8 + 3
                } else {
                    blocks_per_row * block
                };
                if reference.act == GgmlType::Q8_K && n % unit != 0 {
                    continue;
                }
                for _ in 0..20 {
                    let w = weights(ty, n / block, &mut rng);
                    let a = activations(reference.act, n, &mut rng);
                    let want = (reference.dot)(n, &w, &a);
                    let got = (fast.dot)(n, &w, &a);
                    if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
                        let tol = 1e-5 * n as f32;
                        assert!(
                            (want - got).abs() <= tol,
                            "{ty} {level} n={n}: {got} vs {want}"
                        );
                    } else {
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{ty} at {level} (kernel {}) n={n}: {got} vs scalar {want}",
                            fast.level
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("{checked} SIMD dot products compared");
}

/// The four-row kernels give, for each activation row, exactly what the
/// scalar reference gives for that pair.
#[test]
fn four_row_dots_equal_scalar_reference() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut checked = 0;
    for level in SimdLevel::supported() {
        let k = Kernels::new(level).unwrap();
        for ty in dot_types() {
            let Some(dot4) = k.dot(ty).unwrap().dot4 else {
                continue;
            };
            let reference = scalar.dot(ty).unwrap();
            let block = ty.block_size() as usize;
            for &blocks_per_row in &[1usize, 2, 3, 4, 5, 7, 8, 9, 17, 18, 28, 36] {
                let n = blocks_per_row * block;
                if reference.act == GgmlType::Q8_K && !n.is_multiple_of(256) {
                    continue;
                }
                for _ in 0..10 {
                    let w = weights(ty, n / block, &mut rng);
                    let a: Vec<Vec<u8>> = (0..4)
                        .map(|_| activations(reference.act, n, &mut rng))
                        .collect();
                    let tables: Vec<Vec<f32>> = a
                        .iter()
                        .map(|a| {
                            let mut t = vec![0f32; scale_table_len(reference.act, n)];
                            scale_table(reference.act, a, &mut t);
                            t
                        })
                        .collect();
                    let got = dot4(
                        n,
                        &w,
                        [&a[0], &a[1], &a[2], &a[3]],
                        [&tables[0], &tables[1], &tables[2], &tables[3]],
                    );
                    for (t, g) in got.iter().enumerate() {
                        let want = (reference.dot)(n, &w, &a[t]);
                        assert_eq!(
                            g.to_bits(),
                            want.to_bits(),
                            "{ty} at {level} n={n} row {t}: {g} vs scalar {want}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("{checked} four-row products compared");
    if SimdLevel::supported().contains(&SimdLevel::Avx2) {
        assert!(checked > 0, "no four-row kernel was tested");
    }
}

/// The scalar references of the grid types compute what they claim: the dot
/// of the dequantized weights (bit-exact with gguf-py, see
/// `dequant_reference.rs`) with the dequantized Q8_K activations, evaluated
/// in f64. The reference sums exact integers and then rounds a handful of
/// times per super-block, so the bound is a few f32 roundings of the sum of
/// absolute products, `(4 + blocks) * 2^-24 * sum |w * a|`.
#[test]
fn grid_type_references_equal_the_dequantized_dot() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    let mut rng = StdRng::seed_from_u64(0x1C_0DE);
    let mut worst = 0f64;
    for ty in GRID_TYPES {
        let reference = scalar.dot(ty).unwrap();
        assert_eq!(reference.act, GgmlType::Q8_K, "{ty}");
        for &nb in &[1usize, 2, 3, 8, 17, 36] {
            let n = nb * 256;
            for _ in 0..20 {
                let w = weights(ty, nb, &mut rng);
                let a = activations(GgmlType::Q8_K, n, &mut rng);
                let mut wf = vec![0f32; n];
                minfer_kernels::dequant::dequantize_row(ty, &w, &mut wf).unwrap();
                let acts: &[BlockQ8K] = bytemuck::cast_slice(&a);
                let (mut exact, mut abs) = (0f64, 0f64);
                for (i, &wi) in wf.iter().enumerate() {
                    let b = &acts[i / 256];
                    let ai = b.d as f64 * b.qs[i % 256] as f64;
                    exact += wi as f64 * ai;
                    abs += (wi as f64 * ai).abs();
                }
                let got = (reference.dot)(n, &w, &a) as f64;
                let bound = (4 + nb) as f64 * f64::powi(2.0, -24) * abs;
                assert!(
                    (got - exact).abs() <= bound,
                    "{ty} n={n}: reference {got} vs dequantized dot {exact} (bound {bound:e})"
                );
                worst = worst.max((got - exact).abs() / abs.max(f64::MIN_POSITIVE));
            }
        }
    }
    eprintln!("largest error relative to sum |w*a|: {worst:e}");
}

/// Extreme blocks of the grid types: every field at its largest (all bits
/// set: the last grid entries, all signs negative, the largest scales) or
/// clear, against activations of ±127, where any saturating step of a SIMD
/// kernel would show.
#[test]
fn grid_type_extreme_blocks_equal_scalar_reference() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    for level in SimdLevel::supported() {
        let k = Kernels::new(level).unwrap();
        for ty in GRID_TYPES {
            let size = ty.type_size() as usize;
            for fill in [0xFFu8, 0x00, 0xAA] {
                let mut w = vec![fill; 2 * size];
                for blk in w.chunks_exact_mut(size) {
                    blk[..2].copy_from_slice(&f32_to_f16(0.75));
                }
                for q in [127i8, -127] {
                    let b = BlockQ8K {
                        d: 0.5,
                        qs: [q; 256],
                        bsums: [16 * q as i16; 16],
                    };
                    let a = bytemuck::cast_slice(&[b, b]).to_vec();
                    let want = (scalar.dot(ty).unwrap().dot)(512, &w, &a);
                    let got = (k.dot(ty).unwrap().dot)(512, &w, &a);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} at {level}, fill {fill:#x}, q {q}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_required_type_has_a_simd_kernel() {
    for level in SimdLevel::supported() {
        if level == SimdLevel::Scalar {
            continue;
        }
        let k = Kernels::new(level).unwrap();
        // The K-quants have a kernel of every level (AVX2 with AVX-VNNI
        // runs the AVX2 row kernels: its fused form is in the interleaved
        // tiles); the legacy types run their AVX2 kernels at the AVX-512
        // level (measured as fast, and faster on rows with a tail of
        // blocks).
        let k_level = if level == SimdLevel::Avx2Vnni {
            SimdLevel::Avx2
        } else {
            level
        };
        for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
            assert_eq!(
                k.dot(ty).unwrap().level,
                k_level,
                "{ty} has no {level} kernel"
            );
        }
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::IQ4_NL,
            GgmlType::MXFP4,
        ] {
            assert_eq!(k.dot(ty).unwrap().level, SimdLevel::Avx2, "{ty} at {level}");
            assert!(k.dot(ty).unwrap().dot4.is_some(), "{ty} at {level}");
        }
        // The grid types have a kernel of every level, but IQ3_XXS, whose
        // AVX-512 form measured slower, runs its AVX2 one at that level.
        for ty in GRID_TYPES {
            let want = if ty == GgmlType::IQ3_XXS {
                SimdLevel::Avx2
            } else {
                k_level
            };
            assert_eq!(k.dot(ty).unwrap().level, want, "{ty} at {level}");
        }
    }
}

#[test]
fn unsupported_levels_and_types_are_errors() {
    assert!(SimdLevel::parse("sse9").is_err());
    let k = Kernels::new(SimdLevel::Scalar).unwrap();
    // Types without a dot product are typed errors at every level.
    for level in SimdLevel::supported() {
        let k = Kernels::new(level).unwrap();
        for ty in [GgmlType::IQ1_M, GgmlType::TQ1_0, GgmlType::TQ2_0] {
            assert!(k.dot(ty).is_err(), "{ty} at {level}");
        }
    }
    assert!(k.dot(GgmlType::Q8_K).is_err());
    for level in SimdLevel::ALL {
        assert_eq!(Kernels::new(level).is_ok(), level.is_supported());
    }
}

/// The e2m1 values of the sixteen MXFP4 codes (OCP MX spec), not doubled.
const E2M1: [f64; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// The MXFP4 scalar reference computes what it claims: the dot of the
/// weights (decoded from the MX spec's values) with the dequantized Q8_0
/// activations, in f64. With
/// one block and power-of-two activation scales every step is exact, so
/// that case must match to the bit at every scale exponent (the subnormal
/// 0 and 1, and 254); with several blocks the f32 sums round, within
/// `(4 + blocks) * 2^-24 * sum |w * a|`.
#[test]
fn mxfp4_reference_equals_the_dequantized_dot() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    let reference = scalar.dot(GgmlType::MXFP4).unwrap();
    assert_eq!(reference.act, GgmlType::Q8_0);
    assert_eq!(
        minfer_kernels::act_type(GgmlType::MXFP4),
        Some(GgmlType::Q8_0)
    );
    let mut rng = StdRng::seed_from_u64(0x4D_F4);
    // In f64 from the definition, not through `dequantize_row`: at e = 254
    // the weights themselves overflow f32, though their products with a
    // small activation scale do not.
    let exact_dot = |w: &[u8], a: &[u8], n: usize| {
        let ws: &[BlockMXFP4] = bytemuck::cast_slice(w);
        let acts: &[BlockQ8_0] = bytemuck::cast_slice(a);
        let (mut exact, mut abs) = (0f64, 0f64);
        for i in 0..n {
            let x = &ws[i / 32];
            let byte = x.qs[i % 16];
            let code = if i % 32 < 16 { byte & 0x0F } else { byte >> 4 };
            let wi = f64::powi(2.0, x.e as i32 - 127) * E2M1[code as usize];
            let b = &acts[i / 32];
            let p = wi * (f16_to_f32(b.d) as f64 * b.qs[i % 32] as f64);
            exact += p;
            abs += p.abs();
        }
        (exact, abs)
    };
    for e in [0u8, 1, 2, 64, 127, 128, 129, 200, 254] {
        for _ in 0..50 {
            let mut w = weights(GgmlType::MXFP4, 1, &mut rng);
            w[0] = e;
            // 2^-24 (an f16 subnormal) keeps 2^126 * 12 * 127 * 32 finite.
            let da = if e > 128 { f64::powi(2.0, -24) } else { 1.0 };
            let a = BlockQ8_0 {
                d: f32_to_f16(da as f32),
                qs: q8(&mut rng),
            };
            let (exact, _) = exact_dot(&w, bytemuck::bytes_of(&a), 32);
            let got = (reference.dot)(32, &w, bytemuck::bytes_of(&a));
            assert_eq!(got as f64, exact, "e = {e}");
        }
    }
    for &nb in &[1usize, 2, 3, 4, 5, 8, 17, 36] {
        let n = nb * 32;
        for _ in 0..20 {
            let w = weights(GgmlType::MXFP4, nb, &mut rng);
            let a = activations(GgmlType::Q8_0, n, &mut rng);
            let (exact, abs) = exact_dot(&w, &a, n);
            let got = (reference.dot)(n, &w, &a) as f64;
            let bound = (4 + nb) as f64 * f64::powi(2.0, -24) * abs;
            assert!(
                (got - exact).abs() <= bound,
                "n={n}: {got} vs exact {exact} (bound {bound})"
            );
        }
    }
}
