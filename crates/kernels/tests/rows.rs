//! The f16/f32 row routines: every path against the scalar reference, bit
//! for bit, and the conversions against bit-level definitions of IEEE
//! half precision (exact widening, narrowing rounded to nearest even).

use minfer_kernels::blocks::{f16_to_f32, f32_to_f16};
use minfer_kernels::rows::dot_f32;
use minfer_kernels::{f16_to_f32_row, f32_to_f16_row, KernelError, RowKernels, Rows};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// f16 bits → f32, from the format's definition.
fn def_f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let mag = match exp {
        // Zero and subnormals: man * 2^-24, exact in f32.
        0 => man as f32 * 2f32.powi(-24),
        31 => f32::from_bits(0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(((exp + 112) << 23) | (man << 13)),
    };
    f32::from_bits(mag.to_bits() | sign)
}

/// f32 → f16 bits rounded to nearest, ties to even, from the format's
/// definition (the arithmetic is exact in f64).
fn def_f32_to_f16(x: f32) -> u16 {
    let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7e00;
    }
    let a = f64::from(x.abs());
    // Halfway between the largest half (65504) and 2^16, rounds to even.
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a == 0.0 {
        return sign;
    }
    let exp_of = |v: f64| ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let quantum = 2f64.powi(exp_of(a).max(-14) - 10);
    let v = (a / quantum).round_ties_even() * quantum;
    if v == 0.0 {
        return sign;
    }
    if v < 2f64.powi(-14) {
        return sign | (v / 2f64.powi(-24)) as u16;
    }
    let e = exp_of(v);
    let man = (v / 2f64.powi(e) - 1.0) * 1024.0;
    sign | (((e + 15) as u16) << 10) | man as u16
}

fn is_half_nan(h: u16) -> bool {
    h & 0x7c00 == 0x7c00 && h & 0x3ff != 0
}

/// Equal bits, or both NaN (payloads may differ between paths).
fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_f16(a: u16, b: u16) -> bool {
    a == b || (is_half_nan(a) && is_half_nan(b))
}

#[test]
fn widening_every_half_is_exact_on_every_path() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    for path in RowKernels::supported() {
        // Whole vectors, then unaligned starts and lengths with a remainder.
        for (start, len) in [(0, all.len()), (3, 13), (1, 7), (5, 1000), (9, 0)] {
            let src = &all[start..start + len];
            let mut dst = vec![0.0f32; len];
            path.f16_to_f32(src, &mut dst).unwrap();
            for (&h, &y) in src.iter().zip(&dst) {
                assert!(
                    same_f32(y, def_f16_to_f32(h)),
                    "{path:?}: {h:#06x} -> {y:e}"
                );
                assert!(
                    same_f32(y, f16_to_f32(h.to_le_bytes())),
                    "{path:?}: {h:#06x}"
                );
            }
        }
    }
    let mut dst = vec![0.0f32; all.len()];
    f16_to_f32_row(&all, &mut dst).unwrap();
    assert!(all
        .iter()
        .zip(&dst)
        .all(|(&h, &y)| same_f32(y, def_f16_to_f32(h))));
}

/// Values where narrowing is delicate: signed zeros, infinities, NaNs,
/// the overflow threshold, ties and near-ties in the normal and
/// subnormal ranges, and values below the smallest half.
fn special_f32() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        65504.0,
        65519.996,
        65520.0,
        -65520.0,
        65536.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        1.0,
        1.0 + f32::EPSILON,
    ];
    for e in -26..17 {
        let p = 2f32.powi(e);
        for frac in [
            0.0,
            0.5,
            1.0 / 1024.0,
            1.5 / 1024.0,
            2.5 / 1024.0,
            0.999_999_9,
        ] {
            let x = p * (1.0 + frac);
            v.extend([
                x,
                -x,
                f32::from_bits(x.to_bits() + 1),
                f32::from_bits(x.to_bits() - 1),
            ]);
        }
    }
    // Halves of the subnormal quantum: exact ties.
    for k in 0..64u32 {
        v.push((k as f32 + 0.5) * 2f32.powi(-24));
    }
    v
}

