//! The GPU's matmul and get_rows against the CPU kernels (scalar path,
//! row layout): every supported weight type at several shapes and batch
//! sizes, bit-exact row lookups, batch invariance, weights split into
//! chunks, and tensors of the real models.
//!
//! The GPU quantizes activations exactly as the CPU does and sums each
//! block's quant products exactly, so the products differ from the CPU's
//! only in the order of the f32 sums over blocks; the tolerances below are
//! bounds on that, relative to the largest value of the output row.

use std::sync::{Arc, OnceLock};

use minfer_gpu::ops::matmul::{self, DeviceWeight};
use minfer_gpu::{AdapterChoice, BufRange, Gpu};
use minfer_kernels::blocks::{f16_to_f32, f32_to_f16, BlockQ8K, BlockQ8_0, BlockQ8_1, QK_K};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{dequant, quant, ActScratch, GgmlType, Kernels, Layout, MatRef, SimdLevel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Every type the backend supports.
const TYPES: [GgmlType; 10] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::F16,
    GgmlType::F32,
];

/// Largest accepted `max |gpu - cpu| / max |cpu|` over one output row, per
/// weight type (measured maxima are printed by the tests; these leave a
/// few times that as margin).
fn tolerance(ty: GgmlType) -> f32 {
    match ty {
        GgmlType::F32 | GgmlType::F16 => 2e-6,
        _ => 1e-6,
    }
}

/// One device for the whole binary (lavapipe is enough).
fn gpu() -> Arc<Gpu> {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| Gpu::open(AdapterChoice::Any).expect("a Vulkan adapter (lavapipe will do)"))
        .clone()
}

/// A random f16 scale in [lo, hi).
fn f16_in(rng: &mut StdRng, lo: f32, hi: f32) -> [u8; 2] {
    f32_to_f16(rng.gen_range(lo..hi))
}

/// `rows` random rows of `cols` values of `ty`: the legacy types and the
/// float types quantized from random f32 with the CPU's quantizers, the
/// K-quants (which have no quantizer here) as random blocks with sane
/// scales.
fn random_weight(ty: GgmlType, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let row = minfer_kernels::matmul::row_bytes(ty, cols).unwrap();
    let mut data = vec![0u8; rows * row];
    match ty {
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
            rng.fill(&mut data[..]);
            let size = ty.type_size() as usize;
            for block in data.chunks_exact_mut(size) {
                match ty {
                    GgmlType::Q6_K => block[208..210].copy_from_slice(&f16_in(rng, 1e-4, 4e-3)),
                    _ => {
                        block[0..2].copy_from_slice(&f16_in(rng, 1e-4, 2e-3));
                        block[2..4].copy_from_slice(&f16_in(rng, 1e-4, 2e-3));
                    }
                }
            }
        }
        GgmlType::F32 => {
            for v in data.chunks_exact_mut(4) {
                v.copy_from_slice(&rng.gen_range(-1.0f32..1.0).to_le_bytes());
            }
        }
        _ => {
            let mut src = vec![0f32; cols];
            for r in 0..rows {
                // Rows of different magnitudes, so that the scales differ.
                let scale = rng.gen_range(0.01f32..2.0);
                for v in src.iter_mut() {
                    *v = rng.gen_range(-1.0f32..1.0) * scale;
                }
                quant::quantize_row(ty, &src, &mut data[r * row..(r + 1) * row]).unwrap();
            }
        }
    }
    data
}

/// `n` random activations: mostly in [-1, 1], some large outliers, and the
/// first 256 values of token 1 (when there is one) zero, so that an
/// all-zero block is quantized too.
fn random_acts(n_tok: usize, cols: usize, rng: &mut StdRng) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n_tok * cols)
        .map(|_| {
            if rng.gen_bool(0.01) {
                rng.gen_range(-30.0f32..30.0)
            } else {
                rng.gen_range(-1.0f32..1.0)
            }
        })
        .collect();
    if n_tok > 1 {
        x[cols..cols + 256.min(cols)].fill(0.0);
    }
    x
}

