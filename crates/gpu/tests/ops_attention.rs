//! The KV, RoPE and attention kernels against the CPU backend: stores and
//! raw rows to the bit, RoPE within a few ulp, attention within 1e-5 on
//! unit-scale inputs, and every attention row the same alone or in any
//! batch. Runs on whatever adapter `AdapterChoice::Any` finds (lavapipe on
//! the project's machines); max errors are printed with `--nocapture`.

mod attention_support;

use minfer_cpu as cpu;
use minfer_gpu::ops::attention::{
    attention, kv_store, new_kv, read_raw_row, rope_inplace, rope_kv_store, write_raw_row,
};
use minfer_gpu::{BufRange, Dispatch};
use minfer_graph::kv::KvRegion;
use minfer_graph::{AttnParams, KvFormat, RopeParams, RopeStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use attention_support::*;

/// f32 values around every f16 rounding edge: subnormal halves and their
/// ties, the normal ties, overflow to infinity, large and tiny values,
/// signed zeros, infinities and NaN.
fn f16_edge_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.996,
        65520.0,
        -65520.0,
        1e10,
        -3e38,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-45,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
    ];
    // Halves' smallest subnormal 2^-24, its half (a tie to zero), 1.5x (a
    // tie up), and the normal/subnormal boundary.
    for e in [-26i32, -25, -24, -23, -15, -14, -13, 0, 10, 15, 16] {
        let b = 2f32.powi(e);
        for m in [
            1.0f32,
            1.5,
            1.25,
            1.0 + 2f32.powi(-11),
            1.0 + 3.0 * 2f32.powi(-11),
        ] {
            for s in [1.0f32, -1.0] {
                let x = s * m * b;
                v.extend([
                    x,
                    f32::from_bits(x.to_bits() + 1),
                    f32::from_bits(x.to_bits() - 1),
                ]);
            }
        }
    }
    v
}

#[test]
fn f16_store_is_bit_exact() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut x = f16_edge_values();
    // Random bit patterns: every exponent, NaNs included.
    x.extend((0..200_000).map(|_| f32::from_bits(rng.gen())));
    // Random values in the half range, where most rounding happens.
    x.extend(
        (0..100_000)
            .map(|_| rng.gen_range(-70000.0f32..70000.0) * 2f32.powi(rng.gen_range(-30..1))),
    );
    let row = 64;
    x.resize(x.len().div_ceil(row) * row, 0.5);
    let n = x.len() / row;
    let mut cells: Vec<i32> = (0..n as i32).collect();
    cells.shuffle(&mut rng);
    let (c, g) = store_both(KvFormat::F16, row, n, &x, &cells);
    let (want, got) = (cpu_rows(&c), gpu().read(&g.buffer, 0, n * row * 2).unwrap());
    let mut nan = 0;
    for (i, (w, h)) in want
        .concat()
        .chunks_exact(2)
        .zip(got.chunks_exact(2))
        .enumerate()
    {
        let (w, h) = (
            u16::from_le_bytes([w[0], w[1]]),
            u16::from_le_bytes([h[0], h[1]]),
        );
        let is_nan = |b: u16| b & 0x7c00 == 0x7c00 && b & 0x3ff != 0;
        if is_nan(w) {
            nan += 1;
            assert!(is_nan(h), "half {i}: NaN stored as {h:#06x}");
        } else {
            assert_eq!(w, h, "half {i}: CPU {w:#06x}, GPU {h:#06x}");
        }
    }
    eprintln!(
        "f16 store: {} values bit-identical ({nan} NaN, NaN-ness kept)",
        x.len()
    );
}

