//! Times the GPU ops at the shapes of a decode step (1 token) and of a
//! prefill (37 tokens) of SmolLM2-135M and Qwen2.5-0.5B, and the fixed
//! costs of a submit and of a dispatch, so that one can see where a step's
//! time goes on a device (lavapipe above all).
//!
//! Each op's dispatches are bound once and encoded `--reps` times in one
//! compute pass; a run is one submit and wait, and an op's time is the
//! median over `--runs` runs, less the empty submit's median, divided by
//! the repetitions. A step's estimate is the sum of each op's time times
//! its count in the model. Two times are given: wall time, and the CPU
//! time of all the process's threads (what a software device such as
//! lavapipe spends, less sensitive to other load on the machine; on a
//! real GPU it is only the driver's share).
//!
//! ```text
//! cargo run --release -p minfer-gpu --example op_bench -- \
//!     [--model smollm2|qwen|all] [--ntok 1,37] [--reps 8] [--runs 7] [--filter NAME]
//! ```

use std::sync::Arc;
use std::time::Instant;

use minfer_gpu::ops::{attention, elementwise, matmul};
use minfer_gpu::{AdapterChoice, Bound, BufRange, Dispatch, Gpu};
use minfer_graph::{AttnParams, KvFormat, RopeParams, RopeStyle};
use minfer_kernels::GgmlType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Opts {
    models: Vec<String>,
    ntoks: Vec<usize>,
    reps: usize,
    runs: usize,
    filter: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        models: vec!["smollm2".into(), "qwen".into()],
        ntoks: vec![1, 37],
        reps: 8,
        runs: 7,
        filter: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--model" if v == "all" => o.models = vec!["smollm2".into(), "qwen".into()],
            "--model" => o.models = v.split(',').map(String::from).collect(),
            "--ntok" => o.ntoks = v.split(',').map(|s| s.parse().expect("--ntok")).collect(),
            "--reps" => o.reps = v.parse().expect("--reps"),
            "--runs" => o.runs = v.parse().expect("--runs"),
            "--filter" => o.filter = Some(v),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// One product of a model: name, weight type, rows, cols, uses per step.
struct Mat {
    name: &'static str,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    count: usize,
}

struct Model {
    name: &'static str,
    layers: usize,
    d: usize,
    ffn: usize,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    /// Bias adds per layer (q, k, v) with their widths.
    biases: Vec<usize>,
    mats: Vec<Mat>,
    embd: (GgmlType, usize),
}

fn mat(name: &'static str, ty: GgmlType, rows: usize, cols: usize, count: usize) -> Mat {
    Mat {
        name,
        ty,
        rows,
        cols,
        count,
    }
}

fn model(name: &str) -> Model {
    use GgmlType::*;
    match name {
        "smollm2" => Model {
            name: "SmolLM2-135M (Q4_1, tied Q8_0 head)",
            layers: 30,
            d: 576,
            ffn: 1536,
            n_head: 9,
            n_head_kv: 3,
            head_dim: 64,
            biases: vec![],
            mats: vec![
                mat("attn_q", Q4_1, 576, 576, 30),
                mat("attn_k", Q4_1, 192, 576, 30),
                mat("attn_v", Q4_1, 192, 576, 30),
                mat("attn_output", Q4_1, 576, 576, 30),
                mat("ffn_gate", Q4_1, 1536, 576, 30),
                mat("ffn_up", Q4_1, 1536, 576, 30),
                mat("ffn_down", Q4_1, 576, 1536, 30),
                mat("output", Q8_0, 49152, 576, 1),
            ],
            embd: (Q8_0, 49152),
        },
        "qwen" => Model {
            name: "Qwen2.5-0.5B (Q4_K_M)",
            layers: 24,
            d: 896,
            ffn: 4864,
            n_head: 14,
            n_head_kv: 2,
            head_dim: 64,
            biases: vec![896, 128, 128],
            mats: vec![
                mat("attn_q", Q5_0, 896, 896, 24),
                mat("attn_k", Q5_0, 128, 896, 24),
                mat("attn_v q5_0", Q5_0, 128, 896, 12),
                mat("attn_v q8_0", Q8_0, 128, 896, 12),
                mat("attn_output", Q5_0, 896, 896, 24),
                mat("ffn_gate", Q5_0, 4864, 896, 24),
                mat("ffn_up", Q5_0, 4864, 896, 24),
                mat("ffn_down q4_k", Q4_K, 896, 4864, 12),
                mat("ffn_down q6_k", Q6_K, 896, 4864, 12),
                mat("output", Q8_0, 151936, 896, 1),
            ],
            embd: (Q5_0, 151936),
        },
        other => panic!("unknown model {other} (smollm2, qwen)"),
    }
}

/// Random bytes as a weight, with the f16 fields that scale blocks kept
/// finite and small so that the sums stay ordinary numbers.
fn random_weight(ty: GgmlType, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let row = minfer_kernels::matmul::row_bytes(ty, cols).expect("whole blocks");
    let mut data = vec![0u8; rows * row];
    rng.fill(&mut data[..]);
    // 0x1400 is an f16 of about 1e-3.
    let fix = |b: &mut [u8], at: usize| b[at..at + 2].copy_from_slice(&0x1400u16.to_le_bytes());
    let size = ty.type_size() as usize;
    match ty {
        GgmlType::F32 | GgmlType::F16 => {}
        GgmlType::Q6_K => data.chunks_exact_mut(size).for_each(|b| fix(b, 208)),
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q4_1 | GgmlType::Q5_1 => {
            data.chunks_exact_mut(size).for_each(|b| {
                fix(b, 0);
                fix(b, 2)
            })
        }
        _ => data.chunks_exact_mut(size).for_each(|b| fix(b, 0)),
    }
    data
}

fn f32_buf(gpu: &Gpu, n: usize, rng: &mut StdRng) -> Arc<wgpu::Buffer> {
    let v: Vec<f32> = (0..n.max(4)).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
    gpu.upload("bench f32", bytemuck::cast_slice(&v)).unwrap()
}

fn i32_buf(gpu: &Gpu, v: &[i32]) -> Arc<wgpu::Buffer> {
    let mut v = v.to_vec();
    v.resize(v.len().max(4), 0);
    gpu.upload("bench i32", bytemuck::cast_slice(&v)).unwrap()
}

fn whole(b: &Arc<wgpu::Buffer>) -> BufRange {
    BufRange::whole(b)
}

/// CPU time of every thread of this process so far, in ms (Linux; 0
/// elsewhere).
fn cpu_ms() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut ns = 0u64;
    for t in dir.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Timer {
    gpu: Arc<Gpu>,
    reps: usize,
    runs: usize,
    /// Medians of an empty submit and wait, in ms: wall and CPU.
    empty: (f64, f64),
}

impl Timer {
    /// Wall and CPU ms of one submit of `bound` and its wait.
    fn submit_wait(&self, bound: &[Bound]) -> (f64, f64) {
        let c = cpu_ms();
        let t = Instant::now();
        let mut enc = self.gpu.encoder();
        if !bound.is_empty() {
            self.gpu.encode(&mut enc, bound);
        }
        self.gpu.submit(enc);
        self.gpu.wait().unwrap();
        (t.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
    }

    /// Wall and CPU ms per instance of `ds` (all its dispatches), in a
    /// pass of `reps`.
    fn time(&self, ds: &[Dispatch]) -> (f64, f64) {
        self.time_reps(ds, self.reps)
    }

    fn time_reps(&self, ds: &[Dispatch], reps: usize) -> (f64, f64) {
        let mut bound = Vec::new();
        for _ in 0..reps {
            for d in ds {
                bound.push(self.gpu.bind(d).unwrap());
            }
        }
        // Warm-up (compiles the driver's code on first use).
        self.submit_wait(&bound);
        let runs: Vec<(f64, f64)> = (0..self.runs).map(|_| self.submit_wait(&bound)).collect();
        let per = |v: f64, e: f64| ((v - e) / reps as f64).max(0.0);
        (
            per(median(runs.iter().map(|r| r.0).collect()), self.empty.0),
            per(median(runs.iter().map(|r| r.1).collect()), self.empty.1),
        )
    }
}

/// One line of the report: ms per instance and per step.
struct Line {
    what: String,
    groups: u64,
    /// Wall and CPU ms per instance.
    each: (f64, f64),
    count: usize,
}

fn groups(ds: &[Dispatch]) -> u64 {
    ds.iter()
        .map(|d| d.groups.iter().map(|&g| u64::from(g)).product::<u64>())
        .sum()
}

const NOOP: &str = "
struct P { n: u32, a: u32, b: u32, c: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < p.n) { x[g.x] = x[g.x] + 1.0; }
}
";

fn fixed_costs(t: &Timer) {
    let gpu = &t.gpu;
    let x = gpu.storage("noop", 1 << 20).unwrap();
    let k = gpu.kernel("bench_noop", NOOP).unwrap();
    let d = |n: u32, g: u32| Dispatch {
        kernel: k.clone(),
        params: vec![n],
        buffers: vec![whole(&x)],
        groups: [g, 1, 1],
    };
    let one = t.time_reps(&[d(1, 1)], 1);
    let many = t.time_reps(&[d(1, 1)], 64);
    let wg1k = t.time_reps(&[d(1, 1024)], 4);
    let wg16k = t.time_reps(&[d(1, 16384)], 2);
    println!("fixed costs (wall / CPU):");
    println!(
        "  empty submit + wait            {:8.3} / {:8.3} ms",
        t.empty.0, t.empty.1
    );
    println!(
        "  + one 1-workgroup dispatch     {:8.3} / {:8.3} ms",
        one.0, one.1
    );
    println!(
        "  per dispatch in a pass of 64   {:8.3} / {:8.3} ms",
        many.0, many.1
    );
    println!(
        "  per workgroup (1,024 noop)     {:8.3} / {:8.3} us",
        wg1k.0 * 1e3 / 1024.0,
        wg1k.1 * 1e3 / 1024.0
    );
    println!(
        "  per workgroup (16,384 noop)    {:8.3} / {:8.3} us",
        wg16k.0 * 1e3 / 16384.0,
        wg16k.1 * 1e3 / 16384.0
    );
}

/// What one op costs: its dispatches timed, with how often a step runs it.
type Push<'a> = dyn FnMut(String, &[Dispatch], usize) + 'a;

fn bench_model(t: &Timer, m: &Model, n_tok: usize, filter: Option<&str>) {
    let gpu = &*t.gpu;
    let mut rng = StdRng::seed_from_u64(7);
    let mut lines: Vec<Line> = Vec::new();
    let want = |what: &str| filter.is_none_or(|f| what.contains(f));
    let mut push = |what: String, ds: &[Dispatch], count: usize| {
        if !want(&what) {
            return;
        }
        let each = t.time(ds);
        lines.push(Line {
            what,
            groups: groups(ds),
            each,
            count,
        });
    };
    bench_mats(gpu, m, n_tok, &mut rng, &mut push);
    let y = bench_elementwise(gpu, m, n_tok, &mut rng, &mut push);
    let pos = bench_attention(gpu, m, n_tok, &mut rng, &mut push);
    bench_embd(gpu, m, n_tok, &pos, &y, &mut rng, &mut push);
    report(m, n_tok, &lines);
}

/// The model's matrix products (with their activation quantization).
fn bench_mats(gpu: &Gpu, m: &Model, n_tok: usize, rng: &mut StdRng, push: &mut Push) {
    for mm in &m.mats {
        let data = random_weight(mm.ty, mm.rows, mm.cols, rng);
        let w = matmul::upload_weight(gpu, mm.name, mm.ty, mm.rows, mm.cols, &data).unwrap();
        drop(data);
        let x = f32_buf(gpu, n_tok * mm.cols, rng);
        let out = gpu.storage("out", (n_tok * mm.rows * 4) as u64).unwrap();
        let sb = matmul::matmul_scratch_bytes(mm.ty, mm.cols, n_tok);
        let scratch = gpu.storage("scratch", sb.max(16)).unwrap();
        let ds =
            matmul::matmul(gpu, &w, &whole(&x), n_tok, &whole(&out), &whole(&scratch)).unwrap();
        let label = format!("{} {} {}x{}", mm.name, mm.ty, mm.rows, mm.cols);
        let quantized = sb > 0;
        if quantized {
            push(format!("{label} quantize"), &ds[..1], mm.count);
            push(format!("{label} mat-vec"), &ds[1..], mm.count);
        } else {
            push(format!("{label} mat-vec"), &ds, mm.count);
        }
    }
}

/// Norms, residual and bias adds and SwiGLU; returns the output buffer
/// the embedding lookup writes into.
fn bench_elementwise(
    gpu: &Gpu,
    m: &Model,
    n_tok: usize,
    rng: &mut StdRng,
    push: &mut Push,
) -> Arc<wgpu::Buffer> {
    let (d, l) = (m.d, m.layers);
    let x = f32_buf(gpu, n_tok * m.ffn.max(m.d), rng);
    let y = f32_buf(gpu, n_tok * m.ffn.max(m.d), rng);
    let ds =
        elementwise::rms_norm(gpu, &whole(&x), &whole(&y), d as u32, n_tok as u32, 1e-5).unwrap();
    push(format!("rms_norm {d}"), &ds, 2 * l + 1);
    let ds = elementwise::binary_inplace(
        gpu,
        elementwise::BinaryOp::Add,
        &whole(&y),
        &whole(&x),
        d as u32,
        n_tok as u32,
        n_tok as u32,
    )
    .unwrap();
    push(format!("add {d}"), &ds, 2 * l);
    for &b in &m.biases {
        let ds = elementwise::binary_inplace(
            gpu,
            elementwise::BinaryOp::Add,
            &whole(&y),
            &whole(&x),
            b as u32,
            n_tok as u32,
            1,
        )
        .unwrap();
        push(format!("bias add {b}"), &ds, l);
    }
    let n = (n_tok * m.ffn) as u32;
    let ds = elementwise::swiglu_inplace(gpu, &whole(&y), &whole(&x), n).unwrap();
    push(format!("swiglu {}", m.ffn), &ds, l);
    y
}

/// RoPE, the KV stores and attention; returns the token positions.
fn bench_attention(
    gpu: &Gpu,
    m: &Model,
    n_tok: usize,
    rng: &mut StdRng,
    push: &mut Push,
) -> Vec<i32> {
    let l = m.layers;
    // Attention over a context of 40 cells for decode, a causal prefill
    // of n_tok otherwise.
    let n_ctx = 512;
    let past: usize = if n_tok == 1 { 39 } else { 0 };
    let pos: Vec<i32> = (0..n_tok).map(|i| (i + past) as i32).collect();
    let mut offsets = vec![0i32];
    let mut cells = Vec::new();
    for &p in &pos {
        cells.extend(0..=p);
        offsets.push(cells.len() as i32);
    }
    let pos_b = i32_buf(gpu, &pos);
    let cells_b = i32_buf(gpu, &cells);
    let offsets_b = i32_buf(gpu, &offsets);
    let store_cells = i32_buf(gpu, &pos);
    let kv_row = m.n_head_kv * m.head_dim;
    let kk = attention::new_kv(gpu, KvFormat::F16, kv_row, n_ctx).unwrap();
    let vv = attention::new_kv(gpu, KvFormat::F16, kv_row, n_ctx).unwrap();
    let rope = |n_head| RopeParams {
        style: RopeStyle::Neox,
        n_head,
        head_dim: m.head_dim,
        n_rot: m.head_dim,
        freq_base: 10000.0,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn: None,
    };
    let q = f32_buf(gpu, n_tok * m.n_head * m.head_dim, rng);
    let ds = attention::rope_inplace(
        gpu,
        &whole(&q),
        &whole(&pos_b),
        n_tok as u32,
        &rope(m.n_head),
    )
    .unwrap();
    push(format!("rope q {}x{}", m.n_head, m.head_dim), &ds, l);
    let kx = f32_buf(gpu, n_tok * kv_row, rng);
    let ds = attention::rope_kv_store(
        gpu,
        &kk,
        &whole(&kx),
        &whole(&pos_b),
        &whole(&store_cells),
        n_tok as u32,
        &rope(m.n_head_kv),
    )
    .unwrap();
    push(format!("rope+store k {kv_row}"), &ds, l);
    let ds =
        attention::kv_store(gpu, &vv, &whole(&kx), &whole(&store_cells), n_tok as u32).unwrap();
    push(format!("store v {kv_row}"), &ds, l);
    let ap = AttnParams::new(0, m.n_head, m.n_head_kv, m.head_dim);
    let out = gpu
        .storage("attn out", (n_tok * m.n_head * m.head_dim * 4) as u64)
        .unwrap();
    let ds = attention::attention(
        gpu,
        &whole(&q),
        &kk,
        &vv,
        &whole(&offsets_b),
        &whole(&cells_b),
        None,
        None,
        n_tok as u32,
        &ap,
        &whole(&out),
    )
    .unwrap();
    push(
        format!(
            "attention {}h/{}kv ctx {}",
            m.n_head,
            m.n_head_kv,
            past + n_tok
        ),
        &ds,
        l,
    );
    pos
}

/// The embedding lookup, rows picked by `pos`, into `y`.
fn bench_embd(
    gpu: &Gpu,
    m: &Model,
    n_tok: usize,
    pos: &[i32],
    y: &Arc<wgpu::Buffer>,
    rng: &mut StdRng,
    push: &mut Push,
) {
    let d = m.d;
    let (ety, erows) = m.embd;
    let data = random_weight(ety, erows.min(4096), d, rng);
    let w = matmul::upload_weight(gpu, "embd", ety, erows.min(4096), d, &data).unwrap();
    let ids = i32_buf(gpu, pos);
    let ds = matmul::get_rows(gpu, &w, &whole(&ids), n_tok, &whole(y)).unwrap();
    push(format!("get_rows {ety} {d}"), &ds, 1);
}

/// Prints the timed ops of `m` and their totals per step.
fn report(m: &Model, n_tok: usize, lines: &[Line]) {
    println!();
    println!("{} n_tok={n_tok}", m.name);
    println!(
        "  {:<40} {:>7} {:>9} {:>9} {:>5} {:>9} {:>9}",
        "op", "groups", "wall ms", "cpu ms", "count", "wall/step", "cpu/step"
    );
    let (mut wall, mut cpu) = (0.0, 0.0);
    for ln in lines {
        let (w, c) = (ln.each.0 * ln.count as f64, ln.each.1 * ln.count as f64);
        wall += w;
        cpu += c;
        println!(
            "  {:<40} {:>7} {:>9.3} {:>9.3} {:>5} {:>9.2} {:>9.2}",
            ln.what, ln.groups, ln.each.0, ln.each.1, ln.count, w, c
        );
    }
    println!(
        "  {:<40} {:>7} {:>9} {:>9} {:>5} {:>9.2} {:>9.2}",
        "total", "", "", "", "", wall, cpu
    );
}

fn main() {
    let o = opts();
    let gpu = Gpu::open(AdapterChoice::Any).expect("a Vulkan adapter");
    println!(
        "adapter: {} ({}), reps {} runs {}",
        gpu.adapter().name,
        gpu.adapter().kind.name(),
        o.reps,
        o.runs
    );
    let mut t = Timer {
        gpu,
        reps: o.reps,
        runs: o.runs,
        empty: (0.0, 0.0),
    };
    t.submit_wait(&[]);
    let e: Vec<(f64, f64)> = (0..21).map(|_| t.submit_wait(&[])).collect();
    t.empty = (
        median(e.iter().map(|r| r.0).collect()),
        median(e.iter().map(|r| r.1).collect()),
    );
    fixed_costs(&t);
    for name in &o.models {
        let m = model(name);
        for &n_tok in &o.ntoks {
            bench_model(&t, &m, n_tok, o.filter.as_deref());
        }
    }
}
