//! The CPU kernels against naive references written here, on random inputs
//! of odd sizes (attention and the KV regions: `attention.rs`). Tolerances are stated at each comparison; comparisons are
//! bit-exact where the reference performs the same operations in the same
//! order.

mod support;

use support::{assert_close, randn, rope_params};

use minfer_cpu::{
    add_inplace, geglu_inplace, gelu_tanh, get_rows, mul_inplace, rms_norm, rope_ext_inplace,
    rope_inplace, scale_inplace, softmax_inplace, tanh_inplace, RowTable,
};
use minfer_graph::{GraphError, RopeParams, RopeStyle};
use minfer_kernels::blocks::{f16_to_f32, f32_to_f16};
use minfer_kernels::dequant::dequantize_row;
use minfer_kernels::quant::quantize_row;
use minfer_kernels::{GgmlType, RowKernels};
use rand::rngs::StdRng;
use rand::SeedableRng;

#[test]
fn get_rows_dequantizes_the_named_rows() {
    let mut rng = StdRng::seed_from_u64(1);
    let (ne0, n_rows) = (96, 7);
    let src = randn(&mut rng, ne0 * n_rows);
    let ids = [6, 0, 3, 3, 1];
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0] {
        let row_bytes = ne0 / ty.block_size() as usize * ty.type_size() as usize;
        let mut table = vec![0u8; row_bytes * n_rows];
        for (s, d) in src.chunks(ne0).zip(table.chunks_mut(row_bytes)) {
            quantize_row(ty, s, d).unwrap();
        }
        let mut out = vec![0.0f32; ids.len() * ne0];
        get_rows(ty, RowTable::Stored(&table), ne0, n_rows, &ids, &mut out).unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let mut want = vec![0.0f32; ne0];
            let r = id as usize;
            dequantize_row(ty, &table[r * row_bytes..(r + 1) * row_bytes], &mut want).unwrap();
            assert_eq!(&out[i * ne0..(i + 1) * ne0], &want[..], "{ty} row {id}");
        }
        // Bad ids are refused before anything is written.
        let mut out = vec![7.0f32; 2 * ne0];
        for bad in [[0, 7], [-1, 0]] {
            let r = get_rows(ty, RowTable::Stored(&table), ne0, n_rows, &bad, &mut out);
            assert!(matches!(r, Err(GraphError::BadInput { .. })), "{r:?}");
            assert!(out.iter().all(|&v| v == 7.0));
        }
        assert!(get_rows(
            ty,
            RowTable::Stored(&table[1..]),
            ne0,
            n_rows,
            &[0],
            &mut out[..ne0]
        )
        .is_err());
        assert!(get_rows(ty, RowTable::Stored(&table), ne0, n_rows, &[0], &mut out).is_err());
    }
    assert!(get_rows(
        GgmlType::Q8_0,
        RowTable::Stored(&[0; 34]),
        33,
        1,
        &[0],
        &mut [0.0; 33]
    )
    .is_err());
}

#[test]
fn rms_norm_follows_ggml() {
    let mut rng = StdRng::seed_from_u64(2);
    let (ne0, rows, eps) = (131, 5, 1e-6f32);
    let x = randn(&mut rng, ne0 * rows);
    let mut out = vec![0.0f32; x.len()];
    rms_norm(&x, ne0, eps, &mut out).unwrap();
    for (r, (xr, yr)) in x.chunks(ne0).zip(out.chunks(ne0)).enumerate() {
        // Bit-exact: the same float/double steps as ggml.
        let mut sum = 0.0f64;
        for &v in xr {
            sum += (v * v) as f64;
        }
        let scale = 1.0f32 / ((sum / ne0 as f64) as f32 + eps).sqrt();
        let exact: Vec<f32> = xr.iter().map(|&v| v * scale).collect();
        assert_eq!(yr, &exact[..], "row {r}");
        // And close to the math in f64.
        let ms: f64 = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / ne0 as f64;
        let want: Vec<f64> = xr
            .iter()
            .map(|&v| v as f64 / (ms + eps as f64).sqrt())
            .collect();
        assert_close(yr, &want, 1e-6, "rms_norm");
    }
    assert!(rms_norm(&x[..ne0 + 1], ne0, eps, &mut out[..ne0 + 1]).is_err());
    assert!(rms_norm(&x, ne0, eps, &mut out[1..]).is_err());
    assert!(rms_norm(&x, 0, eps, &mut out).is_err());
}

