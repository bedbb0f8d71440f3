//! Every SIMD dot product equals the scalar reference on random blocks:
//! bit for bit for the quantized types (their sums are exact integers and
//! the float steps are the same operations in the same order), and within
//! rounding for the float types (FMA lanes versus the scalar order).

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

const TYPES: [GgmlType; 15] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_XS,
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
];

#[test]
fn simd_dots_equal_scalar_reference() {
    let scalar = Kernels::new(SimdLevel::Scalar).unwrap();
    let levels = SimdLevel::supported();
    eprintln!("SIMD levels tested here: {levels:?}");
    let mut rng = StdRng::seed_from_u64(7);
    let mut checked = 0;
    for level in levels.into_iter().filter(|&l| l != SimdLevel::Scalar) {
        let k = Kernels::new(level).unwrap();
        for ty in TYPES {
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
        for ty in TYPES {
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
        ] {
            assert_eq!(k.dot(ty).unwrap().level, SimdLevel::Avx2, "{ty} at {level}");
        }
    }
}

#[test]
fn unsupported_levels_and_types_are_errors() {
    assert!(SimdLevel::parse("sse9").is_err());
    let k = Kernels::new(SimdLevel::Scalar).unwrap();
    assert!(k.dot(GgmlType::IQ2_XXS).is_err());
    for level in SimdLevel::ALL {
        assert_eq!(Kernels::new(level).is_ok(), level.is_supported());
    }
}
