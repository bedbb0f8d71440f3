//! What the kernel benchmarks share: weight matrices of random quants with
//! small scales, the activations they multiply, and the median of a run's
//! timings.

// Each example includes this module and uses part of it.
#![allow(dead_code)]

use minfer_kernels::matmul::row_bytes;
use minfer_kernels::{GgmlType, Layout, MatRef};

/// The weight types measured, each at one of Qwen2.5-0.5B's (or, for the
/// types it lacks, Qwen2.5-1.5B's) matrix shapes: `(type, rows, cols)`.
pub const SHAPES: [(GgmlType, usize, usize); 10] = [
    (GgmlType::Q5_0, 4864, 896),
    (GgmlType::Q6_K, 896, 4864),
    (GgmlType::Q8_0, 896, 128),
    (GgmlType::Q4_1, 1536, 576),
    (GgmlType::Q4_K, 8960, 1536),
    (GgmlType::Q5_K, 1536, 8960),
    (GgmlType::IQ4_NL, 4864, 896),
    (GgmlType::IQ4_XS, 896, 4864),
    (GgmlType::Q3_K, 896, 4864),
    (GgmlType::Q2_K, 896, 4864),
];

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `copies` matrices of `ty` (`rows` × `cols`, the file's row layout) with
/// random quants and every block scale (and minimum) set to 0.01, so the
/// sums stay finite. The same copies on every call.
pub fn matrices(ty: GgmlType, rows: usize, cols: usize, copies: usize) -> Vec<Vec<u8>> {
    let bytes = rows * row_bytes(ty, cols).unwrap();
    let mut seed = 1u32;
    let small = minfer_kernels::blocks::f32_to_f16(0.01);
    (0..copies)
        .map(|_| {
            let mut d: Vec<u8> = (0..bytes)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 24) as u8
                })
                .collect();
            let bs = ty.type_size() as usize;
            let d_at = match ty {
                GgmlType::Q6_K => 208,
                GgmlType::Q3_K => 108,
                GgmlType::Q2_K => 80,
                _ => 0,
            };
            for blk in d.chunks_exact_mut(bs) {
                blk[d_at..d_at + 2].copy_from_slice(&small);
                if matches!(ty, GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K) {
                    blk[2..4].copy_from_slice(&small);
                }
                if ty == GgmlType::Q2_K {
                    blk[82..84].copy_from_slice(&small);
                }
            }
            d
        })
        .collect()
}

/// `n_tok` tokens' activations of `cols` values, the same on every call.
pub fn activations(n_tok: usize, cols: usize) -> Vec<f32> {
    (0..n_tok * cols)
        .map(|i| ((i % 97) as f32 - 48.0) / 50.0)
        .collect()
}

/// `data` as a `rows` × `cols` matrix of `ty` in `layout`.
pub fn mat(ty: GgmlType, rows: usize, cols: usize, data: &[u8], layout: Layout) -> MatRef<'_> {
    MatRef {
        ty,
        rows,
        cols,
        data,
        layout,
    }
}

/// Seconds of CPU time the calling thread has used: on a shared machine,
/// what a one-thread run costs regardless of how often it was preempted
/// (wall time counts the other processes' turns too).
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant every Linux kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