/// Rows of blocks at every scale: zero blocks, one-value blocks, ties of
/// the quantizer's rounding, huge, tiny and infinite values.
fn q8_rows(rng: &mut StdRng, n_rows: usize, row: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(n_rows * row);
    for _ in 0..n_rows * row / 32 {
        let kind = rng.gen_range(0..10);
        let scale = 10f32.powi(rng.gen_range(-30..30));
        let mut b: Vec<f32> = (0..32)
            .map(|_| rng.gen_range(-1.0f32..1.0) * scale)
            .collect();
        match kind {
            0 => b.fill(0.0),
            1 => {
                b.fill(0.0);
                b[rng.gen_range(0..32)] = -scale;
            }
            // amax 127 makes 127 / amax exactly 1: halves are ties.
            2 => {
                for (i, v) in b.iter_mut().enumerate() {
                    *v = (i as f32 - 16.0) * 4.0 + 0.5;
                }
                b[0] = 127.0;
            }
            3 => b[5] = f32::INFINITY,
            4 => b[7] = 3e38,
            _ => {}
        }
        x.extend(b);
    }
    x
}

#[test]
fn q8_0_store_is_bit_exact() {
    let mut rng = StdRng::seed_from_u64(2);
    // An odd number of blocks (a lone last block and padding) and an even.
    for row in [96usize, 128, 256] {
        let n_ctx = 200;
        let n = 150;
        let x = q8_rows(&mut rng, n, row);
        let mut cells: Vec<i32> = (0..n_ctx as i32).collect();
        cells.shuffle(&mut rng);
        cells.truncate(n);
        let (c, g) = store_both(KvFormat::Q8_0, row, n_ctx, &x, &cells);
        assert_rows_equal(&cpu_rows(&c), &device_rows(&g), "q8_0 store");
        // Padding and unwritten cells stay zero.
        let all = gpu().read(&g.buffer, 0, n_ctx * g.stride as usize).unwrap();
        let want: Vec<u8> = cpu_rows(&c)
            .into_iter()
            .flat_map(|mut r| {
                r.resize(g.stride as usize, 0);
                r
            })
            .collect();
        assert!(
            all == want,
            "q8_0 region of rows of {row}: padding or other cells touched"
        );
        // Over garbage: every byte of a stored row is rewritten.
        gpu().write(&g.buffer, 0, &vec![0xa5; all.len()]);
        run(kv_store(gpu(), &g, &buf_f32(&x), &buf_i32(&cells), n as u32).unwrap());
        let (want, got) = (cpu_rows(&c), device_rows(&g));
        for &cell in &cells {
            assert!(
                want[cell as usize] == got[cell as usize],
                "q8_0 store over garbage, cell {cell}"
            );
        }
        eprintln!("q8_0 store, rows of {row}: {n} rows bit-identical");
    }
}

#[test]
fn f32_store_and_raw_rows_round_trip() {
    let mut rng = StdRng::seed_from_u64(3);
    let (row, n_ctx) = (128, 48);
    for format in FORMATS {
        let mut x = uniform(&mut rng, 40 * row);
        x[3] = f32::from_bits(0x7f80_1234); // a NaN payload, kept by f32 only
        x[4] = 1e-40;
        let mut cells: Vec<i32> = (0..n_ctx as i32).collect();
        cells.shuffle(&mut rng);
        cells.truncate(40);
        let (c, g) = store_both(format, row, n_ctx, &x, &cells);
        let from_gpu = device_rows(&g);
        assert_rows_equal(&cpu_rows(&c), &from_gpu, "store");
        // GPU rows into a CPU region, and CPU rows into a GPU region.
        let mut c2 = KvRegion::new(format, row, n_ctx).unwrap();
        for (cell, r) in from_gpu.iter().enumerate() {
            c2.write_raw_row(cell, r).unwrap();
        }
        assert_rows_equal(&cpu_rows(&c), &cpu_rows(&c2), "GPU -> CPU");
        let g2 = upload_region(&c);
        assert_rows_equal(&cpu_rows(&c), &device_rows(&g2), "CPU -> GPU");
        let (a, b) = (
            gpu().read(&g.buffer, 0, n_ctx * g.stride as usize).unwrap(),
            gpu()
                .read(&g2.buffer, 0, n_ctx * g.stride as usize)
                .unwrap(),
        );
        assert!(a == b, "{format:?}: regions differ after the round trip");
        assert!(write_raw_row(gpu(), &g, 0, &from_gpu[0][1..]).is_err());
        assert!(write_raw_row(gpu(), &g, n_ctx, &from_gpu[0]).is_err());
        assert!(read_raw_row(gpu(), &g, n_ctx, &mut Vec::new()).is_err());
        eprintln!("{format:?}: store, raw rows GPU<->CPU bit-identical");
    }
    assert!(new_kv(gpu(), KvFormat::Q8_0, 48, 4).is_err());
    assert!(new_kv(gpu(), KvFormat::F16, 63, 4).is_err());
    assert!(new_kv(gpu(), KvFormat::F32, 0, 4).is_err());
}