/// The CPU's product (scalar kernels, row layout, one thread).
fn cpu_matmul(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: &[u8],
    x: &[f32],
    n_tok: usize,
) -> Vec<f32> {
    let kernels = Kernels::new(SimdLevel::Scalar).unwrap();
    let pool = ThreadPool::new(1);
    let w = MatRef {
        ty,
        rows,
        cols,
        data,
        layout: Layout::Rows,
    };
    let mut out = vec![0f32; n_tok * rows];
    minfer_kernels::matmul(
        &kernels,
        &pool,
        &w,
        x,
        n_tok,
        &mut out,
        &mut ActScratch::default(),
    )
    .unwrap();
    out
}

/// The GPU's product of `w` with `n_tok` rows of `x`.
fn gpu_matmul(gpu: &Gpu, w: &DeviceWeight, x: &[f32], n_tok: usize) -> Vec<f32> {
    let xb = gpu.upload("x", bytemuck::cast_slice(x)).unwrap();
    let out = gpu.storage("out", (n_tok * w.rows * 4) as u64).unwrap();
    let scratch = gpu
        .storage("scratch", matmul::matmul_scratch_bytes(w.ty, w.cols, n_tok))
        .unwrap();
    let d = matmul::matmul(
        gpu,
        w,
        &BufRange::whole(&xb),
        n_tok,
        &BufRange::whole(&out),
        &BufRange::whole(&scratch),
    )
    .unwrap();
    gpu.run(&d).unwrap();
    gpu.read_f32(&out, n_tok * w.rows).unwrap()
}

/// The GPU's rows `ids` of `w`.
fn gpu_get_rows(gpu: &Gpu, w: &DeviceWeight, ids: &[i32]) -> Vec<f32> {
    let ib = gpu.upload("ids", bytemuck::cast_slice(ids)).unwrap();
    let out = gpu
        .storage("rows", (ids.len() * w.cols * 4) as u64)
        .unwrap();
    // Garbage first, so that a value the kernel fails to write shows.
    gpu.write(&out, 0, &vec![0xA5u8; ids.len() * w.cols * 4]);
    let d = matmul::get_rows(
        gpu,
        w,
        &BufRange::whole(&ib),
        ids.len(),
        &BufRange::whole(&out),
    )
    .unwrap();
    gpu.run(&d).unwrap();
    gpu.read_f32(&out, ids.len() * w.cols).unwrap()
}

/// Errors of `got` against `want` (`n_tok` rows of `rows`): the largest
/// absolute difference and the largest per-row ratio of it to the row's
/// largest magnitude.
fn errors(got: &[f32], want: &[f32], rows: usize) -> (f32, f32) {
    assert_eq!(got.len(), want.len());
    let mut abs = 0f32;
    let mut rel = 0f32;
    for (g, c) in got.chunks(rows).zip(want.chunks(rows)) {
        let scale = c.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = g.iter().zip(c).fold(0f32, |m, (a, b)| {
            if a.is_nan() || b.is_nan() {
                f32::INFINITY
            } else {
                m.max((a - b).abs())
            }
        });
        abs = abs.max(diff);
        if scale > 0.0 {
            rel = rel.max(diff / scale);
        } else if diff > 0.0 {
            rel = f32::INFINITY;
        }
    }
    (abs, rel)
}

/// Shapes per type: values per row (the legacy types also take rows that
/// are not whole super-blocks).
fn col_shapes(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => &[256, 512, 2048],
        GgmlType::F16 | GgmlType::F32 => &[96, 256, 512, 333],
        _ => &[96, 256, 512, 2048],
    }
}

