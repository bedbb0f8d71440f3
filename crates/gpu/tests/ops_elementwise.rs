//! The elementwise and row ops of the GPU backend against the CPU
//! backend's functions, on whatever adapter `AdapterChoice::Any` opens
//! (Mesa's lavapipe on the CI machine).
//!
//! Add, mul and scale must give the CPU's bits. The others reproduce the
//! CPU's algorithms and give its bits on lavapipe too, but are held only
//! to the bounds that the rare midpoint cases allow: 1 ulp on at most
//! 10^-5 of the values for SiLU, SwiGLU, tanh, GeGLU, exp; 2 ulp (one ulp
//! of the row's factor, then the product's rounding) on at most 10^-3 of
//! the values for RMS norm, 10^-4 for softmax. Every test prints its
//! measured errors (run with `--nocapture` to see them).

use std::sync::{Arc, OnceLock};

use minfer_cpu as cpu;
use minfer_gpu::ops::elementwise::{self as ew, BinaryOp};
use minfer_gpu::{AdapterChoice, BufRange, Dispatch, Gpu};
use minfer_kernels::RowKernels;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One device for the whole binary (tests run on parallel threads).
fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        let g = Gpu::open(AdapterChoice::Any).expect("a GPU adapter (lavapipe will do)");
        eprintln!("adapter: {} ({})", g.adapter().name, g.adapter().driver);
        g
    })
}

fn upload(data: &[f32]) -> BufRange {
    BufRange::whole(&gpu().upload("test", bytemuck::cast_slice(data)).unwrap())
}

fn read(r: &BufRange, n: usize) -> Vec<f32> {
    gpu().read_f32(&r.buffer, n).unwrap()
}

fn run(d: &[Dispatch]) {
    gpu().run(d).unwrap();
}

/// Position of `x` on the line of f32 values (so that neighbours differ
/// by 1 and the two zeros coincide).
fn ordinal(x: f32) -> i64 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        -i64::from(b & 0x7fff_ffff)
    } else {
        i64::from(b)
    }
}

/// How far `gpu` is from `cpu`, value by value.
#[derive(Debug, Default)]
struct Diff {
    n: usize,
    /// Values whose bits differ (NaN matching NaN and 0 matching -0 count
    /// as equal).
    differ: usize,
    max_ulp: i64,
    max_abs: f64,
    /// Relative to |cpu|, over values of |cpu| >= 2^-126 (normal).
    max_rel: f64,
}

impl Diff {
    fn of(gpu: &[f32], cpu: &[f32]) -> Diff {
        assert_eq!(gpu.len(), cpu.len());
        let mut d = Diff {
            n: gpu.len(),
            ..Diff::default()
        };
        for (&g, &c) in gpu.iter().zip(cpu) {
            if g.is_nan() && c.is_nan() || g == c {
                continue;
            }
            d.differ += 1;
            if g.is_nan() || c.is_nan() || g.is_infinite() || c.is_infinite() {
                d.max_ulp = i64::MAX;
                d.max_abs = f64::INFINITY;
                d.max_rel = f64::INFINITY;
                continue;
            }
            d.max_ulp = d.max_ulp.max((ordinal(g) - ordinal(c)).abs());
            let abs = (f64::from(g) - f64::from(c)).abs();
            d.max_abs = d.max_abs.max(abs);
            if c.abs() >= f32::MIN_POSITIVE {
                d.max_rel = d.max_rel.max(abs / f64::from(c.abs()));
            }
        }
        d
    }

    /// Folds `d` into `self`, so one bound checks many shapes at once.
    fn add(&mut self, d: &Diff) {
        self.n += d.n;
        self.differ += d.differ;
        self.max_ulp = self.max_ulp.max(d.max_ulp);
        self.max_abs = self.max_abs.max(d.max_abs);
        self.max_rel = self.max_rel.max(d.max_rel);
    }

    fn print(&self, what: &str) -> &Self {
        eprintln!(
            "{what}: {} values, {} differ ({:.2e}), max {} ulp, max abs {:.3e}, max rel {:.3e}",
            self.n,
            self.differ,
            self.differ as f64 / self.n.max(1) as f64,
            self.max_ulp,
            self.max_abs,
            self.max_rel
        );
        self
    }

    fn exact(&self, what: &str) {
        self.print(what);
        assert_eq!(self.differ, 0, "{what}: not the CPU's bits");
    }