fn rope_cases() -> Vec<RopeParams> {
    let p = |style, n_head, head_dim, n_rot, freq_base, freq_scale| RopeParams {
        style,
        n_head,
        head_dim,
        n_rot,
        freq_base,
        freq_scale,
        attn_factor: 1.0,
        yarn: None,
    };
    vec![
        p(RopeStyle::Normal, 14, 64, 64, 1e6, 1.0),
        p(RopeStyle::Neox, 14, 64, 64, 1e6, 1.0),
        p(RopeStyle::Normal, 4, 128, 64, 10000.0, 0.25),
        p(RopeStyle::Neox, 4, 128, 96, 10000.0, 0.5),
        p(RopeStyle::Neox, 4, 256, 256, 1e6, 0.125),
        p(RopeStyle::Normal, 2, 80, 32, 500000.0, 1.0),
    ]
}

/// Max of |GPU - CPU| / (|x_a| + |x_b|) over every rotated pair, in f32
/// ulps of 1 (2^-23): how far the rotation is off relative to the pair's
/// size.
fn rope_rel_err(x: &[f32], got: &[f32], want: &[f32], p: &RopeParams) -> f64 {
    let mut worst = 0f64;
    for ((xh, gh), wh) in x
        .chunks(p.head_dim)
        .zip(got.chunks(p.head_dim))
        .zip(want.chunks(p.head_dim))
    {
        for e in 0..p.head_dim {
            if e >= p.n_rot {
                assert_eq!(
                    gh[e].to_bits(),
                    wh[e].to_bits(),
                    "unrotated dimension {e} changed"
                );
                continue;
            }
            let partner = match p.style {
                RopeStyle::Normal => e ^ 1,
                RopeStyle::Neox => (e + p.n_rot / 2) % p.n_rot,
            };
            let size = f64::from(xh[e].abs() + xh[partner].abs());
            let err = f64::from((gh[e] - wh[e]).abs());
            worst = worst.max(err / size.max(1e-30) * f64::from(1u32 << 23));
        }
    }
    worst
}

#[test]
fn rope_matches_cpu() {
    let mut rng = StdRng::seed_from_u64(4);
    for (limit, tol_ulp) in [(4000, 4.0), (32768, 4.0), (131072, 4.0)] {
        for p in rope_cases() {
            let n_rows = 24;
            let mut positions: Vec<i32> = (0..n_rows).map(|_| rng.gen_range(0..limit)).collect();
            positions[0] = 0;
            positions[1] = limit - 1;
            let row = p.n_head * p.head_dim;
            let x = uniform(&mut rng, n_rows as usize * row);
            let mut want = x.clone();
            cpu::rope_inplace(&mut want, &positions, &p, limit as usize).unwrap();
            let xb = buf_f32(&x);
            run(rope_inplace(gpu(), &xb, &buf_i32(&positions), n_rows as u32, &p).unwrap());
            let got = read_f32(&xb, x.len());
            let rel = rope_rel_err(&x, &got, &want, &p);
            eprintln!(
                "rope {:?} {}x{} rot {} scale {} positions < {limit}: max abs {:.2e}, {rel:.2} ulp of the pair",
                p.style,
                p.n_head,
                p.head_dim,
                p.n_rot,
                p.freq_scale,
                max_abs_err(&got, &want)
            );
            assert!(rel <= tol_ulp, "rope {p:?}: {rel} ulp");
        }
    }
    let bad = RopeParams {
        n_rot: 3,
        ..rope_cases()[0]
    };
    assert!(rope_inplace(gpu(), &buf_f32(&[0.0; 64]), &buf_i32(&[0]), 1, &bad).is_err());
}

