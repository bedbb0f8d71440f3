//! Helpers of the attention-op tests: the device, uploads and reads,
//! regions filled on the CPU and copied to the device, and attention
//! batches run on both backends.

#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use minfer_cpu::{self as cpu, AttnScratch, Windows};
use minfer_gpu::ops::attention::{
    attention, kv_store, new_kv, read_raw_row, write_raw_row, DeviceKv, SlidingInputs,
};
use minfer_gpu::{AdapterChoice, BufRange, Dispatch, Gpu};
use minfer_graph::kv::KvRegion;
use minfer_graph::{AttnParams, KvFormat};
use minfer_kernels::pool::ThreadPool;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

pub const FORMATS: [KvFormat; 3] = [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0];

pub fn gpu() -> &'static Arc<Gpu> {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| Gpu::open(AdapterChoice::Any).expect("a wgpu adapter (lavapipe)"))
}

pub fn run(d: Vec<Dispatch>) {
    gpu().run(&d).unwrap();
}

pub fn buf(data: &[u8]) -> BufRange {
    BufRange::whole(&gpu().upload("test input", data).unwrap())
}

pub fn buf_f32(v: &[f32]) -> BufRange {
    buf(bytemuck::cast_slice(v))
}

pub fn buf_i32(v: &[i32]) -> BufRange {
    buf(bytemuck::cast_slice(v))
}

pub fn read_f32(b: &BufRange, n: usize) -> Vec<f32> {
    gpu().read_f32(&b.buffer, n).unwrap()
}

