//! exp, SiLU, SwiGLU and softmax: close to the exact functions, and every
//! path (scalar, SIMD) gives the same bits on every class of input.

use minfer_kernels::activation::{exp, silu};
use minfer_kernels::RowKernels;
use rand::{rngs::StdRng, Rng, SeedableRng};

fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

/// Inputs of every kind: ordinary values, the ends of the range, values
/// whose result is subnormal or overflows, zeros, infinities and NaN.
fn special_inputs() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        88.0,
        88.72,
        88.73,
        89.0,
        100.0,
        -87.0,
        -87.4,
        -88.0,
        -100.0,
        -103.0,
        -103.9,
        -104.0,
        -150.0,
        1e-10,
        -1e-10,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
    ];
    let mut rng = StdRng::seed_from_u64(7);
    v.extend((0..4000).map(|_| rng.gen_range(-110.0f32..95.0)));
    v.extend((0..1000).map(|_| rng.gen_range(-2.0f32..2.0)));
    v
}

#[test]
fn exp_is_within_one_ulp_of_the_exact_value() {
    for x in special_inputs() {
        let got = exp(x);
        let want = (x as f64).exp() as f32;
        if x.is_nan() {
            assert!(got.is_nan());
        } else {
            assert!(ulps(got, want) <= 1, "exp({x}) = {got} vs {want}");
        }
    }
}

/// The reimplementation gives glibc's `expf` bits (it was checked on all
/// 2^32 inputs; here every 997th bit pattern).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn exp_gives_glibc_expf_bits() {
    let mut b = 0u64;
    while b <= u32::MAX as u64 {
        let x = f32::from_bits(b as u32);
        let (ours, libm) = (exp(x), x.exp());
        assert!(
            ours.to_bits() == libm.to_bits() || (ours.is_nan() && libm.is_nan()),
            "exp({x:e}) = {ours:e}, glibc {libm:e}"
        );
        b += 997;
    }
}

#[test]
fn silu_swiglu_and_softmax_paths_give_the_same_bits() {
    let x = special_inputs();
    let up: Vec<f32> = x.iter().map(|v| v.sin()).collect();
    let mut base: Option<(Vec<f32>, Vec<f32>, Vec<f32>)> = None;
    for rk in RowKernels::supported() {
        let mut s = x.clone();
        rk.silu(&mut s);
        let mut g = x.clone();
        rk.swiglu(&mut g, &up);
        // Softmax over rows of odd lengths (SIMD body and tail), finite.
        let mut sm: Vec<f32> = x
            .iter()
            .filter(|v| v.is_finite())
            .map(|v| v.clamp(-60.0, 60.0))
            .collect();
        // Rows of 37 and 31: sixteen-value steps with tails under and
        // over eight.
        let half = sm.len() / 2;
        let (a, b) = sm.split_at_mut(half);
        for row in a.chunks_mut(37).chain(b.chunks_mut(31)) {
            rk.softmax(row);
        }
        for (i, (&a, &b)) in s.iter().zip(&x).enumerate() {
            assert_eq!(a.to_bits(), silu(b).to_bits(), "silu [{i}] at {}", b);
        }
        match &base {
            None => base = Some((s, g, sm)),
            Some((s0, g0, m0)) => {
                let same =
                    |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same(&s, s0), "silu differs between paths");
                assert!(same(&g, g0), "swiglu differs between paths");
                assert!(same(&sm, m0), "softmax differs between paths");
            }
        }
    }
    if RowKernels::supported().len() < 2 {
        eprintln!("only the scalar path on this CPU");
    }
}

#[test]
fn softmax_rows_sum_to_one_and_match_f64() {
    let mut rng = StdRng::seed_from_u64(9);
    for n in [1usize, 7, 8, 9, 64, 301, 2048] {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-30.0f32..30.0)).collect();
        for rk in RowKernels::supported() {
            let mut y = x.clone();
            rk.softmax(&mut y);
            let max = x.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
            let e: Vec<f64> = x.iter().map(|&v| (v as f64 - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for (a, b) in y.iter().zip(&e) {
                assert!((*a as f64 - b / sum).abs() <= 1e-6 * (b / sum) + 1e-12);
            }
        }
    }
}

/// Long rows, whose f64 sums round (so the order of the partial sums
/// shows), give every path the scalar reference's bits.
#[test]
fn long_softmax_rows_give_the_same_bits_on_every_path() {
    let mut rng = StdRng::seed_from_u64(0x50f7);
    for n in [15usize, 16, 17, 40, 100, 4097, 8207] {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-30.0f32..30.0)).collect();
        let mut want = x.clone();
        RowKernels::SCALAR.softmax(&mut want);
        for rk in RowKernels::supported() {
            let mut got = x.clone();
            rk.softmax(&mut got);
            let bad = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(bad.is_none(), "{rk:?}, {n} values: value {bad:?} differs");
        }
    }
}