fn check_narrowing(src: &[f32]) {
    for path in RowKernels::supported() {
        let mut dst = vec![0u16; src.len()];
        path.f32_to_f16(src, &mut dst).unwrap();
        for (&x, &h) in src.iter().zip(&dst) {
            assert!(
                same_f16(h, def_f32_to_f16(x)),
                "{path:?}: {x:e} ({:#010x}) -> {h:#06x}, expected {:#06x}",
                x.to_bits(),
                def_f32_to_f16(x)
            );
            let scalar = u16::from_le_bytes(f32_to_f16(x));
            assert!(
                same_f16(h, scalar),
                "{path:?}: {x:e} -> {h:#06x} vs {scalar:#06x}"
            );
        }
    }
    let mut dst = vec![0u16; src.len()];
    f32_to_f16_row(src, &mut dst).unwrap();
    for (&x, &h) in src.iter().zip(&dst) {
        assert!(same_f16(h, def_f32_to_f16(x)), "{x:e}");
    }
}

#[test]
fn narrowing_special_values_rounds_to_nearest_even() {
    let v = special_f32();
    check_narrowing(&v);
    // And at every offset, so each value also goes through the remainder.
    for start in 1..8 {
        check_narrowing(&v[start..]);
    }
}

proptest! {
    #[test]
    fn narrowing_random_bits(bits in prop::collection::vec(any::<u32>(), 0..70)) {
        let src: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
        check_narrowing(&src);
    }

    #[test]
    fn narrowing_random_values_in_half_range(
        v in prop::collection::vec((-26i32..17, 0u32..(1 << 23), any::<bool>()), 0..70)
    ) {
        let src: Vec<f32> = v
            .iter()
            .map(|&(e, m, neg)| {
                let x = f32::from_bits((((e + 127) as u32) << 23) | m);
                if neg { -x } else { x }
            })
            .collect();
        check_narrowing(&src);
    }

    #[test]
    fn widening_random_bits(bits in prop::collection::vec(any::<u16>(), 0..70)) {
        for path in RowKernels::supported() {
            let mut dst = vec![0.0f32; bits.len()];
            path.f16_to_f32(&bits, &mut dst).unwrap();
            for (&h, &y) in bits.iter().zip(&dst) {
                prop_assert!(same_f32(y, def_f16_to_f32(h)));
            }
        }
    }
}

#[test]
fn conversions_refuse_mismatched_lengths() {
    for path in RowKernels::supported() {
        let mut f = [7.0f32; 3];
        let mut h = [7u16; 3];
        assert!(matches!(
            path.f16_to_f32(&[0; 4], &mut f),
            Err(KernelError::BadLength { .. })
        ));
        assert!(matches!(
            path.f32_to_f16(&[0.0; 2], &mut h),
            Err(KernelError::BadLength { .. })
        ));
        assert_eq!(f, [7.0; 3]);
        assert_eq!(h, [7; 3]);
    }
}

/// Random f32 values with a spread of magnitudes, and their f16 bits.
fn random_rows(rng: &mut StdRng, n: usize) -> (Vec<f32>, Vec<u16>) {
    let f: Vec<f32> = (0..n)
        .map(|_| rng.gen_range(-1.0f32..1.0) * 2f32.powi(rng.gen_range(-8..6)))
        .collect();
    let h = f
        .iter()
        .map(|&x| u16::from_le_bytes(f32_to_f16(x)))
        .collect();
    (f, h)
}