/// `n` values uniform in [-1, 1).
pub fn uniform(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

pub fn max_abs_err(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// Every cell's raw row of a device region.
pub fn device_rows(kv: &DeviceKv) -> Vec<Vec<u8>> {
    (0..kv.n_ctx)
        .map(|c| {
            let mut r = Vec::new();
            read_raw_row(gpu(), kv, c, &mut r).unwrap();
            r
        })
        .collect()
}

pub fn cpu_rows(kv: &KvRegion) -> Vec<Vec<u8>> {
    (0..kv.n_ctx())
        .map(|c| {
            let mut r = Vec::new();
            kv.read_raw_row(c, &mut r).unwrap();
            r
        })
        .collect()
}

/// A device region holding exactly the CPU region's rows.
pub fn upload_region(r: &KvRegion) -> DeviceKv {
    let kv = new_kv(gpu(), r.format(), r.row_elems(), r.n_ctx()).unwrap();
    for (c, row) in cpu_rows(r).iter().enumerate() {
        write_raw_row(gpu(), &kv, c, row).unwrap();
    }
    kv
}

/// Stores `x` (rows) at `cells` on the CPU and on the device; returns both
/// regions.
pub fn store_both(
    format: KvFormat,
    row: usize,
    n_ctx: usize,
    x: &[f32],
    cells: &[i32],
) -> (KvRegion, DeviceKv) {
    let mut cpu_kv = KvRegion::new(format, row, n_ctx).unwrap();
    cpu::kv_store(&mut cpu_kv, x, cells).unwrap();
    let kv = new_kv(gpu(), format, row, n_ctx).unwrap();
    run(kv_store(gpu(), &kv, &buf_f32(x), &buf_i32(cells), cells.len() as u32).unwrap());
    (cpu_kv, kv)
}

pub fn assert_rows_equal(want: &[Vec<u8>], got: &[Vec<u8>], what: &str) {
    assert_eq!(want.len(), got.len());
    for (c, (w, g)) in want.iter().zip(got).enumerate() {
        assert!(w == g, "{what}: cell {c} differs from the CPU's raw row");
    }
}

/// CPU K/V regions of `n_ctx` cells filled with unit-scale values, and
/// their device copies.
pub fn regions(
    rng: &mut StdRng,
    format: KvFormat,
    row: usize,
    n_ctx: usize,
) -> (KvRegion, KvRegion, DeviceKv, DeviceKv) {
    let cells: Vec<i32> = (0..n_ctx as i32).collect();
    let mut k = KvRegion::new(format, row, n_ctx).unwrap();
    let mut v = KvRegion::new(format, row, n_ctx).unwrap();
    cpu::kv_store(&mut k, &uniform(rng, n_ctx * row), &cells).unwrap();
    cpu::kv_store(&mut v, &uniform(rng, n_ctx * row), &cells).unwrap();
    let (gk, gv) = (upload_region(&k), upload_region(&v));
    (k, v, gk, gv)
}

/// One batch of attention queries: windows and (for sliding windows)
/// positions.
pub struct Batch {
    pub offsets: Vec<i32>,
    pub cells: Vec<i32>,
    pub query_pos: Vec<i32>,
    pub cell_pos: Vec<i32>,
}

/// Windows of the given lengths over shuffled cells; each window's
/// positions rise (with gaps), as the cell store builds them.
pub fn batch(rng: &mut StdRng, lens: &[usize], n_ctx: usize) -> Batch {
    let mut b = Batch {
        offsets: vec![0],
        cells: Vec::new(),
        query_pos: Vec::new(),
        cell_pos: Vec::new(),
    };
    for &len in lens {
        let mut all: Vec<i32> = (0..n_ctx as i32).collect();
        all.shuffle(rng);
        b.cells.extend(&all[..len]);
        let mut pos = 0;
        for _ in 0..len {
            pos += rng.gen_range(1..3);
            b.cell_pos.push(pos);
        }
        b.query_pos.push(pos + rng.gen_range(0..2));
        b.offsets.push(b.cells.len() as i32);
    }
    b
}

/// The CPU backend's attention with one sink logit per query head.
pub fn cpu_attention_sinks(
    k: &KvRegion,
    v: &KvRegion,
    q: &[f32],
    b: &Batch,
    p: &AttnParams,
    sinks: &[f32],
) -> Vec<f32> {
    let pool = ThreadPool::new(1);
    let mut scratch = AttnScratch::new(1, k.n_ctx(), p.head_dim);
    let mut out = vec![f32::NAN; q.len()];
    let w = Windows {
        offsets: &b.offsets,
        cells: &b.cells,
        query_pos: &b.query_pos,
        cell_pos: &b.cell_pos,
    };
    cpu::attention_with_sinks(q, k, v, &w, sinks, p, &pool, &mut scratch, &mut out).unwrap();
    out
}

pub fn cpu_attention(k: &KvRegion, v: &KvRegion, q: &[f32], b: &Batch, p: &AttnParams) -> Vec<f32> {
    let pool = ThreadPool::new(1);
    let mut scratch = AttnScratch::new(1, k.n_ctx(), p.head_dim);
    let mut out = vec![f32::NAN; q.len()];
    if p.sliding_window == 0 {
        cpu::attention(
            q,
            k,
            v,
            &b.offsets,
            &b.cells,
            p,
            &pool,
            &mut scratch,
            &mut out,
        )
        .unwrap();
    } else {
        let w = Windows {
            offsets: &b.offsets,
            cells: &b.cells,
            query_pos: &b.query_pos,
            cell_pos: &b.cell_pos,
        };
        cpu::attention_sliding(q, k, v, &w, p, &pool, &mut scratch, &mut out).unwrap();
    }
    out
}

pub fn gpu_attention(k: &DeviceKv, v: &DeviceKv, q: &[f32], b: &Batch, p: &AttnParams) -> Vec<f32> {
    gpu_attention_sinks(k, v, q, b, p, None)
}

/// [`gpu_attention`] with one sink logit per query head, when given.
pub fn gpu_attention_sinks(
    k: &DeviceKv,
    v: &DeviceKv,
    q: &[f32],
    b: &Batch,
    p: &AttnParams,
    sinks: Option<&[f32]>,
) -> Vec<f32> {
    let n_rows = b.offsets.len() - 1;
    let out = BufRange::whole(&gpu().storage("out", (q.len() * 4) as u64).unwrap());
    // Garbage in the output, so that an unwritten value would show.
    gpu().write(
        &out.buffer,
        0,
        bytemuck::cast_slice(&vec![f32::NAN; q.len()]),
    );
    let sliding = SlidingInputs {
        positions: buf_i32(&b.query_pos),
        cell_positions: buf_i32(&b.cell_pos),
    };
    let s = (p.sliding_window > 0).then_some(&sliding);
    let d = attention(
        gpu(),
        &buf_f32(q),
        k,
        v,
        &buf_i32(&b.offsets),
        &buf_i32(&b.cells),
        s,
        sinks.map(buf_f32).as_ref(),
        n_rows as u32,
        p,
        &out,
    )
    .unwrap();
    run(d);
    read_f32(&out, q.len())
}

/// Row `t` of `b` alone.
pub fn single(b: &Batch, t: usize) -> Batch {
    let (from, to) = (b.offsets[t] as usize, b.offsets[t + 1] as usize);
    Batch {
        offsets: vec![0, (to - from) as i32],
        cells: b.cells[from..to].to_vec(),
        query_pos: vec![b.query_pos[t]],
        cell_pos: b.cell_pos[from..to].to_vec(),
    }
}