#[test]
fn matmul_matches_cpu_for_every_type() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(7);
    let mut report = Vec::new();
    for ty in TYPES {
        assert!(matmul::supports(ty));
        let (mut worst_abs, mut worst_rel) = (0f32, 0f32);
        for &cols in col_shapes(ty) {
            let rows = 67;
            let data = random_weight(ty, rows, cols, &mut rng);
            let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
            for n_tok in [1, 5, 33] {
                let x = random_acts(n_tok, cols, &mut rng);
                let want = cpu_matmul(ty, rows, cols, &data, &x, n_tok);
                let got = gpu_matmul(&gpu, &w, &x, n_tok);
                let (abs, rel) = errors(&got, &want, rows);
                assert!(
                    rel <= tolerance(ty),
                    "{ty} {rows}x{cols} n_tok {n_tok}: max |gpu - cpu| {abs:e}, {rel:e} of the row's magnitude"
                );
                worst_abs = worst_abs.max(abs);
                worst_rel = worst_rel.max(rel);
            }
        }
        report.push(format!(
            "matmul {ty:>5}: max abs {worst_abs:.3e}, max rel {worst_rel:.3e}"
        ));
    }
    for line in report {
        eprintln!("{line}");
    }
}

/// Compares a GPU row lookup with the CPU's dequantization, bit for bit;
/// ids outside the weight must give zeros.
fn check_rows(ty: GgmlType, w: &DeviceWeight, data: &[u8], ids: &[i32], got: &[f32]) {
    let row = minfer_kernels::matmul::row_bytes(ty, w.cols).unwrap();
    let mut want = vec![0f32; w.cols];
    for (i, &id) in ids.iter().enumerate() {
        let g = &got[i * w.cols..(i + 1) * w.cols];
        if id < 0 || id as usize >= w.rows {
            assert!(
                g.iter().all(|v| v.to_bits() == 0),
                "{ty}: id {id} out of range must give zeros"
            );
            continue;
        }
        let r = id as usize;
        dequant::dequantize_row(ty, &data[r * row..(r + 1) * row], &mut want).unwrap();
        for (j, (a, b)) in g.iter().zip(&want).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{ty}: row {id} value {j}: gpu {a:e}, cpu {b:e}"
            );
        }
    }
}

#[test]
fn get_rows_is_bit_exact_for_every_type() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(11);
    for ty in TYPES {
        for &cols in col_shapes(ty) {
            let rows = 67;
            let data = random_weight(ty, rows, cols, &mut rng);
            let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
            let ids = [0, 66, 5, 5, -1, 67, 1000, 33, i32::MIN, 12];
            let got = gpu_get_rows(&gpu, &w, &ids);
            check_rows(ty, &w, &data, &ids, &got);
        }
        eprintln!("get_rows {ty:>5}: bit-exact");
    }
}

/// Subnormal and extreme f16 scales: the conversions are integer code, so
/// they must still match the CPU bit for bit.
#[test]
fn get_rows_is_exact_for_extreme_scales() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(13);
    for ty in TYPES {
        let cols = 256;
        let rows = 8;
        let mut data = random_weight(ty, rows, cols, &mut rng);
        let scales: [u16; 4] = [0x0001, 0x03FF, 0x7BFF, 0x8400];
        match ty {
            GgmlType::F16 => {
                for (i, v) in data.chunks_exact_mut(2).enumerate() {
                    v.copy_from_slice(&scales[i % 4].to_le_bytes());
                }
            }
            GgmlType::F32 => {}
            _ => {
                let size = ty.type_size() as usize;
                let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
                for (i, b) in data.chunks_exact_mut(size).enumerate() {
                    b[at..at + 2].copy_from_slice(&scales[i % 4].to_le_bytes());
                }
            }
        }
        let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
        let ids: Vec<i32> = (0..rows as i32).collect();
        let got = gpu_get_rows(&gpu, &w, &ids);
        check_rows(ty, &w, &data, &ids, &got);
    }
}