#[test]
fn rope_kv_store_equals_rope_then_store() {
    let mut rng = StdRng::seed_from_u64(5);
    for format in FORMATS {
        for p in rope_cases() {
            let (n_rows, n_ctx) = (20usize, 32usize);
            let row = p.n_head * p.head_dim;
            if format == KvFormat::Q8_0 && row % 32 != 0 {
                continue;
            }
            let positions: Vec<i32> = (0..n_rows).map(|_| rng.gen_range(0..4000)).collect();
            let mut cells: Vec<i32> = (0..n_ctx as i32).collect();
            cells.shuffle(&mut rng);
            cells.truncate(n_rows);
            let x = uniform(&mut rng, n_rows * row);
            let (xb, pb, cb) = (buf_f32(&x), buf_i32(&positions), buf_i32(&cells));
            let fused = new_kv(gpu(), format, row, n_ctx).unwrap();
            run(rope_kv_store(gpu(), &fused, &xb, &pb, &cb, n_rows as u32, &p).unwrap());
            assert!(read_f32(&xb, x.len()) == x, "rope_kv_store changed x");
            // The unfused GPU path: the same bits.
            let plain = new_kv(gpu(), format, row, n_ctx).unwrap();
            let mut d = rope_inplace(gpu(), &xb, &pb, n_rows as u32, &p).unwrap();
            d.extend(kv_store(gpu(), &plain, &xb, &cb, n_rows as u32).unwrap());
            run(d);
            let fused_rows = device_rows(&fused);
            assert_rows_equal(&device_rows(&plain), &fused_rows, "fused vs unfused");
            // Against the CPU: the stored values decode within the rope
            // error plus one storage step.
            let mut rot = x.clone();
            cpu::rope_inplace(&mut rot, &positions, &p, 4096).unwrap();
            let mut c = KvRegion::new(format, row, n_ctx).unwrap();
            cpu::kv_store(&mut c, &rot, &cells).unwrap();
            let mut back = KvRegion::new(format, row, n_ctx).unwrap();
            let (mut a, mut b) = (vec![0f32; row], vec![0f32; row]);
            let (mut worst, mut differ) = (0f32, 0usize);
            for (cell, r) in fused_rows.iter().enumerate() {
                back.write_raw_row(cell, r).unwrap();
                back.read_row(cell, &mut a).unwrap();
                c.read_row(cell, &mut b).unwrap();
                worst = worst.max(max_abs_err(&a, &b));
                differ += usize::from(r != &cpu_rows(&c)[cell]);
            }
            let tol = match format {
                KvFormat::F32 => 2e-6,
                KvFormat::F16 => 1e-3,
                KvFormat::Q8_0 => 1.0 / 127.0 + 1e-6,
            };
            eprintln!(
                "rope_kv_store {format:?} {:?} {}x{} rot {}: max abs {worst:.2e} vs CPU, {differ}/{n_ctx} rows not bit-identical",
                p.style, p.n_head, p.head_dim, p.n_rot
            );
            assert!(worst <= tol, "{format:?} {p:?}: {worst}");
        }
    }
}

const GQA: [(usize, usize, usize); 3] = [(14, 2, 64), (4, 2, 128), (4, 1, 256)];

#[test]
fn attention_matches_cpu() {
    let mut rng = StdRng::seed_from_u64(6);
    let n_ctx = 512;
    for format in FORMATS {
        for (n_head, n_head_kv, hd) in GQA {
            let (k, v, gk, gv) = regions(&mut rng, format, n_head_kv * hd, n_ctx);
            let p = AttnParams::new(0, n_head, n_head_kv, hd);
            // An empty window among them: zeros, as on the CPU.
            let b = batch(&mut rng, &[1, 7, 300, 0, 64, 65], n_ctx);
            let q = uniform(&mut rng, (b.offsets.len() - 1) * n_head * hd);
            let want = cpu_attention(&k, &v, &q, &b, &p);
            let got = gpu_attention(&gk, &gv, &q, &b, &p);
            let err = max_abs_err(&got, &want);
            eprintln!("attention {format:?} {n_head}/{n_head_kv} x {hd}, windows 1,7,300,0,64,65: max abs {err:.2e}");
            assert!(err <= 1e-5, "{format:?} {n_head}/{n_head_kv} x {hd}: {err}");
            let empty = 3 * n_head * hd..4 * n_head * hd;
            assert!(
                got[empty].iter().all(|&x| x == 0.0),
                "an empty window gives zeros"
            );
        }
    }
}

