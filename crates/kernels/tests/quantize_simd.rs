//! The activation quantizers' vector code (`quantize_row_on` at every
//! level this CPU runs) writes the scalar quantizers' bytes, block for
//! block: on random rows and on the blocks where a rule shows (a tie
//! between `+amax` and `-amax`, halves that round to even, zeros, the
//! extremes of the f32 range, NaN and infinities).

use minfer_kernels::quant::{quantize_row, quantize_row_on};
use minfer_kernels::{GgmlType, Isa, SimdLevel};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Every level this CPU runs, scalar included.
fn isas() -> Vec<Isa> {
    [
        SimdLevel::Scalar,
        SimdLevel::Avx2,
        SimdLevel::Avx2Vnni,
        SimdLevel::Avx512,
    ]
    .into_iter()
    .filter_map(|l| Isa::new(l).ok())
    .collect()
}

/// One block of `n` values of a kind chosen by `kind`.
fn block(kind: usize, n: usize, rng: &mut StdRng) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|_| rng.gen_range(-3.0f32..3.0)).collect();
    match kind {
        // Plain random values.
        0 => {}
        // A tie of magnitudes, the positive one first or the negative one.
        1 | 2 => {
            let (i, j) = (rng.gen_range(0..n / 2), rng.gen_range(n / 2..n));
            let s = if kind == 1 { 1.0 } else { -1.0 };
            x[i] = 7.5 * s;
            x[j] = -7.5 * s;
        }
        // A tie inside one group of eight lanes.
        11 | 12 => {
            let g = 8 * rng.gen_range(0..n / 8);
            let a = rng.gen_range(0..7);
            let b = rng.gen_range(a + 1..8);
            let s = if kind == 11 { 1.0 } else { -1.0 };
            x[g + a] = 9.25 * s;
            x[g + b] = -9.25 * s;
        }
        // Multiples of a half against an amax of 127: `v * id` is exact
        // and ties go to even.
        3 => {
            for v in &mut x {
                *v = (rng.gen_range(-254i32..=254) as f32) * 0.5;
            }
            x[rng.gen_range(0..n)] = 127.0;
        }
        4 => x.fill(0.0),
        5 => x
            .iter_mut()
            .for_each(|v| *v = if rng.gen() { 0.0 } else { -0.0 }),
        // The ends of the f32 range: huge, tiny normal and subnormal.
        6 => {
            for v in &mut x {
                *v = match rng.gen_range(0..4) {
                    0 => f32::MAX * rng.gen_range(-1.0f32..1.0),
                    1 => f32::MIN_POSITIVE * rng.gen_range(-4.0f32..4.0),
                    2 => f32::from_bits(rng.gen_range(1u32..0x0080_0000)),
                    _ => -f32::from_bits(rng.gen_range(1u32..0x0080_0000)),
                };
            }
        }
        // A lone value of largest magnitude (maps to ±127).
        7 => x[rng.gen_range(0..n)] = -1e4,
        // Non-finite values somewhere in the block.
        8 => x[rng.gen_range(0..n)] = f32::NAN,
        9 => x[rng.gen_range(0..n)] = f32::INFINITY,
        10 => x[rng.gen_range(0..n)] = f32::NEG_INFINITY,
        13 => {
            x[rng.gen_range(0..n)] = f32::NAN;
            x[rng.gen_range(0..n)] = f32::INFINITY;
        }
        _ => unreachable!("kinds are 0..14"),
    }
    x
}

#[test]
fn vector_quantizers_write_the_scalar_bytes() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0a17);
    let isas = isas();
    eprintln!(
        "levels: {:?}",
        isas.iter().map(|i| i.level()).collect::<Vec<_>>()
    );
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let n = ty.block_size() as usize;
        let size = ty.type_size() as usize;
        for round in 0..200 {
            // A row of several blocks of mixed kinds.
            let blocks = 1 + round % 5;
            let x: Vec<f32> = (0..blocks)
                .flat_map(|_| block(rng.gen_range(0..14), n, &mut rng))
                .collect();
            let mut want = vec![0u8; blocks * size];
            quantize_row(ty, &x, &mut want).expect("scalar");
            for &isa in &isas {
                // Aligned (as the scratch is) and one byte off.
                for off in [0usize, 1] {
                    let mut buf = vec![0u64; (blocks * size + 1).div_ceil(8)];
                    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf);
                    let got = &mut bytes[off..off + blocks * size];
                    quantize_row_on(isa, ty, &x, got).expect("vector");
                    assert!(
                        got == &want[..],
                        "{ty:?} at {:?} (offset {off}) differs from the scalar bytes for {x:?}",
                        isa.level()
                    );
                }
            }
        }
    }
}

#[test]
fn vector_quantizers_check_like_the_scalar_one() {
    for isa in isas() {
        for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
            let n = ty.block_size() as usize;
            let size = ty.type_size() as usize;
            let x = vec![1.0f32; n + 1];
            let mut dst = vec![0u8; 2 * size];
            assert_eq!(
                quantize_row_on(isa, ty, &x, &mut dst[..size]),
                quantize_row(ty, &x, &mut dst[..size])
            );
            assert!(quantize_row_on(isa, ty, &x[..n], &mut dst).is_err());
        }
    }
}