#[test]
fn a_rows_result_does_not_depend_on_its_batch() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(17);
    for ty in TYPES {
        let (rows, cols) = (67, 512);
        let data = random_weight(ty, rows, cols, &mut rng);
        let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
        let x = random_acts(33, cols, &mut rng);
        let all = gpu_matmul(&gpu, &w, &x, 33);
        let five = gpu_matmul(&gpu, &w, &x[..5 * cols], 5);
        for t in [0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32] {
            let one = gpu_matmul(&gpu, &w, &x[t * cols..(t + 1) * cols], 1);
            let row = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                row(&one),
                row(&all[t * rows..(t + 1) * rows]),
                "{ty}: token {t} alone vs in 33"
            );
            if t < 5 {
                assert_eq!(
                    row(&one),
                    row(&five[t * rows..(t + 1) * rows]),
                    "{ty}: token {t} alone vs in 5"
                );
            }
        }
    }
}

#[test]
fn chunked_weights_give_the_same_results() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(19);
    for ty in TYPES {
        let (rows, cols) = (67, 512);
        let data = random_weight(ty, rows, cols, &mut rng);
        let row = minfer_kernels::matmul::row_bytes(ty, cols).unwrap() as u64;
        let whole = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
        assert_eq!(whole.chunks.len(), 1);
        // Room for 23 rows and the 32 bytes of padding (buffers are whole
        // multiples of 16 bytes): chunks of 23, 23 and 21 rows.
        let limit = (32 + 23 * row).next_multiple_of(16) + 8;
        let split = matmul::upload_weight_chunked(&gpu, "w", ty, rows, cols, &data, limit).unwrap();
        for c in &split.chunks {
            assert!(c.buffer.size() <= limit, "{ty}: a chunk past the limit");
        }
        let sizes: Vec<(usize, usize)> =
            split.chunks.iter().map(|c| (c.first_row, c.rows)).collect();
        assert_eq!(sizes, [(0, 23), (23, 23), (46, 21)], "{ty}");
        let x = random_acts(9, cols, &mut rng);
        let a = gpu_matmul(&gpu, &whole, &x, 9);
        let b = gpu_matmul(&gpu, &split, &x, 9);
        assert!(
            a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
            "{ty}: split product differs"
        );
        let ids = [0, 22, 23, 45, 46, 66, 67, -3, 30];
        let got = gpu_get_rows(&gpu, &split, &ids);
        check_rows(ty, &split, &data, &ids, &got);
    }
}

#[test]
fn rejects_what_it_cannot_run() {
    let gpu = gpu();
    assert!(!matmul::supports(GgmlType::Q2_K));
    assert!(matmul::upload_weight(&gpu, "w", GgmlType::Q2_K, 1, 256, &[0; 84]).is_err());
    // Not a whole number of blocks.
    assert!(matmul::upload_weight(&gpu, "w", GgmlType::Q4_K, 1, 96, &[0; 144]).is_err());
    // Data too short.
    assert!(matmul::upload_weight(&gpu, "w", GgmlType::Q8_0, 2, 32, &[0; 34]).is_err());
    // A row larger than a chunk.
    assert!(
        matmul::upload_weight_chunked(&gpu, "w", GgmlType::Q8_0, 2, 64, &[0; 136], 40).is_err()
    );
    assert_eq!(matmul::matmul_scratch_bytes(GgmlType::F16, 512, 4), 0);
    assert!(matmul::matmul_scratch_bytes(GgmlType::Q4_K, 512, 4) > 0);
}