/// The reference of the gathered loops, written out from `dot_f32` and a
/// plain multiply-add per element.
fn reference(
    q: &[f32],
    w: &[f32],
    data: &[f32],
    stride: usize,
    offset: usize,
    idx: &[i32],
    scale: f32,
) -> (Vec<f32>, Vec<f32>) {
    let len = q.len();
    let row = |i: i32| &data[i as usize * stride + offset..][..len];
    let scores = idx.iter().map(|&i| scale * dot_f32(q, row(i))).collect();
    let mut out = vec![0.5f32; len];
    for (&wj, &i) in w.iter().zip(idx) {
        for (o, &x) in out.iter_mut().zip(row(i)) {
            *o = wj.mul_add(x, *o);
        }
    }
    (scores, out)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn gathered_dot_and_axpy_match_the_reference_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for len in [1usize, 5, 8, 13, 16, 64, 80, 128] {
        let heads = 3;
        let stride = heads * len + 2;
        let n_rows = 37;
        let (data32, data16) = random_rows(&mut rng, stride * n_rows);
        let widened: Vec<f32> = data16
            .iter()
            .map(|&h| f16_to_f32(h.to_le_bytes()))
            .collect();
        let (q, _) = random_rows(&mut rng, len);
        // Repeats and any order: the set is whatever the window names.
        let idx: Vec<i32> = (0..50).map(|_| rng.gen_range(0..n_rows as i32)).collect();
        let w: Vec<f32> = (0..idx.len()).map(|_| rng.gen_range(0.0f32..0.1)).collect();
        let scale = 0.125;
        for offset in [0, len, 2 * len + 2] {
            let (s32, o32) = reference(&q, &w, &data32, stride, offset, &idx, scale);
            let (s16, o16) = reference(&q, &w, &widened, stride, offset, &idx, scale);
            for path in RowKernels::supported() {
                let mut scores = vec![0.0f32; idx.len()];
                let mut out = vec![0.5f32; len];
                let r32 = Rows {
                    data: &data32[..],
                    stride,
                    offset,
                    idx: &idx,
                };
                path.dot_rows_f32(&q, r32, scale, &mut scores).unwrap();
                path.axpy_rows_f32(&w, r32, &mut out).unwrap();
                assert_eq!(bits(&scores), bits(&s32), "{path:?} f32 dot, len {len}");
                assert_eq!(bits(&out), bits(&o32), "{path:?} f32 axpy, len {len}");

                let r16 = Rows {
                    data: &data16[..],
                    stride,
                    offset,
                    idx: &idx,
                };
                out.fill(0.5);
                path.dot_rows_f16(&q, r16, scale, &mut scores).unwrap();
                path.axpy_rows_f16(&w, r16, &mut out).unwrap();
                assert_eq!(bits(&scores), bits(&s16), "{path:?} f16 dot, len {len}");
                assert_eq!(bits(&out), bits(&o16), "{path:?} f16 axpy, len {len}");
            }
        }
    }
}

#[test]
fn gathered_rows_out_of_range_are_errors() {
    let data = [1u16; 40];
    let q = [1.0f32; 8];
    for path in RowKernels::supported() {
        let mut scores = [0.0f32; 2];
        let mut out = [0.0f32; 8];
        // Row 4 at stride 8 ends at 40 (fits); offset 1 pushes it past.
        for (offset, idx, ok) in [
            (0, [0, 4], true),
            (1, [0, 4], false),
            (0, [-1, 0], false),
            (0, [0, i32::MAX], false),
        ] {
            let rows = Rows {
                data: &data[..],
                stride: 8,
                offset,
                idx: &idx,
            };
            let d = path.dot_rows_f16(&q, rows, 1.0, &mut scores);
            let a = path.axpy_rows_f16(&[1.0, 1.0], rows, &mut out);
            assert_eq!(d.is_ok(), ok, "{path:?} {offset} {idx:?}: {d:?}");
            assert_eq!(a.is_ok(), ok, "{path:?} {offset} {idx:?}: {a:?}");
            if !ok {
                assert!(matches!(d, Err(KernelError::RowOutOfRange { .. })));
            }
        }
        let rows = Rows {
            data: &data[..],
            stride: 8,
            offset: 0,
            idx: &[0, 1, 2],
        };
        assert!(matches!(
            path.dot_rows_f16(&q, rows, 1.0, &mut scores),
            Err(KernelError::BadLength { .. })
        ));
        assert!(matches!(
            path.axpy_rows_f16(&[1.0], rows, &mut out),
            Err(KernelError::BadLength { .. })
        ));
        // A stride so large that the row's start overflows.
        let rows = Rows {
            data: &data[..],
            stride: usize::MAX / 2,
            offset: 0,
            idx: &[3, 3],
        };
        assert!(path.dot_rows_f16(&q, rows, 1.0, &mut scores).is_err());
    }
}