    /// At most `ulp` ulp apart, and at most `frac` of the values differ.
    fn within(&self, what: &str, ulp: i64, frac: f64) {
        self.print(what);
        assert!(self.max_ulp <= ulp, "{what}: {} ulp > {ulp}", self.max_ulp);
        assert!(
            self.differ as f64 <= frac * self.n as f64,
            "{what}: {} of {} values differ",
            self.differ,
            self.n
        );
    }
}

/// A standard normal value (Box-Muller).
fn normal(rng: &mut StdRng) -> f32 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let v: f64 = rng.gen();
    ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
}

/// A value of random sign and magnitude `10^[lo, hi)`, log-uniform.
fn magnitude(rng: &mut StdRng, lo: f32, hi: f32) -> f32 {
    let m = 10f32.powf(rng.gen_range(lo..hi));
    if rng.gen() {
        m
    } else {
        -m
    }
}

/// Inputs of every kind the tests mix: normal activations (scaled), wide
/// magnitudes, zeros.
fn mixed(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 8 {
            0 => 0.0,
            1 | 2 => magnitude(rng, -8.0, 8.0),
            _ => normal(rng) * scale,
        })
        .collect()
}

/// Row lengths of the row tests: 1, a head, Qwen2.5-0.5B's width, a
/// vocabulary, and lengths that are not multiples of 256.
const ROW_SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 300),
    (64, 1),
    (64, 37),
    (896, 1),
    (896, 5),
    (1000, 3),
    (262_144, 1),
    (262_144, 2),
];

#[test]
fn add_and_mul_are_exact() {
    let mut rng = StdRng::seed_from_u64(1);
    for &(ne0, rows) in ROW_SHAPES {
        for op in [BinaryOp::Add, BinaryOp::Mul] {
            for b_rows in [1, rows] {
                let a = mixed(&mut rng, ne0 * rows, 3.0);
                let b = mixed(&mut rng, ne0 * b_rows, 3.0);
                let (ga, gb) = (upload(&a), upload(&b));
                let d =
                    ew::binary_inplace(gpu(), op, &ga, &gb, ne0 as u32, rows as u32, b_rows as u32)
                        .unwrap();
                run(&d);
                let mut want = a.clone();
                match op {
                    BinaryOp::Add => cpu::add_inplace(&mut want, &b, ne0).unwrap(),
                    BinaryOp::Mul => cpu::mul_inplace(&mut want, &b, ne0).unwrap(),
                }
                Diff::of(&read(&ga, a.len()), &want)
                    .exact(&format!("{op:?} {rows}x{ne0}, b {b_rows} rows"));
            }
        }
    }
}

#[test]
fn scale_is_exact() {
    let mut rng = StdRng::seed_from_u64(2);
    for &(ne0, rows) in ROW_SHAPES {
        let x = mixed(&mut rng, ne0 * rows, 3.0);
        for s in [0.125f32, 0.088_388_35, -3.7, 1e-30, 0.0] {
            let gx = upload(&x);
            run(&ew::scale_inplace(gpu(), &gx, x.len() as u32, s).unwrap());
            let mut want = x.clone();
            cpu::scale_inplace(&mut want, s);
            Diff::of(&read(&gx, x.len()), &want).exact(&format!("scale {s} of {}", x.len()));
        }
    }
}

/// More than 65,535 workgroups of 256: the grid spreads over y, and every
/// value (the last ones included) is computed once.
#[test]
fn elementwise_grid_past_65535_groups() {
    let n = 65_535 * 256 + 3 * 256 * 1000 + 77;
    let x: Vec<f32> = (0..n).map(|i| (i % 1_000_003) as f32).collect();
    let gx = upload(&x);
    let d = ew::scale_inplace(gpu(), &gx, n as u32, 2.0).unwrap();
    assert!(d[0].groups[1] > 1, "the test must reach the y dimension");
    run(&d);
    let got = read(&gx, n);
    let bad = got.iter().zip(&x).filter(|(g, x)| **g != **x * 2.0).count();
    eprintln!(
        "scale over {n} values ({:?} groups): {bad} wrong",
        d[0].groups
    );
    assert_eq!(bad, 0);
}

/// Inputs for the exp-based ops: a dense sweep over the whole range where
/// exp is neither 0 nor 1 in f32, plus mixed values.
fn exp_inputs(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..2_000_000)
        .map(|i| -110.0 + 220.0 * i as f32 / 2_000_000.0)
        .collect();
    v.extend((0..200_000).map(|_| normal(rng) * 4.0));
    v.extend((0..100_000).map(|_| magnitude(rng, -40.0, 38.0)));
    v.extend([0.0, -0.0, 88.72, -88.72, 103.9, -103.9, 1e-45, -1e-45]);
    v
}