/// A real tensor against the CPU: `rows` of its rows (all when `None`)
/// times `n_tok` random activation rows; returns the errors.
fn real_matmul(
    gpu: &Gpu,
    file: &minfer_gguf::GgufFile,
    name: &str,
    rows: Option<usize>,
    n_tok: usize,
) -> (GgmlType, usize, f32, f32) {
    let t = file.tensor(name).unwrap_or_else(|| panic!("tensor {name}"));
    let ty = t.info.ggml_type;
    let cols = t.info.shape[0] as usize;
    let all_rows = t.info.shape[1] as usize;
    let rows = rows.unwrap_or(all_rows).min(all_rows);
    let row = minfer_kernels::matmul::row_bytes(ty, cols).unwrap();
    let data = &file.tensor_data(t)[..rows * row];
    let mut rng = StdRng::seed_from_u64(23);
    let x = random_acts(n_tok, cols, &mut rng);
    let w = matmul::upload_weight(gpu, name, ty, rows, cols, data).unwrap();
    let want = cpu_matmul(ty, rows, cols, data, &x, n_tok);
    let got = gpu_matmul(gpu, &w, &x, n_tok);
    let (abs, rel) = errors(&got, &want, rows);
    eprintln!(
        "real {name} ({ty}, {rows}x{cols}, {} chunk(s), n_tok {n_tok}): max abs {abs:.3e}, max rel {rel:.3e}",
        w.chunks.len()
    );
    assert!(
        rel <= tolerance(ty),
        "{name}: {rel:e} of the row's magnitude"
    );
    (ty, w.chunks.len(), abs, rel)
}

/// Random rows of a real tensor through get_rows, bit-exact.
fn real_get_rows(gpu: &Gpu, file: &minfer_gguf::GgufFile, name: &str) -> usize {
    let t = file.tensor(name).unwrap_or_else(|| panic!("tensor {name}"));
    let ty = t.info.ggml_type;
    let cols = t.info.shape[0] as usize;
    let rows = t.info.shape[1] as usize;
    let data = file.tensor_data(t);
    let w = matmul::upload_weight(gpu, name, ty, rows, cols, data).unwrap();
    let mut rng = StdRng::seed_from_u64(29);
    let mut ids: Vec<i32> = (0..30).map(|_| rng.gen_range(0..rows as i32)).collect();
    ids.extend([0, rows as i32 - 1, rows as i32]);
    // Rows on both sides of each chunk boundary.
    for c in &w.chunks[1..] {
        ids.extend([c.first_row as i32 - 1, c.first_row as i32]);
    }
    let got = gpu_get_rows(gpu, &w, &ids);
    check_rows(ty, &w, data, &ids, &got);
    eprintln!(
        "real get_rows {name} ({ty}, {rows}x{cols}, {} chunk(s)): bit-exact",
        w.chunks.len()
    );
    w.chunks.len()
}

#[test]
fn real_qwen_tensors_match_cpu() {
    let Some(path) = minfer_testutil::require_model(minfer_testutil::QWEN) else {
        return;
    };
    let file = minfer_gguf::GgufFile::open(&path).unwrap();
    let gpu = gpu();
    let mut seen = Vec::new();
    for (name, rows, n_tok) in [
        ("blk.0.attn_q.weight", None, 5),
        ("blk.0.attn_v.weight", None, 5),
        ("blk.0.ffn_down.weight", None, 5),
        ("blk.11.ffn_down.weight", None, 5),
        ("blk.0.ffn_up.weight", Some(1000), 3),
        // 145 MB of Q8_0: two chunks on a device with 128 MiB bindings.
        ("output.weight", None, 2),
    ] {
        seen.push(real_matmul(&gpu, &file, name, rows, n_tok).0);
    }
    for ty in [
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        assert!(seen.contains(&ty), "the Qwen tensors cover {ty}");
    }
    real_get_rows(&gpu, &file, "token_embd.weight");
}

#[test]
fn real_gemma_embedding_splits_and_matches_cpu() {
    let Some(path) = minfer_testutil::require_model(minfer_testutil::GEMMA3) else {
        return;
    };
    let file = minfer_gguf::GgufFile::open(&path).unwrap();
    let gpu = gpu();
    // 262144 x 640 Q8_0, 178 MB: more than one binding on most devices.
    let chunks = real_get_rows(&gpu, &file, "token_embd.weight");
    if gpu.max_binding() < 178_257_920 {
        assert!(chunks > 1);
    }
    real_matmul(&gpu, &file, "blk.0.attn_output.weight", None, 4);
    real_matmul(&gpu, &file, "blk.0.ffn_down.weight", None, 4);
}