/// Attention's exponential is within two ulp of `e^x` wherever a softmax
/// calls it (`x ≤ 0`, down to where it flushes to zero), on a sample of
/// the bit patterns of every binade, and its edges are as documented.
#[test]
fn attention_exp_is_within_two_ulp_for_non_positive_x() {
    use minfer_kernels::softmax::poly_exp;
    let mut worst = 0;
    for i in 0..0x8000_0000u32 / 127 {
        let x = -f32::from_bits(i * 127);
        if x.is_nan() || x < -87.0 {
            continue;
        }
        let want = (x as f64).exp() as f32;
        let d = ulps(poly_exp(x), want);
        assert!(d <= 2, "poly_exp({x}) = {} vs {want}", poly_exp(x));
        worst = worst.max(d);
    }
    assert_eq!(poly_exp(0.0), 1.0);
    assert_eq!(poly_exp(-0.0), 1.0);
    assert_eq!(poly_exp(3.0), 1.0, "a positive argument is taken as 0");
    assert_eq!(poly_exp(-87.5), 0.0);
    assert_eq!(poly_exp(f32::NEG_INFINITY), 0.0);
    assert!(poly_exp(f32::NAN).is_nan());
    eprintln!("poly_exp: worst {worst} ulp on x in [-87, 0]");
}

/// Attention's softmax gives the scalar reference's bits on every path,
/// on rows long and short and with scores far below the maximum (where
/// its exponential flushes to zero), and stays close to the exact one.
#[test]
fn attention_softmax_gives_the_same_bits_on_every_path() {
    let mut rng = StdRng::seed_from_u64(0xa77e);
    for n in [1usize, 7, 15, 16, 17, 40, 301, 4097, 8207] {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-120.0f32..30.0)).collect();
        let mut want = x.clone();
        RowKernels::SCALAR.attn_softmax(&mut want);
        let max = x.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = x.iter().map(|&v| (v as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        for (a, b) in want.iter().zip(&e) {
            assert!((*a as f64 - b / sum).abs() <= 1e-6 * (b / sum) + 1e-30);
        }
        for rk in RowKernels::supported() {
            let mut got = x.clone();
            rk.attn_softmax(&mut got);
            let bad = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(bad.is_none(), "{rk:?}, {n} values: value {bad:?} differs");
        }
    }
}

/// Attention's exponential in eight and sixteen lanes gives the scalar
/// `poly_exp`'s bits on a dense sweep of its whole range (every 13th f32
/// from −88 to 0, where the results run from subnormal to one), besides
/// the edges: positive, infinite and NaN arguments.
#[cfg(target_arch = "x86_64")]
#[test]
fn attention_exp_lanes_give_the_scalar_bits() {
    use minfer_kernels::softmax::{poly_exp, Exp, Poly};
    use std::arch::x86_64::*;
    let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    let avx512 = avx2 && is_x86_feature_detected!("avx512f");
    if !avx2 {
        eprintln!("no AVX2 on this CPU: only the scalar form exists here");
        return;
    }
    let edges = [
        0.0,
        -0.0,
        1.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -87.0,
        -87.5,
    ];
    let sweep = (0u32..=(-88.0f32).to_bits() - (-0.0f32).to_bits())
        .step_by(13)
        .map(|i| f32::from_bits((-0.0f32).to_bits() + i));
    let mut xs: Vec<f32> = edges.to_vec();
    let mut checked = 0usize;
    let run = |xs: &[f32]| {
        for c in xs.chunks_exact(16) {
            let want: Vec<u32> = c.iter().map(|&x| poly_exp(x).to_bits()).collect();
            let mut got = [0f32; 16];
            // SAFETY: AVX2 and FMA (and AVX-512 F for the sixteen lanes)
            // were detected above; the arrays hold sixteen values.
            unsafe {
                for h in 0..2 {
                    let v = Poly::lanes8(_mm256_loadu_ps(c.as_ptr().add(8 * h)));
                    _mm256_storeu_ps(got.as_mut_ptr().add(8 * h), v);
                }
                let same = |got: &[f32; 16]| got.iter().zip(&want).all(|(g, w)| g.to_bits() == *w);
                assert!(same(&got), "8 lanes: {c:?} -> {got:?}");
                if avx512 {
                    _mm512_storeu_ps(got.as_mut_ptr(), Poly::lanes16(_mm512_loadu_ps(c.as_ptr())));
                    assert!(same(&got), "16 lanes: {c:?} -> {got:?}");
                }
            }
        }
    };
    for x in sweep {
        xs.push(x);
        if xs.len() == 4096 {
            run(&xs);
            checked += xs.len();
            xs.clear();
        }
    }
    xs.resize(xs.len().next_multiple_of(16), 0.0);
    run(&xs);
    assert!(checked > 80_000_000, "{checked} values checked");
}