#[test]
fn silu_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(3);
    let x = exp_inputs(&mut rng);
    let gx = upload(&x);
    run(&ew::silu_inplace(gpu(), &gx, x.len() as u32).unwrap());
    let got = read(&gx, x.len());
    for rk in RowKernels::supported() {
        let mut want = x.clone();
        rk.silu(&mut want);
        Diff::of(&got, &want).within(&format!("silu (cpu simd {})", rk.is_simd()), 1, 1e-5);
    }
}

#[test]
fn swiglu_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(4);
    let g = exp_inputs(&mut rng);
    let u = mixed(&mut rng, g.len(), 2.0);
    let (gg, gu) = (upload(&g), upload(&u));
    run(&ew::swiglu_inplace(gpu(), &gg, &gu, g.len() as u32).unwrap());
    let mut want = g.clone();
    RowKernels::detect().swiglu(&mut want, &u);
    Diff::of(&read(&gg, g.len()), &want).within("swiglu", 1, 1e-5);
}

/// Whether this machine's C library has fdlibm's tanhf, which the shader
/// reproduces (glibc's, 2.36 here): it is not correctly rounded (about 5 %
/// of values are 1 or 2 ulp off), while a correctly rounded one
/// (CORE-MATH's, in recent glibc) matches the f64 tanh rounded to f32.
fn host_tanh_is_fdlibm() -> bool {
    static FDLIBM: OnceLock<bool> = OnceLock::new();
    *FDLIBM.get_or_init(|| {
        let differ = (0..200_000)
            .map(|i| -20.0 + 40.0 * i as f32 / 200_000.0)
            .filter(|&x| x.tanh() != (f64::from(x)).tanh() as f32)
            .count();
        if differ == 0 {
            eprintln!(
                "this C library's tanhf is correctly rounded, not fdlibm's: the GPU's tanh \
                 (fdlibm's) is held to fdlibm's own error, 2 ulp"
            );
        }
        differ > 0
    })
}

/// The tanh tolerance: the CPU's bits but in rare cases where the host
/// has fdlibm's tanhf, fdlibm's error otherwise.
fn tanh_ulp() -> i64 {
    if host_tanh_is_fdlibm() {
        1
    } else {
        2
    }
}

fn tanh_frac() -> f64 {
    if host_tanh_is_fdlibm() {
        1e-5
    } else {
        0.1
    }
}

#[test]
fn tanh_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut x: Vec<f32> = (0..2_000_000)
        .map(|i| -25.0 + 50.0 * i as f32 / 2_000_000.0)
        .collect();
    x.extend((0..200_000).map(|_| normal(&mut rng)));
    x.extend((0..200_000).map(|_| magnitude(&mut rng, -44.0, 38.0)));
    x.extend([0.0, -0.0, 22.0, -22.0, 9.0, -9.0, 1.0, -1.0, 0.5493, 1e-30]);
    let gx = upload(&x);
    run(&ew::tanh_inplace(gpu(), &gx, x.len() as u32).unwrap());
    let mut want = x.clone();
    cpu::tanh_inplace(&mut want);
    Diff::of(&read(&gx, x.len()), &want).within("tanh", tanh_ulp(), tanh_frac());
}

#[test]
fn geglu_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(6);
    // Every f16 value (the table's inputs), then random f32 ones.
    let mut g: Vec<f32> = (0..=u16::MAX)
        .map(half_to_f32)
        .filter(|v| v.is_finite())
        .collect();
    g.extend((0..300_000).map(|_| normal(&mut rng) * 3.0));
    g.extend((0..50_000).map(|_| magnitude(&mut rng, -9.0, 2.0)));
    g.extend([-10.0, 10.0, -9.999, 9.999, 0.0, -0.0]);
    let u = mixed(&mut rng, g.len(), 2.0);
    let (gg, gu) = (upload(&g), upload(&u));
    run(&ew::geglu_inplace(gpu(), &gg, &gu, g.len() as u32).unwrap());
    let mut want = g.clone();
    cpu::geglu_inplace(&mut want, &u).unwrap();
    Diff::of(&read(&gg, g.len()), &want).within("geglu", tanh_ulp(), tanh_frac());
}