#[test]
fn add_mul_scale_elementwise_and_broadcast() {
    let mut rng = StdRng::seed_from_u64(3);
    let (ne0, rows) = (37, 3);
    let a = randn(&mut rng, ne0 * rows);
    let full = randn(&mut rng, ne0 * rows);
    let row = randn(&mut rng, ne0);
    let mut x = a.clone();
    add_inplace(&mut x, &full, ne0).unwrap();
    assert!(x.iter().enumerate().all(|(i, &v)| v == a[i] + full[i]));
    let mut x = a.clone();
    add_inplace(&mut x, &row, ne0).unwrap();
    assert!(x.iter().enumerate().all(|(i, &v)| v == a[i] + row[i % ne0]));
    let mut x = a.clone();
    mul_inplace(&mut x, &full, ne0).unwrap();
    assert!(x.iter().enumerate().all(|(i, &v)| v == a[i] * full[i]));
    let mut x = a.clone();
    mul_inplace(&mut x, &row, ne0).unwrap();
    assert!(x.iter().enumerate().all(|(i, &v)| v == a[i] * row[i % ne0]));
    let mut x = a.clone();
    scale_inplace(&mut x, 0.3);
    assert!(x.iter().enumerate().all(|(i, &v)| v == a[i] * 0.3));

    let mut x = a.clone();
    assert!(add_inplace(&mut x, &row[1..], ne0).is_err());
    assert!(mul_inplace(&mut x, &full[..2 * ne0], ne0).is_err());
    assert!(add_inplace(&mut x, &row, 36).is_err());
    assert_eq!(x, a, "nothing written on error");
}

#[test]
fn tanh_matches_reference() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut x: Vec<f32> = randn(&mut rng, 200).iter().map(|v| v * 3.0).collect();
    x.extend([-100.0, 100.0, 0.0, -0.0]);
    let mut y = x.clone();
    tanh_inplace(&mut y);
    let want: Vec<f64> = x.iter().map(|&v| (v as f64).tanh()).collect();
    assert_close(&y, &want, 1e-6, "tanh");
}

#[test]
fn geglu_rounds_gelu_through_f16_like_ggml() {
    // GELU's tanh form in f64, against the f32 function.
    let gelu64 = |x: f64| {
        0.5 * x
            * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * x * (1.0 + 0.044715 * x * x)).tanh())
    };
    let xs: Vec<f32> = (-1200..=1200).map(|i| i as f32 / 100.0).collect();
    let want: Vec<f64> = xs.iter().map(|&x| gelu64(x as f64)).collect();
    let got: Vec<f32> = xs.iter().map(|&x| gelu_tanh(x)).collect();
    assert_close(&got, &want, 1e-5, "gelu_tanh");

    let mut rng = StdRng::seed_from_u64(9);
    let mut g = randn(&mut rng, 301)
        .iter()
        .map(|v| v * 4.0)
        .collect::<Vec<_>>();
    g.extend([-10.5, -10.0, 10.0, 10.5, 0.0, -0.0]);
    let up = randn(&mut rng, g.len());
    let mut out = g.clone();
    geglu_inplace(&mut out, &up).unwrap();
    let f16 = |x: f32| f16_to_f32(f32_to_f16(x));
    for ((&x, &u), &y) in g.iter().zip(&up).zip(&out) {
        // ggml's table: GELU of the f16-rounded input, rounded to f16;
        // beyond ±10 the function is 0 or the identity.
        let gelu = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x
        } else {
            f16(gelu_tanh(f16(x)))
        };
        assert_eq!(y.to_bits(), (gelu * u).to_bits(), "geglu at {x}");
        // And close to the exact product.
        assert!(
            (y as f64 - gelu64(x as f64) * u as f64).abs()
                < 2e-2 * (1.0 + u.abs() as f64 * x.abs() as f64)
        );
    }
    assert!(geglu_inplace(&mut out, &up[1..]).is_err());
}

