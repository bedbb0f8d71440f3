//! Cycles-ish per key and query head of the attention loops on one block
//! of 64 keys that stays in L1: scoring f16 rows in place (two or four
//! heads per load) against widening the block once and scoring it by
//! columns, the softmax and the V sums. CPU time of the calling thread.
//!
//! `cargo run --release -p minfer-kernels --example cols_cost -- [HEAD_DIM] [HEADS] [ROUNDS] [avx2|scalar]`

mod common;

use common::thread_cpu_seconds;
use minfer_kernels::{HeadRows, RowKernels, Rows};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (hd, heads, rounds) = (num(0, 64), num(1, 28), num(2, 20000));
    let n = 64;
    let stride = 2 * hd;
    let data: Vec<u16> = (0..n * stride).map(|i| 0x3c00 + (i % 512) as u16).collect();
    let idx: Vec<i32> = (0..n as i32).collect();
    let rows = Rows {
        data: &data[..],
        stride,
        offset: 0,
        idx: &idx,
    };
    let qs: Vec<f32> = (0..heads * hd).map(|i| (i % 7) as f32 * 0.01).collect();
    let mut scores = vec![0.0f32; heads * n];
    let mut cols = vec![0.0f32; hd * n];
    let mut outs = vec![0.0f32; heads * hd];
    let rk = match args.get(3).map(String::as_str) {
        Some("avx2") => RowKernels::for_level(minfer_kernels::SimdLevel::Avx2),
        Some("scalar") => RowKernels::SCALAR,
        _ => RowKernels::detect(),
    };
    let heads7 = heads.min(7);
    let per = |secs: f64| secs * 1e9 / (rounds * n * heads) as f64;
    let report = |name: &str, f: &mut dyn FnMut()| {
        let c0 = thread_cpu_seconds();
        for _ in 0..rounds {
            f();
        }
        println!(
            "{name:24} {:6.3} ns per key-head",
            per(thread_cpu_seconds() - c0)
        );
    };
    report("dot rows f16 (heads)", &mut || {
        rk.dot_rows_f16_heads(&qs, hd, rows, 0.1, &mut scores, n)
            .unwrap();
    });
    report("widen cols", &mut || {
        u16::cols(rk, rows, hd, &mut cols, n).unwrap();
    });
    report("dot cols", &mut || {
        rk.dot_cols_heads(&qs[..heads7 * hd], hd, &cols, n, 0..n, 0.1, &mut scores, n)
            .unwrap();
        rk.dot_cols_heads(
            &qs[heads7 * hd..],
            hd,
            &cols,
            n,
            0..n,
            0.1,
            &mut scores[heads7 * n..],
            n,
        )
        .unwrap();
    });
    report("softmax", &mut || {
        for s in scores.chunks_exact_mut(n) {
            rk.softmax(s);
        }
    });
    report("axpy rows f16 (heads)", &mut || {
        rk.axpy_rows_f16_heads(&scores, n, rows, &mut outs, hd)
            .unwrap();
    });
    let data32: Vec<f32> = data
        .iter()
        .map(|&h| minfer_kernels::blocks::f16_to_f32(h.to_le_bytes()))
        .collect();
    let rows32 = Rows {
        data: &data32[..],
        stride,
        offset: 0,
        idx: &idx,
    };
    let mut outs32 = vec![0.0f32; heads * hd];
    report("axpy rows f32 (heads)", &mut || {
        f32::axpy_heads(rk, &scores, n, rows32, &mut outs32, hd).unwrap();
    });
    println!("{}", outs.iter().sum::<f32>());
}