/// An f16 bit pattern as f32 (exact).
fn half_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1f);
    let m = f32::from(h & 0x3ff);
    match e {
        0 => sign * m * 2f32.powi(-24),
        31 if m == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f32.powi(e - 15),
    }
}

/// Row inputs: activations of several scales, one row with a huge range.
fn row_inputs(rng: &mut StdRng, ne0: usize, rows: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(ne0 * rows);
    for r in 0..rows {
        let row: Vec<f32> = match r % 4 {
            0 => (0..ne0).map(|_| normal(rng)).collect(),
            1 => (0..ne0).map(|_| normal(rng) * 30.0).collect(),
            2 => mixed(rng, ne0, 1.0),
            _ => (0..ne0).map(|_| normal(rng) * 1e-3).collect(),
        };
        x.extend(row);
    }
    x
}

#[test]
fn rms_norm_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut all = Diff::default();
    for &(ne0, rows) in ROW_SHAPES {
        let x = row_inputs(&mut rng, ne0, rows);
        for eps in [1e-6f32, 1e-5] {
            let gx = upload(&x);
            let go = upload(&vec![0.0; x.len()]);
            run(&ew::rms_norm(gpu(), &gx, &go, ne0 as u32, rows as u32, eps).unwrap());
            let mut want = vec![0.0; x.len()];
            cpu::rms_norm(&x, ne0, eps, &mut want).unwrap();
            let d = Diff::of(&read(&go, x.len()), &want);
            d.print(&format!("rms_norm {rows}x{ne0} eps {eps}"));
            all.add(&d);
        }
    }
    // One ulp of the factor 1 / sqrt(mean + eps) moves the row by one ulp
    // at most (plus the product's own rounding): 2 ulp bound.
    all.within("rms_norm (all shapes)", 2, 1e-3);
}

#[test]
fn rms_norm_zero_and_all_equal_rows() {
    let ne0 = 896;
    let mut x = vec![0.0f32; ne0];
    x.extend(vec![3.25f32; ne0]);
    x.extend(vec![-1e-20f32; ne0]);
    x.extend(vec![1e19f32; ne0]);
    let rows = x.len() / ne0;
    let gx = upload(&x);
    let go = upload(&vec![0.0; x.len()]);
    run(&ew::rms_norm(gpu(), &gx, &go, ne0 as u32, rows as u32, 1e-6).unwrap());
    let mut want = vec![0.0; x.len()];
    cpu::rms_norm(&x, ne0, 1e-6, &mut want).unwrap();
    Diff::of(&read(&go, x.len()), &want).within("rms_norm special rows", 1, 0.3);
}

/// A row's result is the same bits alone as among other rows.
#[test]
fn rms_norm_and_softmax_are_batch_invariant() {
    let mut rng = StdRng::seed_from_u64(8);
    for ne0 in [64usize, 896, 4099] {
        let rows = 9;
        let x = row_inputs(&mut rng, ne0, rows);
        // The batch.
        let gx = upload(&x);
        let go = upload(&vec![0.0; x.len()]);
        run(&ew::rms_norm(gpu(), &gx, &go, ne0 as u32, rows as u32, 1e-6).unwrap());
        let norm_batch = read(&go, x.len());
        run(&ew::softmax_inplace(gpu(), &gx, ne0 as u32, rows as u32).unwrap());
        let soft_batch = read(&gx, x.len());
        // Each row alone, at another offset in another buffer.
        for r in 0..rows {
            let row = &x[r * ne0..(r + 1) * ne0];
            let gx = upload(row);
            let go = upload(&vec![0.0; ne0]);
            run(&ew::rms_norm(gpu(), &gx, &go, ne0 as u32, 1, 1e-6).unwrap());
            assert!(
                read(&go, ne0) == norm_batch[r * ne0..(r + 1) * ne0],
                "rms_norm row {r} of {ne0} differs alone"
            );
            run(&ew::softmax_inplace(gpu(), &gx, ne0 as u32, 1).unwrap());
            let alone = read(&gx, ne0);
            let same = alone
                .iter()
                .zip(&soft_batch[r * ne0..(r + 1) * ne0])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "softmax row {r} of {ne0} differs alone");
        }
    }
    eprintln!("rms_norm and softmax: every row the same bits alone and in a batch of 9");
}