/// gpt-oss's sinks: one extra softmax term per query head, on plain and
/// sliding windows and every KV format, against the CPU backend; a sink
/// far above the scores silences its head, one far below changes nothing.
#[test]
fn attention_with_sinks_matches_cpu() {
    let mut rng = StdRng::seed_from_u64(16);
    let n_ctx = 512;
    for format in FORMATS {
        for (n_head, n_head_kv, hd) in [(4, 2, 64), (8, 1, 128)] {
            let (k, v, gk, gv) = regions(&mut rng, format, n_head_kv * hd, n_ctx);
            for window in [0u32, 40] {
                let p = AttnParams::new(0, n_head, n_head_kv, hd).with_sliding_window(window);
                let b = batch(&mut rng, &[1, 7, 300, 0, 64], n_ctx);
                let q = uniform(&mut rng, (b.offsets.len() - 1) * n_head * hd);
                let sinks: Vec<f32> = (0..n_head).map(|h| h as f32 * 0.7 - 1.5).collect();
                let want = cpu_attention_sinks(&k, &v, &q, &b, &p, &sinks);
                let got = gpu_attention_sinks(&gk, &gv, &q, &b, &p, Some(&sinks));
                let err = max_abs_err(&got, &want);
                eprintln!("sinks {format:?} {n_head}/{n_head_kv} x {hd} window {window}: max abs {err:.2e}");
                assert!(err <= 1e-5, "{format:?} {n_head}/{n_head_kv} x {hd}: {err}");
                let plain = gpu_attention(&gk, &gv, &q, &b, &p);
                assert!(
                    max_abs_err(&plain, &got) > 1e-3,
                    "the sinks change the output"
                );
                let empty = 3 * n_head * hd..4 * n_head * hd;
                assert!(
                    got[empty].iter().all(|&x| x == 0.0),
                    "an empty window gives zeros"
                );
                let low = vec![-1e4f32; n_head];
                let same = gpu_attention_sinks(&gk, &gv, &q, &b, &p, Some(&low));
                assert_eq!(same, plain, "a sink far below the scores changes nothing");
                let high = vec![1e4f32; n_head];
                let quiet = gpu_attention_sinks(&gk, &gv, &q, &b, &p, Some(&high));
                assert!(
                    quiet.iter().all(|x| x.abs() < 1e-30),
                    "a sink far above silences"
                );
            }
        }
    }
}

#[test]
fn attention_long_window_and_mixed_formats() {
    let mut rng = StdRng::seed_from_u64(7);
    let n_ctx = 4096;
    let (n_head, n_head_kv, hd) = (4, 1, 256);
    let p = AttnParams::new(0, n_head, n_head_kv, hd);
    let (k16, v16, gk16, gv16) = regions(&mut rng, KvFormat::F16, hd, n_ctx);
    let (_, v8, _, gv8) = regions(&mut rng, KvFormat::Q8_0, hd, n_ctx);
    let b = batch(&mut rng, &[4000, 4096, 1], n_ctx);
    let q: Vec<f32> = uniform(&mut rng, 3 * n_head * hd)
        .iter()
        .map(|x| 3.0 * x)
        .collect();
    for (v, gv, what) in [(&v16, &gv16, "f16 K, f16 V"), (&v8, &gv8, "f16 K, q8_0 V")] {
        let want = cpu_attention(&k16, v, &q, &b, &p);
        let got = gpu_attention(&gk16, gv, &q, &b, &p);
        let err = max_abs_err(&got, &want);
        eprintln!("attention {what}, windows 4000, 4096, 1 (q x3): max abs {err:.2e}");
        assert!(err <= 1e-5, "{what}: {err}");
    }
}