#[test]
fn real_smollm_q4_1_matches_cpu() {
    let Some(path) = minfer_testutil::require_model(minfer_testutil::SMOLLM) else {
        return;
    };
    let file = minfer_gguf::GgufFile::open(&path).unwrap();
    let gpu = gpu();
    let (ty, ..) = real_matmul(&gpu, &file, "blk.0.ffn_down.weight", None, 5);
    assert_eq!(ty, GgmlType::Q4_1);
    real_get_rows(&gpu, &file, "token_embd.weight");
}

/// K-quants at the extremes of their integer sums: an activation row of
/// one repeated negative value (every quant at full scale), a block of
/// ones, and weight blocks with every quant, scale and min at its largest
/// (Q6_K: scales of -128).
#[test]
fn kquant_extremes_match_cpu() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(31);
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        let (rows, cols) = (9, 2 * QK_K);
        let mut data = random_weight(ty, rows, cols, &mut rng);
        let size = ty.type_size() as usize;
        for b in data.chunks_exact_mut(size).take(2) {
            match ty {
                GgmlType::Q6_K => {
                    b[..192].fill(0xFF);
                    b[192..208].fill(0x80);
                }
                GgmlType::Q4_K => b[4..144].fill(0xFF),
                _ => b[4..176].fill(0xFF),
            }
        }
        let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
        let mut x = random_acts(3, cols, &mut rng);
        x[..cols].fill(-2.5);
        x[2 * cols..2 * cols + 256].fill(1.0);
        let want = cpu_matmul(ty, rows, cols, &data, &x, 3);
        let got = gpu_matmul(&gpu, &w, &x, 3);
        let (abs, rel) = errors(&got, &want, rows);
        assert!(rel <= tolerance(ty), "{ty}: {abs:e} / {rel:e}");
    }
}

/// Activation rows for the quantizer test: blocks of very different
/// magnitudes (2^-40 to 2^40), and blocks whose scaled values fall exactly
/// half way between integers, where the rounding rule shows.
fn quantizer_inputs(n_tok: usize, cols: usize, rng: &mut StdRng) -> Vec<f32> {
    let mut x = vec![0f32; n_tok * cols];
    for (i, block) in x.chunks_exact_mut(32).enumerate() {
        match i % 5 {
            0 => {
                // amax 127 makes the multiplier 1: x.5 values are ties.
                for v in block.iter_mut() {
                    *v = rng.gen_range(-127i32..127) as f32 + 0.5;
                }
                block[7] = 127.0;
            }
            1 => block.fill(0.0),
            _ => {
                let scale = 2f32.powi(rng.gen_range(-40..40));
                for v in block.iter_mut() {
                    *v = rng.gen_range(-1.0f32..1.0) * scale;
                }
            }
        }
    }
    x
}

/// Runs only the quantize step of a product over a `ty` weight and
/// returns the scratch words.
fn gpu_quantize(gpu: &Gpu, ty: GgmlType, x: &[f32], n_tok: usize, cols: usize) -> Vec<u32> {
    let data = vec![0u8; minfer_kernels::matmul::row_bytes(ty, cols).unwrap()];
    let w = matmul::upload_weight(gpu, "w", ty, 1, cols, &data).unwrap();
    let xb = gpu.upload("x", bytemuck::cast_slice(x)).unwrap();
    let out = gpu.storage("out", (n_tok * 4) as u64).unwrap();
    let bytes = matmul::matmul_scratch_bytes(ty, cols, n_tok);
    let scratch = gpu.storage("scratch", bytes).unwrap();
    let d = matmul::matmul(
        gpu,
        &w,
        &BufRange::whole(&xb),
        n_tok,
        &BufRange::whole(&out),
        &BufRange::whole(&scratch),
    )
    .unwrap();
    gpu.run(&d[..1]).unwrap();
    bytemuck::pod_collect_to_vec(&gpu.read(&scratch, 0, bytes as usize).unwrap())
}