#[test]
fn softmax_matches_the_cpu() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut all = Diff::default();
    let mut shapes = ROW_SHAPES.to_vec();
    shapes.push((32_000, 3));
    for &(ne0, rows) in &shapes {
        let mut x = row_inputs(&mut rng, ne0, rows);
        if rows > 1 {
            // A row spread over e^-120..1: the small exponentials are
            // subnormal or 0.
            for v in &mut x[..ne0] {
                *v = rng.gen_range(-120.0..0.0);
            }
        }
        let gx = upload(&x);
        run(&ew::softmax_inplace(gpu(), &gx, ne0 as u32, rows as u32).unwrap());
        let mut want = x.clone();
        cpu::softmax_inplace(RowKernels::detect(), &mut want, ne0).unwrap();
        let d = Diff::of(&read(&gx, x.len()), &want);
        d.print(&format!("softmax {rows}x{ne0}"));
        all.add(&d);
    }
    all.within("softmax (all shapes)", 2, 1e-4);
}

#[test]
fn bad_shapes_are_errors() {
    let a = upload(&[0.0; 64]);
    let b = upload(&[0.0; 64]);
    assert!(ew::binary_inplace(gpu(), BinaryOp::Add, &a, &b, 16, 4, 2).is_err());
    assert!(ew::binary_inplace(gpu(), BinaryOp::Add, &a, &b, 16, 8, 1).is_err());
    assert!(ew::rms_norm(gpu(), &a, &b, 0, 1, 1e-6).is_err());
    assert!(ew::softmax_inplace(gpu(), &a, 65, 1).is_err());
    assert!(ew::scale_inplace(gpu(), &a, 64, 1.0).is_ok());
    assert!(ew::scale_inplace(gpu(), &a, 0, 1.0).unwrap().is_empty());
}

/// More than 65,535 rows: the row kernels' grid spreads over y too.
#[test]
fn row_grid_past_65535_rows() {
    let mut rng = StdRng::seed_from_u64(10);
    let (ne0, rows) = (3usize, 70_001usize);
    let x = row_inputs(&mut rng, ne0, rows);
    let gx = upload(&x);
    let go = upload(&vec![0.0; x.len()]);
    let d = ew::rms_norm(gpu(), &gx, &go, ne0 as u32, rows as u32, 1e-6).unwrap();
    assert!(d[0].groups[1] > 1, "the test must reach the y dimension");
    run(&d);
    let mut want = vec![0.0; x.len()];
    cpu::rms_norm(&x, ne0, 1e-6, &mut want).unwrap();
    Diff::of(&read(&go, x.len()), &want).within("rms_norm 70001x3", 2, 1e-3);
    run(&ew::softmax_inplace(gpu(), &gx, ne0 as u32, rows as u32).unwrap());
    let mut want = x.clone();
    cpu::softmax_inplace(RowKernels::detect(), &mut want, ne0).unwrap();
    Diff::of(&read(&gx, x.len()), &want).within("softmax 70001x3", 2, 1e-4);
}

/// Ops on ranges that start inside a buffer touch only those ranges.
#[test]
fn ranges_at_offsets() {
    let mut rng = StdRng::seed_from_u64(11);
    let (ne0, rows) = (96usize, 3usize);
    let n = ne0 * rows;
    // Values 0..pad are a guard, the operands follow at byte 1024.
    let pad = 256;
    let whole = mixed(&mut rng, pad + n + pad, 2.0);
    let b = mixed(&mut rng, ne0, 2.0);
    let buf = gpu().upload("test", bytemuck::cast_slice(&whole)).unwrap();
    let range = BufRange {
        buffer: buf.clone(),
        offset: (pad * 4) as u64,
        size: Some((n * 4) as u64),
    };
    let gb = upload(&b);
    let mut d = ew::binary_inplace(
        gpu(),
        BinaryOp::Mul,
        &range,
        &gb,
        ne0 as u32,
        rows as u32,
        1,
    )
    .unwrap();
    d.extend(ew::softmax_inplace(gpu(), &range, ne0 as u32, rows as u32).unwrap());
    run(&d);
    let mut want = whole.clone();
    cpu::mul_inplace(&mut want[pad..pad + n], &b, ne0).unwrap();
    cpu::softmax_inplace(RowKernels::detect(), &mut want[pad..pad + n], ne0).unwrap();
    Diff::of(&read(&range, whole.len()), &want).exact("mul then softmax at an offset");
}