#[test]
fn sliding_window_attention_matches_cpu() {
    let mut rng = StdRng::seed_from_u64(8);
    let n_ctx = 1024;
    for format in FORMATS {
        let (n_head, n_head_kv, hd) = (4, 1, 256);
        let (k, v, gk, gv) = regions(&mut rng, format, n_head_kv * hd, n_ctx);
        for window in [4u32, 512] {
            let p = AttnParams::new(0, n_head, n_head_kv, hd).with_sliding_window(window);
            let b = batch(&mut rng, &[1, 7, 300, 800, 2], n_ctx);
            let q = uniform(&mut rng, (b.offsets.len() - 1) * n_head * hd);
            let want = cpu_attention(&k, &v, &q, &b, &p);
            let got = gpu_attention(&gk, &gv, &q, &b, &p);
            let err = max_abs_err(&got, &want);
            eprintln!("sliding {window} attention {format:?}: max abs {err:.2e}");
            assert!(err <= 1e-5, "{format:?} sliding {window}: {err}");
        }
    }
    let p = AttnParams::new(0, 4, 1, 256).with_sliding_window(4);
    let kv = new_kv(gpu(), KvFormat::F32, 256, 8).unwrap();
    let (o, c) = (buf_i32(&[0, 1]), buf_i32(&[0]));
    assert!(attention(
        gpu(),
        &buf_f32(&[0.0; 1024]),
        &kv,
        &kv,
        &o,
        &c,
        None,
        None,
        1,
        &p,
        &buf_f32(&[0.0; 1024])
    )
    .is_err());
}

#[test]
fn attention_rows_are_batch_invariant() {
    let mut rng = StdRng::seed_from_u64(9);
    let n_ctx = 512;
    for format in FORMATS {
        for (n_head, n_head_kv, hd) in GQA {
            let (_, _, gk, gv) = regions(&mut rng, format, n_head_kv * hd, n_ctx);
            for window in [0u32, 100] {
                let p = AttnParams::new(0, n_head, n_head_kv, hd).with_sliding_window(window);
                let b = batch(&mut rng, &[300, 1, 7, 129, 64], n_ctx);
                let n_rows = b.offsets.len() - 1;
                let row = n_head * hd;
                let q = uniform(&mut rng, n_rows * row);
                let all = gpu_attention(&gk, &gv, &q, &b, &p);
                for t in 0..n_rows {
                    let alone =
                        gpu_attention(&gk, &gv, &q[t * row..(t + 1) * row], &single(&b, t), &p);
                    let same = alone
                        .iter()
                        .zip(&all[t * row..])
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{format:?} {n_head}/{n_head_kv} x {hd} window {window}: row {t} differs alone");
                }
            }
        }
    }
    eprintln!("attention: every row bit-identical alone and in its batch");
}

#[test]
fn attention_clamps_bad_cells_and_offsets() {
    let mut rng = StdRng::seed_from_u64(10);
    let (n_head, n_head_kv, hd, n_ctx) = (4, 2, 128, 16);
    let (_, _, gk, gv) = regions(&mut rng, KvFormat::Q8_0, n_head_kv * hd, n_ctx);
    let p = AttnParams::new(0, n_head, n_head_kv, hd);
    // Cells outside the region and offsets past the cells: no device
    // error, finite results.
    let b = Batch {
        offsets: vec![0, 3, 99, 2],
        cells: vec![-5, 1_000_000, 3],
        query_pos: vec![0; 3],
        cell_pos: vec![0; 3],
    };
    let q = uniform(&mut rng, 3 * n_head * hd);
    let got = gpu_attention(&gk, &gv, &q, &b, &p);
    assert!(got.iter().all(|x| x.is_finite()));
}