/// The activation quantizers give the CPU's blocks exactly: the same int8
/// quants, the same f16 scales (and Q8_1 sums), Q8_K's f32 scale to the
/// bit. This is what makes the integer sums of the products exact copies
/// of the CPU's. The scratch layout read here is the shaders' (see
/// quant_q8.wgsl and quant_q8k.wgsl).
#[test]
fn activation_quantizers_match_cpu_bit_for_bit() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(37);
    let (n_tok, cols) = (40, 2048);
    let x = quantizer_inputs(n_tok, cols, &mut rng);
    let nb = n_tok * cols / 32;
    // Q8_0 and Q8_1 come from one kernel (the one Q8_0 and Q4_1 take).
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        let words = gpu_quantize(&gpu, ty, &x, n_tok, cols);
        let mut q8_1 = vec![
            BlockQ8_1 {
                d: [0; 2],
                s: [0; 2],
                qs: [0; 32]
            };
            nb
        ];
        quant::quantize_row_q8_1(&x, &mut q8_1);
        let mut q8_0 = vec![
            BlockQ8_0 {
                d: [0; 2],
                qs: [0; 32]
            };
            nb
        ];
        quant::quantize_row_q8_0(&x, &mut q8_0);
        for (g, (b1, b0)) in q8_1.iter().zip(&q8_0).enumerate() {
            let w = &words[g * 10..g * 10 + 10];
            let qs: Vec<u8> = bytemuck::cast_slice::<u32, u8>(&w[..8]).to_vec();
            assert_eq!(
                qs,
                bytemuck::cast_slice::<i8, u8>(&b0.qs),
                "block {g}: Q8_0 quants"
            );
            assert_eq!(b0.qs, b1.qs);
            assert_eq!(w[8], f16_to_f32(b0.d).to_bits(), "block {g}: d");
            assert_eq!(w[9], f16_to_f32(b1.s).to_bits(), "block {g}: s");
        }
    }
    let words = gpu_quantize(&gpu, GgmlType::Q4_K, &x, n_tok, cols);
    let mut q8k: Vec<BlockQ8K> = vec![bytemuck::Zeroable::zeroed(); n_tok * cols / QK_K];
    quant::quantize_row_q8_k(&x, &mut q8k);
    for (g, b) in q8k.iter().enumerate() {
        let w = &words[g * 73..g * 73 + 73];
        let qs: Vec<u8> = bytemuck::cast_slice::<u32, u8>(&w[..64]).to_vec();
        assert_eq!(
            qs,
            bytemuck::cast_slice::<i8, u8>(&b.qs),
            "super-block {g}: quants"
        );
        assert_eq!(
            w[64],
            b.d.to_bits(),
            "super-block {g}: d {} vs {}",
            f32::from_bits(w[64]),
            b.d
        );
        for s in 0..8 {
            let want = b.bsums[2 * s] as i32 + b.bsums[2 * s + 1] as i32;
            assert_eq!(w[65 + s] as i32, want, "super-block {g}: sum {s}");
        }
    }
}

/// Rows of 262,144 values, one and nine tokens: a software device
/// (lavapipe) stops the loops of an invocation after 65,535 iterations in
/// all, silently, so the kernels must stay within that on long rows.
#[test]
fn long_rows_match_cpu() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(41);
    let cols = 262_144;
    for ty in TYPES {
        let rows = 3;
        let data = random_weight(ty, rows, cols, &mut rng);
        let w = matmul::upload_weight(&gpu, "w", ty, rows, cols, &data).unwrap();
        for n_tok in [1, 9] {
            let x = random_acts(n_tok, cols, &mut rng);
            let want = cpu_matmul(ty, rows, cols, &data, &x, n_tok);
            let got = gpu_matmul(&gpu, &w, &x, n_tok);
            let (abs, rel) = errors(&got, &want, rows);
            assert!(
                rel <= tolerance(ty),
                "{ty} rows of {cols}, n_tok {n_tok}: max |gpu - cpu| {abs:e}, {rel:e} of the row's magnitude"
            );
        }
    }
}