#[test]
fn detection_is_stable_and_levels_map_to_paths() {
    assert_eq!(RowKernels::detect(), RowKernels::detect());
    assert!(!RowKernels::for_level(minfer_kernels::SimdLevel::Scalar).is_simd());
    assert!(!RowKernels::SCALAR.is_simd());
    let simd = RowKernels::detect().is_simd();
    for level in minfer_kernels::SimdLevel::supported() {
        if level != minfer_kernels::SimdLevel::Scalar {
            assert_eq!(RowKernels::for_level(level).is_simd(), simd);
        }
    }
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        simd,
        is_x86_feature_detected!("avx") && is_x86_feature_detected!("f16c")
    );
}

/// Several heads over the same rows (one KV group) get, head by head, the
/// one-head routines' bits on every path: any head count (more than one
/// wide call takes), head sizes on and off the wide kernels' multiples,
/// row counts on and off multiples of eight, repeated rows.
#[test]
fn multi_head_loops_give_each_head_the_one_head_bits() {
    let mut rng = StdRng::seed_from_u64(0x4ead5);
    for hd in [8usize, 16, 24, 64, 128] {
        let stride_row = 3 * hd + 8;
        let n_rows = 41;
        let (_, data) = random_rows(&mut rng, stride_row * n_rows);
        // 130 and 203 rows: calls long enough that the loops also ask for
        // the rows ahead.
        for n in [0usize, 1, 7, 8, 13, 32, 45, 130, 203] {
            let idx: Vec<i32> = (0..n).map(|_| rng.gen_range(0..n_rows as i32)).collect();
            let rows = Rows {
                data: &data[..],
                stride: stride_row,
                offset: hd,
                idx: &idx,
            };
            for heads in [1usize, 2, 3, 4, 5, 7, 9] {
                let (qs, _) = random_rows(&mut rng, heads * hd);
                let stride = n + 3;
                let w: Vec<f32> = (0..heads * stride)
                    .map(|_| rng.gen_range(0.0f32..0.1))
                    .collect();
                let (init, _) = random_rows(&mut rng, heads * hd);
                for path in RowKernels::supported() {
                    let mut scores = vec![f32::NAN; heads * stride];
                    path.dot_rows_f16_heads(&qs, hd, rows, 0.125, &mut scores, stride)
                        .unwrap();
                    let mut outs = init.clone();
                    path.axpy_rows_f16_heads(&w, stride, rows, &mut outs, hd)
                        .unwrap();
                    for g in 0..heads {
                        let mut one = vec![0.0f32; n];
                        let q = &qs[g * hd..(g + 1) * hd];
                        RowKernels::SCALAR
                            .dot_rows_f16(q, rows, 0.125, &mut one)
                            .unwrap();
                        let got = &scores[g * stride..g * stride + n];
                        assert_eq!(
                            bits(got),
                            bits(&one),
                            "{path:?} dot hd {hd} n {n} heads {heads} head {g}"
                        );
                        let mut o = init[g * hd..(g + 1) * hd].to_vec();
                        let wg = &w[g * stride..g * stride + n];
                        RowKernels::SCALAR.axpy_rows_f16(wg, rows, &mut o).unwrap();
                        let got = &outs[g * hd..(g + 1) * hd];
                        assert_eq!(
                            bits(got),
                            bits(&o),
                            "{path:?} axpy hd {hd} n {n} heads {heads} head {g}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn multi_head_loops_refuse_bad_shapes() {
    let data = vec![0u16; 64 * 4];
    let rows = Rows {
        data: &data[..],
        stride: 64,
        offset: 0,
        idx: &[0, 1, 2],
    };
    for path in RowKernels::supported() {
        let mut s = vec![0.0f32; 8];
        let q = vec![0.0f32; 128];
        // Not whole heads; stride shorter than the rows; too small a buffer.
        assert!(path
            .dot_rows_f16_heads(&q[..100], 64, rows, 1.0, &mut s, 4)
            .is_err());
        assert!(path
            .dot_rows_f16_heads(&q, 64, rows, 1.0, &mut s, 2)
            .is_err());
        assert!(path
            .dot_rows_f16_heads(&q, 64, rows, 1.0, &mut s[..6], 4)
            .is_err());
        assert!(path
            .dot_rows_f16_heads(&q, 64, rows, 1.0, &mut s, 4)
            .is_ok());
        let mut o = vec![0.0f32; 128];
        assert!(path
            .axpy_rows_f16_heads(&s[..6], 4, rows, &mut o, 64)
            .is_err());
        assert!(path
            .axpy_rows_f16_heads(&s, 4, rows, &mut o[..100], 64)
            .is_err());
        // A row past the data.
        let bad = Rows {
            idx: &[0, 9],
            ..rows
        };
        assert!(matches!(
            path.dot_rows_f16_heads(&q, 64, bad, 1.0, &mut s, 4),
            Err(KernelError::RowOutOfRange { .. })
        ));
        assert!(matches!(
            path.axpy_rows_f16_heads(&s, 4, bad, &mut o, 64),
            Err(KernelError::RowOutOfRange { .. })
        ));
    }
}

/// Q8_0 blocks decode on every path to the scalar decode's bits: every
/// quant value, scales from subnormal halves to the largest, and a
/// destination shorter than the blocks (only whole blocks are written).
#[test]
fn q8_0_decode_gives_the_scalar_bits_on_every_path() {
    use minfer_kernels::blocks::BlockQ8_0;
    use minfer_kernels::dequant::dequantize_q8_0;
    let mut rng = StdRng::seed_from_u64(7);
    let scales = [
        0x0001u16, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0x2e66, 0x8000,
    ];
    let mut blocks: Vec<BlockQ8_0> = scales
        .iter()
        .map(|&d| BlockQ8_0 {
            d: d.to_le_bytes(),
            qs: std::array::from_fn(|_| rng.gen::<i8>()),
        })
        .collect();
    // Every quant value appears.
    for (k, b) in blocks.iter_mut().enumerate() {
        for (j, q) in b.qs.iter_mut().enumerate() {
            if k < 8 {
                *q = (k * 32 + j) as u8 as i8;
            }
        }
    }
    let mut want = vec![0.0f32; blocks.len() * 32];
    dequantize_q8_0(&blocks, &mut want);
    for path in RowKernels::supported() {
        let mut got = vec![f32::NAN; blocks.len() * 32];
        path.q8_0_to_f32(&blocks, &mut got);
        assert_eq!(bits(&got), bits(&want), "{path:?}");
        // A destination of two and a half blocks gets the first two.
        let mut short = vec![-1.0f32; 80];
        path.q8_0_to_f32(&blocks, &mut short);
        assert_eq!(bits(&short[..64]), bits(&want[..64]), "{path:?} short");
        assert!(
            short[64..].iter().all(|&x| x == -1.0),
            "{path:?} wrote past whole blocks"
        );
    }
}