#[test]
fn dispatches_past_65535_workgroups() {
    let mut rng = StdRng::seed_from_u64(11);
    // One workgroup per row: 70,000 rows take a second grid dimension.
    let n = 70_000;
    let x = uniform(&mut rng, 2 * n);
    let mut cells: Vec<i32> = (0..n as i32).collect();
    cells.shuffle(&mut rng);
    let (c, g) = store_both(KvFormat::F16, 2, n, &x, &cells);
    let got = gpu().read(&g.buffer, 0, 4 * n).unwrap();
    assert!(got == cpu_rows(&c).concat(), "f16 store of {n} rows");
    let p = RopeParams {
        style: RopeStyle::Normal,
        n_head: 1,
        head_dim: 2,
        n_rot: 2,
        freq_base: 10000.0,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn: None,
    };
    let positions: Vec<i32> = (0..n).map(|_| rng.gen_range(0..4000)).collect();
    let mut want = x.clone();
    cpu::rope_inplace(&mut want, &positions, &p, 4096).unwrap();
    let xb = buf_f32(&x);
    run(rope_inplace(gpu(), &xb, &buf_i32(&positions), n as u32, &p).unwrap());
    let err = max_abs_err(&read_f32(&xb, x.len()), &want);
    assert!(err <= 4e-7, "rope of {n} rows: {err}");
    // 5,000 rows of 14 heads: 70,000 attention workgroups.
    let (k, v, gk, gv) = regions(&mut rng, KvFormat::F16, 2 * 64, 64);
    let p = AttnParams::new(0, 14, 2, 64);
    let lens: Vec<usize> = (0..5000).map(|i| 1 + i % 3).collect();
    let b = batch(&mut rng, &lens, 64);
    let q = uniform(&mut rng, lens.len() * 14 * 64);
    let err = max_abs_err(
        &gpu_attention(&gk, &gv, &q, &b, &p),
        &cpu_attention(&k, &v, &q, &b, &p),
    );
    assert!(err <= 1e-5, "attention over 70,000 workgroups: {err}");
}

/// The quantizer's correctly rounded division, on its own: random pairs
/// of every magnitude (subnormals, results that overflow or underflow)
/// against the CPU's `/`.
#[test]
fn q8_scale_division_is_correctly_rounded() {
    let src = [
        include_str!("../src/shaders/kv_common.wgsl"),
        include_str!("../src/shaders/kv_quant.wgsl"),
        "@group(0) @binding(0) var<uniform> n: vec4<u32>;
         @group(0) @binding(1) var<storage, read> ab: array<vec2<u32>>;
         @group(0) @binding(2) var<storage, read_write> q: array<u32>;
         fn value_bits(row: u32, j: u32) -> u32 { return 0u; }
         @compute @workgroup_size(64)
         fn main(@builtin(global_invocation_id) i: vec3<u32>) {
             if (i.x < n.x) { q[i.x] = div_rn(ab[i.x].x, ab[i.x].y); }
         }",
    ]
    .concat();
    let kernel = gpu().kernel("test_div_rn", &src).unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let finite = |rng: &mut StdRng| loop {
        let x = f32::from_bits(rng.gen::<u32>() & 0x7fff_ffff);
        if x.is_finite() {
            return x;
        }
    };
    let mut pairs: Vec<[f32; 2]> = (0..60_000)
        .map(|_| [finite(&mut rng), finite(&mut rng)])
        .collect();
    pairs.extend((0..60_000).map(|_| [127.0, finite(&mut rng)]));
    pairs.extend((0..60_000).map(|_| [finite(&mut rng), 127.0]));
    pairs.extend([
        [1e-45, 127.0],
        [f32::MAX, 1e-45],
        [0.0, 3.0],
        [127.0, f32::INFINITY],
    ]);
    let n = pairs.len();
    let out = BufRange::whole(&gpu().storage("q", 4 * n as u64).unwrap());
    run(vec![Dispatch {
        kernel,
        params: vec![n as u32],
        buffers: vec![buf(bytemuck::cast_slice(&pairs)), out.clone()],
        groups: [(n as u32).div_ceil(64), 1, 1],
    }]);
    let got: Vec<u32> = bytemuck::cast_slice(&gpu().read(&out.buffer, 0, 4 * n).unwrap()).to_vec();
    for (&[a, b], &g) in pairs.iter().zip(&got) {
        assert_eq!((a / b).to_bits(), g, "{a:e} / {b:e}");
    }
    eprintln!("q8_0 scale division: {n} quotients correctly rounded");
}