/// The shaders' math helpers alone, through a test kernel built from the
/// same WGSL: op 0 exp, 1 tanh, 2 a / b and 3 sqrt(a), the last two from a
/// starting value `k` ulp off (k = i % 7 - 3, as a GPU whose division or
/// square root is 3 ulp wrong would give), so the correction steps are
/// tested even on a device whose own results are IEEE.
const HELPER_TEST: &str = concat!(
    include_str!("../src/shaders/ew_common.wgsl"),
    include_str!("../src/shaders/ew_expf.wgsl"),
    include_str!("../src/shaders/ew_tanhf.wgsl"),
    r#"
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;

fn off_by(v: f32, k: i32) -> f32 {
    return bitcast<f32>(u32(i32(bitcast<u32>(v)) + k));
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if i >= P.n {
        return;
    }
    let k = i32(i % 7u) - 3;
    switch P.op {
        case 0u: { x[i] = expf(x[i]); }
        case 1u: { x[i] = tanhf(x[i]); }
        case 2u: {
            let a = x[i];
            let b = y[i];
            x[i] = quot_round(vec2<f32>(a, 0.0), vec2<f32>(b, 0.0), off_by(opq(a / b), k));
        }
        default: { x[i] = sqrt_round(x[i], off_by(opq(sqrt(x[i])), k)); }
    }
}
"#
);

/// Runs op `op` of [`HELPER_TEST`] over `x` (and `y`).
fn helper(op: u32, x: &[f32], y: &[f32]) -> Vec<f32> {
    let k = gpu().kernel("ew_helper_test", HELPER_TEST).unwrap();
    let gx = upload(x);
    let gy = upload(if y.is_empty() { &[0.0] } else { y });
    run(&[Dispatch {
        kernel: k,
        params: vec![x.len() as u32, 0, 0, op, 0, 0, 0, 0],
        buffers: vec![gx.clone(), gy],
        groups: minfer_gpu::ops::groups_for(x.len() as u64, 256),
    }]);
    read(&gx, x.len())
}

/// exp against the CPU's on a sample of every f32 bit pattern where the
/// result is neither 0 nor infinite (one in 509, all binades), and tanh on
/// a sample of the patterns of |x| < 22 (beyond, it is +-1).
#[test]
fn exp_and_tanh_on_sampled_bit_patterns() {
    let sample = |lo: f32, hi: f32| -> Vec<f32> {
        (0..u32::MAX / 509)
            .map(|i| f32::from_bits(i * 509))
            .chain((0..u32::MAX / 509).map(|i| -f32::from_bits(i * 509)))
            .filter(|v| *v >= lo && *v <= hi)
            .collect()
    };
    let x = sample(-104.0, 89.0);
    let want: Vec<f32> = x
        .iter()
        .map(|&v| minfer_kernels::activation::exp(v))
        .collect();
    Diff::of(&helper(0, &x, &[]), &want).within("exp, sampled patterns", 1, 1e-5);
    let x = sample(-22.0, 22.0);
    let want: Vec<f32> = x.iter().map(|v| v.tanh()).collect();
    Diff::of(&helper(1, &x, &[]), &want).within("tanh, sampled patterns", tanh_ulp(), tanh_frac());
}

/// Division and square root recover the IEEE result from a start 3 ulp
/// off, on random operands and on quotients next to a midpoint.
#[test]
fn division_and_sqrt_corrections() {
    let mut rng = StdRng::seed_from_u64(12);
    let mut a: Vec<f32> = (0..300_000)
        .map(|_| magnitude(&mut rng, -12.0, 12.0).abs())
        .collect();
    let mut b: Vec<f32> = (0..300_000)
        .map(|_| magnitude(&mut rng, -12.0, 12.0).abs())
        .collect();
    // Quotients near a midpoint: a = b * (q + ulp/2) rounded, for random
    // q and b, and the softmax case 1 / (2 - 2^-23).
    for _ in 0..100_000 {
        let q: f32 = rng.gen_range(1.0..2.0);
        let bb: f32 = rng.gen_range(1.0..2.0);
        let mid = f64::from(q) + f64::from(q).powi(0) * 2f64.powi(-24);
        a.push((mid * f64::from(bb)) as f32);
        b.push(bb);
    }
    a.push(1.0);
    b.push(2.0 - 2f32.powi(-23));
    let want: Vec<f32> = a.iter().zip(&b).map(|(a, b)| a / b).collect();
    Diff::of(&helper(2, &a, &b), &want).exact("division from 3 ulp off");
    let want: Vec<f32> = a.iter().map(|a| a.sqrt()).collect();
    Diff::of(&helper(3, &a, &[]), &want).exact("sqrt from 3 ulp off");
}