#[test]
fn silu_swiglu_softmax_match_references() {
    let mut rng = StdRng::seed_from_u64(4);
    let n = 301;
    let mut g = randn(&mut rng, n);
    g.extend([-100.0, 100.0, 0.0, -0.0]);
    let up = randn(&mut rng, g.len());

    let mut paths = Vec::new();
    for rk in RowKernels::supported() {
        let mut s = g.clone();
        rk.silu(&mut s);
        let want: Vec<f64> = g
            .iter()
            .map(|&v| v as f64 / (1.0 + (-v as f64).exp()))
            .collect();
        assert_close(&s, &want, 1e-6, "silu");

        let mut sw = g.clone();
        rk.swiglu(&mut sw, &up);
        // Bit-exact: silu then an f32 product.
        let exact: Vec<f32> = s.iter().zip(&up).map(|(a, b)| a * b).collect();
        assert_eq!(sw, exact);
        paths.push((s, sw));
    }
    // Every path gives the scalar reference's bits.
    for p in &paths[1..] {
        assert!(p
            .0
            .iter()
            .zip(&paths[0].0)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(p
            .1
            .iter()
            .zip(&paths[0].1)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    let ne0 = 43;
    let x: Vec<f32> = randn(&mut rng, ne0 * 4).iter().map(|v| v * 10.0).collect();
    let mut y = x.clone();
    softmax_inplace(RowKernels::SCALAR, &mut y, ne0).unwrap();
    for rk in RowKernels::supported() {
        let mut z = x.clone();
        softmax_inplace(rk, &mut z, ne0).unwrap();
        assert!(z.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
    for (xr, yr) in x.chunks(ne0).zip(y.chunks(ne0)) {
        let max = xr.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let e: Vec<f64> = xr.iter().map(|&v| (v as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        let want: Vec<f64> = e.iter().map(|v| v / sum).collect();
        assert_close(yr, &want, 1e-6, "softmax");
        let total: f64 = yr.iter().map(|&v| v as f64).sum();
        assert!((total - 1.0).abs() < 1e-5);
    }
    assert!(softmax_inplace(RowKernels::SCALAR, &mut y, 42).is_err());
}

/// Rope as ggml computes it: iterative f32 angles, f32 cos/sin.
fn rope_ggml(x: &mut [f32], pos: &[i32], p: &RopeParams) {
    let theta_scale = p.freq_base.powf(-2.0 / p.n_rot as f32);
    for (t, row) in x.chunks_mut(p.n_head * p.head_dim).enumerate() {
        for head in row.chunks_mut(p.head_dim) {
            let mut theta = pos[t] as f32;
            for i in 0..p.n_rot / 2 {
                let a = p.freq_scale * theta;
                let (c, s) = (a.cos(), a.sin());
                theta *= theta_scale;
                let (i0, i1) = match p.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + p.n_rot / 2),
                };
                let (x0, x1) = (head[i0], head[i1]);
                head[i0] = x0 * c - x1 * s;
                head[i1] = x0 * s + x1 * c;
            }
        }
    }
}

/// Rope from the definition, in f64.
fn rope_f64(x: &[f32], pos: &[i32], p: &RopeParams) -> Vec<f64> {
    let mut y: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (t, row) in y.chunks_mut(p.n_head * p.head_dim).enumerate() {
        for head in row.chunks_mut(p.head_dim) {
            for i in 0..p.n_rot / 2 {
                let theta = pos[t] as f64
                    * p.freq_scale as f64
                    * (p.freq_base as f64).powf(-2.0 * i as f64 / p.n_rot as f64);
                let (i0, i1) = match p.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + p.n_rot / 2),
                };
                let (x0, x1) = (head[i0], head[i1]);
                head[i0] = x0 * theta.cos() - x1 * theta.sin();
                head[i1] = x0 * theta.sin() + x1 * theta.cos();
            }
        }
    }
    y
}

#[test]
fn rope_matches_ggml_and_the_definition() {
    let mut rng = StdRng::seed_from_u64(5);
    let pos = [0, 1, 7, 60, 3];
    let n_ctx = 64;
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        for (n_head, head_dim, n_rot) in [(3, 64, 64), (2, 24, 16), (5, 6, 2)] {
            let p = rope_params(style, n_head, head_dim, n_rot);
            let x = randn(&mut rng, pos.len() * n_head * head_dim);
            let mut y = x.clone();
            rope_inplace(&mut y, &pos, &p, n_ctx).unwrap();
            let mut exact = x.clone();
            rope_ggml(&mut exact, &pos, &p);
            assert_eq!(y, exact, "{style:?} {n_head}x{head_dim}/{n_rot}");
            // The iterated f32 angle drifts from the exact one by a few ulps
            // per step; at position 60 that is ~1e-4 rad.
            assert_close(&y, &rope_f64(&x, &pos, &p), 1e-3, "rope vs f64");
            // Partial rotary: the tail of every head is untouched; position
            // 0 (the first row) is the identity.
            for (t, row) in y.chunks(n_head * head_dim).enumerate() {
                for (h, head) in row.chunks(head_dim).enumerate() {
                    let base = (t * n_head + h) * head_dim;
                    assert_eq!(&head[n_rot..], &x[base + n_rot..base + head_dim]);
                    if pos[t] == 0 {
                        assert_eq!(head, &x[base..base + head_dim]);
                    }
                }
            }
        }
    }
}

/// ggml's `rope_ext` with frequency factors and a magnitude factor: the
/// angle is `freq_scale * (theta / ff)`, and cos and sin are multiplied by
/// `attn_factor` before they rotate.
fn rope_ext_ggml(x: &mut [f32], pos: &[i32], p: &RopeParams, ff: &[f32]) {
    let theta_scale = p.freq_base.powf(-2.0 / p.n_rot as f32);
    for (t, row) in x.chunks_mut(p.n_head * p.head_dim).enumerate() {
        for head in row.chunks_mut(p.head_dim) {
            let mut theta = pos[t] as f32;
            for (i, f) in ff.iter().enumerate() {
                let a = p.freq_scale * (theta / f);
                let (c, s) = (a.cos() * p.attn_factor, a.sin() * p.attn_factor);
                theta *= theta_scale;
                let (i0, i1) = (i, i + p.n_rot / 2);
                let (x0, x1) = (head[i0], head[i1]);
                head[i0] = x0 * c - x1 * s;
                head[i1] = x0 * s + x1 * c;
            }
        }
    }
}

#[test]
fn rope_with_factors_matches_ggml_rope_ext() {
    let mut rng = StdRng::seed_from_u64(7);
    let pos = [0, 2, 31, 9];
    let p = RopeParams {
        attn_factor: 1.2,
        yarn: None,
        ..rope_params(RopeStyle::Neox, 3, 32, 24)
    };
    let ff: Vec<f32> = (0..12).map(|i| 1.0 + 0.75 * i as f32).collect();
    let x = randn(&mut rng, pos.len() * 3 * 32);
    let mut y = x.clone();
    rope_ext_inplace(&mut y, &pos, &p, Some(&ff), 64).unwrap();
    let mut want = x.clone();
    rope_ext_ggml(&mut want, &pos, &p, &ff);
    assert_eq!(y, want);
    // Unit factors and magnitude: the plain rotation, bit for bit.
    let unit = rope_params(RopeStyle::Neox, 3, 32, 24);
    let (mut a, mut b) = (x.clone(), x.clone());
    rope_ext_inplace(&mut a, &pos, &unit, Some(&[1.0; 12]), 64).unwrap();
    rope_inplace(&mut b, &pos, &unit, 64).unwrap();
    assert_eq!(a, b);
    // Position 0 only scales by the magnitude factor.
    assert!(y[..24].iter().zip(&x).all(|(y, x)| *y == x * 1.2));
    let r = rope_ext_inplace(&mut y, &pos, &p, Some(&ff[..11]), 64);
    assert!(matches!(r, Err(GraphError::BadInput { .. })), "{r:?}");
}

/// ggml's `rope_yarn` for NeoX pairs, written out: the ramp over the
/// correction range, the blend of interpolated and extrapolated angles,
/// and the magnitude grown by `1 + 0.1 ln(1/freq_scale)`.
fn rope_yarn_ggml(x: &mut [f32], pos: &[i32], p: &RopeParams, low: f32, high: f32) {
    let theta_scale = p.freq_base.powf(-2.0 / p.n_rot as f32);
    let mscale = p.attn_factor * (1.0f32 + 0.1f32 * (1.0f32 / p.freq_scale).ln());
    for (t, row) in x.chunks_mut(p.n_head * p.head_dim).enumerate() {
        for head in row.chunks_mut(p.head_dim) {
            let mut theta = pos[t] as f32;
            for i in 0..p.n_rot / 2 {
                let y = (i as f32 - low) / f32::max(0.001, high - low);
                let ramp = 1.0 - y.clamp(0.0, 1.0);
                let interp = p.freq_scale * theta;
                let a = interp * (1.0 - ramp) + theta * ramp;
                let (c, s) = (a.cos() * mscale, a.sin() * mscale);
                theta *= theta_scale;
                let (x0, x1) = (head[i], head[i + p.n_rot / 2]);
                head[i] = x0 * c - x1 * s;
                head[i + p.n_rot / 2] = x0 * s + x1 * c;
            }
        }
    }
}

#[test]
fn rope_yarn_matches_ggml() {
    let mut rng = StdRng::seed_from_u64(8);
    let pos = [0, 5, 4000, 131];
    // gpt-oss's numbers: 64 rotated dims, base 150000, factor 32, an
    // original context of 4096.
    let yarn = minfer_graph::Yarn::new(1.0, 64, 4096, 150_000.0, [32.0, 1.0]);
    let p = RopeParams {
        freq_base: 150_000.0,
        freq_scale: 1.0 / 32.0,
        attn_factor: 0.999_999_9,
        yarn: Some(yarn),
        ..rope_params(RopeStyle::Neox, 2, 64, 64)
    };
    let [low, high] = yarn.corr_dims;
    assert!(
        0.0 < low && low < high && high < 32.0,
        "{:?}",
        yarn.corr_dims
    );
    let x = randn(&mut rng, pos.len() * 2 * 64);
    let mut y = x.clone();
    rope_ext_inplace(&mut y, &pos, &p, None, 8192).unwrap();
    let mut want = x.clone();
    rope_yarn_ggml(&mut want, &pos, &p, low, high);
    assert_eq!(y, want);
    // Without the blend the high-frequency pairs would be interpolated too.
    let mut plain = x.clone();
    let linear = RopeParams { yarn: None, ..p };
    rope_ext_inplace(&mut plain, &pos, &linear, None, 8192).unwrap();
    assert_ne!(plain, y);
}

#[test]
fn rope_styles_differ_and_positions_are_checked() {
    let mut rng = StdRng::seed_from_u64(6);
    let x = randn(&mut rng, 2 * 16);
    let pos = [5, 9];
    let mut a = x.clone();
    let mut b = x.clone();
    rope_inplace(&mut a, &pos, &rope_params(RopeStyle::Normal, 2, 8, 8), 16).unwrap();
    rope_inplace(&mut b, &pos, &rope_params(RopeStyle::Neox, 2, 8, 8), 16).unwrap();
    assert_ne!(a, b);
    // Each style preserves the norm of the pairs it rotates: Normal the
    // adjacent ones, Neox the halves.
    let pair_norm = |v: &[f32], i: usize, j: usize| (v[i] * v[i] + v[j] * v[j]).sqrt();
    for h in 0..4 {
        let o = h * 8;
        assert!((pair_norm(&a, o + 2, o + 3) - pair_norm(&x, o + 2, o + 3)).abs() < 1e-5);
        assert!((pair_norm(&b, o + 1, o + 5) - pair_norm(&x, o + 1, o + 5)).abs() < 1e-5);
    }

    let p = rope_params(RopeStyle::Neox, 2, 8, 8);
    for bad in [16, -1, i32::MAX, i32::MIN] {
        let mut y = x.clone();
        let r = rope_inplace(&mut y, &[3, bad], &p, 16);
        assert!(
            matches!(r, Err(GraphError::PositionOutOfRange { pos, n_ctx: 16 }) if pos == bad as i64),
            "{r:?}"
        );
        assert_eq!(y, x, "nothing written on error");
    }
    let mut y = x.clone();
    assert!(rope_inplace(&mut y, &[1], &p, 16).is_err(), "one row short");
    assert!(rope_inplace(&mut y, &pos, &rope_params(RopeStyle::Neox, 2, 8, 7), 16).is_err());
    assert!(rope_inplace(&mut y, &pos, &rope_params(RopeStyle::Neox, 2, 8, 10), 16).is_err());
}
