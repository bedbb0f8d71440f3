//! Bit-exact comparison of our dequantization with gguf-py's
//! (`gguf.quants.dequantize`), which follows llama.cpp's float32 arithmetic.
//!
//! Needs `python3` with `gguf==0.19.0` (`pip install gguf==0.19.0`). Without
//! it the tests fail, unless `MINFER_REQUIRE_MODELS=0` turns the missing
//! reference into a recorded skip (see `minfer_testutil::skip`). `MINFER_PYTHON`
//! names another interpreter.

mod common;

use std::collections::BTreeMap;
use std::mem::offset_of;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::QUANTIZABLE;
use minfer_gguf::GgufFile;
use minfer_kernels::blocks::{e8m0_to_f32_half, BlockMXFP4};
use minfer_kernels::blocks::{
    BlockIQ1S, BlockIQ2S, BlockIQ2XS, BlockIQ2XXS, BlockIQ3S, BlockIQ3XXS, BlockIQ4NL, BlockIQ4XS,
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, QK_K,
};
use minfer_kernels::dequant::{dequantize_row, is_supported};
use minfer_kernels::GgmlType;
use minfer_testutil::{require_model, skip, QWEN, SMOLLM};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One row (or run of blocks) to dequantize on both sides.
struct Case {
    label: String,
    ty: GgmlType,
    bytes: Vec<u8>,
    n: usize,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gguf_dequant_ref.py")
}

fn python_cmd() -> String {
    std::env::var("MINFER_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The interpreter to use, or `None` (after a loud message) when gguf-py is
/// unavailable and not required.
fn python_with_gguf() -> Option<String> {
    let py = python_cmd();
    let out = Command::new(&py).arg(script()).arg("--check").output();
    let why = match out {
        Ok(o) if o.status.success() => {
            eprintln!(
                "using gguf-py {} via {py}",
                String::from_utf8_lossy(&o.stdout).trim()
            );
            return Some(py);
        }
        Ok(o) => format!(
            "{py} {} --check: {}: {}",
            script().display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("cannot run {py}: {e}"),
    };
    skip(
        &format!("gguf-py ({why})"),
        "run `pip install gguf==0.19.0`",
    );
    None
}

/// Runs the reference script once over all jobs (a type argument, as the
/// script takes it, and the input bytes) and returns the output bytes.
fn run_script(py: &str, tag: &str, jobs: &[(String, &[u8])]) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("dequant_reference")
        .join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(py);
    cmd.arg(script());
    let mut outs = Vec::new();
    for (i, (ty, bytes)) in jobs.iter().enumerate() {
        let src = dir.join(format!("{i}.in"));
        let dst = dir.join(format!("{i}.out"));
        std::fs::write(&src, bytes).unwrap();
        cmd.arg(ty).arg(&src).arg(&dst);
        outs.push(dst);
    }
    let o = cmd.output().expect("run the gguf-py reference script");
    assert!(
        o.status.success(),
        "gguf_dequant_ref.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let res = outs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let _ = std::fs::remove_dir_all(&dir);
    res
}

/// gguf-py's dequantization of every case.
fn reference(py: &str, tag: &str, cases: &[Case]) -> Vec<Vec<f32>> {
    let jobs: Vec<(String, &[u8])> = cases
        .iter()
        .map(|c| (c.ty.name().to_string(), &c.bytes[..]))
        .collect();
    run_script(py, tag, &jobs)
        .into_iter()
        .map(|raw| {
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect()
}

/// Dequantizes every case ourselves and compares bit for bit. Returns the
/// failures (first mismatch per case) and prints a per-type summary.
fn compare_all(cases: &[Case], theirs: &[Vec<f32>]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut per_type: BTreeMap<u32, (GgmlType, usize, usize)> = BTreeMap::new();
    for (c, want) in cases.iter().zip(theirs) {
        let mut ours = vec![f32::NAN; c.n];
        if let Err(e) = dequantize_row(c.ty, &c.bytes, &mut ours) {
            failures.push(format!("{}: our dequantize_row failed: {e}", c.label));
            continue;
        }
        if want.len() != c.n {
            failures.push(format!(
                "{}: gguf-py returned {} values, expected {}",
                c.label,
                want.len(),
                c.n
            ));
            continue;
        }
        let bad: Vec<usize> = (0..c.n)
            .filter(|&i| ours[i].to_bits() != want[i].to_bits())
            .collect();
        if let Some(&i) = bad.first() {
            failures.push(format!(
                "{}: {} of {} values differ; first at index {i}: ours {:e} ({:#010x}), \
                 gguf-py {:e} ({:#010x})",
                c.label,
                bad.len(),
                c.n,
                ours[i],
                ours[i].to_bits(),
                want[i],
                want[i].to_bits()
            ));
        }
        let e = per_type.entry(c.ty.id()).or_insert((c.ty, 0, 0));
        e.1 += 1;
        e.2 += c.n;
    }
    for (ty, rows, values) in per_type.values() {
        eprintln!(
            "  {:<7} {rows:>4} rows, {values:>8} values compared",
            ty.name()
        );
    }
    failures
}

fn assert_no_failures(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} mismatching rows:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Rows of the real models: for every tensor type present, the first and
/// last tensors of that type plus two picked at random, and of each the
/// first and last rows plus four random ones.
#[test]
fn real_model_rows_match_gguf_py() {
    let Some(py) = python_with_gguf() else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x6767_7566);
    let mut cases = Vec::new();
    let mut total_bytes = 0usize;
    for model in [QWEN, SMOLLM] {
        let Some(path) = require_model(model) else {
            continue;
        };
        let f = GgufFile::open(&path).unwrap();
        let mut by_type: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, t) in f.tensors().iter().enumerate() {
            by_type.entry(t.info.ggml_type.id()).or_default().push(i);
        }
        for idx in by_type.values() {
            let mut pick = vec![idx[0], idx[idx.len() - 1]];
            for _ in 0..2 {
                pick.push(idx[rng.gen_range(0..idx.len())]);
            }
            pick.sort_unstable();
            pick.dedup();
            for ti in pick {
                let t = &f.tensors()[ti];
                let ty = t.info.ggml_type;
                assert!(
                    is_supported(ty),
                    "{model}: tensor {} has type {ty}, which we cannot dequantize",
                    t.info.name
                );
                let row_len = t.info.shape[0] as usize;
                let n_rows = t.info.n_elements() as usize / row_len;
                let row_bytes = ty.bytes_for(row_len as u64).unwrap() as usize;
                let data = f.tensor_data(t);
                let mut rows = vec![0, n_rows - 1];
                for _ in 0..4 {
                    rows.push(rng.gen_range(0..n_rows));
                }
                rows.sort_unstable();
                rows.dedup();
                for r in rows {
                    let bytes = data[r * row_bytes..(r + 1) * row_bytes].to_vec();
                    total_bytes += bytes.len();
                    cases.push(Case {
                        label: format!("{model} {} ({ty}) row {r}", t.info.name),
                        ty,
                        bytes,
                        n: row_len,
                    });
                }
            }
        }
    }
    if cases.is_empty() {
        return; // Both models skipped, loudly, by require_model.
    }
    eprintln!(
        "comparing {} rows ({total_bytes} bytes) with gguf-py",
        cases.len()
    );
    let theirs = reference(&py, "models", &cases);
    assert_no_failures(compare_all(&cases, &theirs));
}

/// Random finite f16 bits: anything but exponent 31 (inf/NaN). Subnormals
/// and zeros are included on purpose.
fn random_finite_f16(rng: &mut StdRng) -> [u8; 2] {
    loop {
        let b: u16 = rng.gen();
        if (b >> 10) & 0x1F != 0x1F {
            return b.to_le_bytes();
        }
    }
}

/// Where the f16 scale fields sit inside one block of `ty`.
fn f16_field_offsets(ty: GgmlType) -> Vec<usize> {
    match ty {
        GgmlType::Q4_0 => vec![offset_of!(BlockQ4_0, d)],
        GgmlType::Q4_1 => vec![offset_of!(BlockQ4_1, d), offset_of!(BlockQ4_1, m)],
        GgmlType::Q5_0 => vec![offset_of!(BlockQ5_0, d)],
        GgmlType::Q5_1 => vec![offset_of!(BlockQ5_1, d), offset_of!(BlockQ5_1, m)],
        GgmlType::Q8_0 => vec![offset_of!(BlockQ8_0, d)],
        GgmlType::Q2_K => vec![offset_of!(BlockQ2K, d), offset_of!(BlockQ2K, dmin)],
        GgmlType::Q3_K => vec![offset_of!(BlockQ3K, d)],
        GgmlType::Q4_K => vec![offset_of!(BlockQ4K, d), offset_of!(BlockQ4K, dmin)],
        GgmlType::Q5_K => vec![offset_of!(BlockQ5K, d), offset_of!(BlockQ5K, dmin)],
        GgmlType::Q6_K => vec![offset_of!(BlockQ6K, d)],
        GgmlType::IQ4_NL => vec![offset_of!(BlockIQ4NL, d)],
        // The E8M0 scale is one byte, and every byte is a valid scale.
        GgmlType::MXFP4 => vec![],
        GgmlType::IQ4_XS => vec![offset_of!(BlockIQ4XS, d)],
        GgmlType::IQ2_XXS => vec![offset_of!(BlockIQ2XXS, d)],
        GgmlType::IQ2_XS => vec![offset_of!(BlockIQ2XS, d)],
        GgmlType::IQ2_S => vec![offset_of!(BlockIQ2S, d)],
        GgmlType::IQ3_XXS => vec![offset_of!(BlockIQ3XXS, d)],
        GgmlType::IQ3_S => vec![offset_of!(BlockIQ3S, d)],
        GgmlType::IQ1_S => vec![offset_of!(BlockIQ1S, d)],
        other => panic!("no scale layout for {other}"),
    }
}

/// Random bytes of `n` elements of `ty`, with every f16 value (scales, or
/// the elements themselves for F16/BF16/F32) made finite so that neither
/// side has to agree on NaN payloads.
fn random_row(rng: &mut StdRng, ty: GgmlType, n: usize) -> Vec<u8> {
    let size = ty.bytes_for(n as u64).unwrap() as usize;
    let mut bytes = vec![0u8; size];
    rng.fill(&mut bytes[..]);
    match ty {
        GgmlType::F32 => {
            for c in bytes.chunks_exact_mut(4) {
                let mut bits = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if (bits >> 23) & 0xFF == 0xFF {
                    bits &= !(1 << 30);
                }
                c.copy_from_slice(&bits.to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in bytes.chunks_exact_mut(2) {
                c.copy_from_slice(&random_finite_f16(rng));
            }
        }
        GgmlType::BF16 => {
            for c in bytes.chunks_exact_mut(2) {
                let mut bits = u16::from_le_bytes([c[0], c[1]]);
                if (bits >> 7) & 0xFF == 0xFF {
                    bits &= !(1 << 14);
                }
                c.copy_from_slice(&bits.to_le_bytes());
            }
        }
        _ => {
            let block = ty.type_size() as usize;
            let offsets = f16_field_offsets(ty);
            for b in bytes.chunks_exact_mut(block) {
                for &o in &offsets {
                    b[o..o + 2].copy_from_slice(&random_finite_f16(rng));
                }
            }
        }
    }
    bytes
}

/// Random blocks of every type we dequantize (gguf-py has no Q8_K decoder,
/// so Q8_K is checked against its one-line definition instead). For the
/// grid types (IQ2_XXS … IQ1_S) random bytes are valid blocks: every index
/// field addresses exactly its grid, every sign code its table.
#[test]
fn random_blocks_match_gguf_py() {
    let Some(py) = python_with_gguf() else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xB10C_5EED);
    let mut cases = Vec::new();
    let types: Vec<GgmlType> = GgmlType::ALL
        .iter()
        .copied()
        .filter(|&t| is_supported(t) && t != GgmlType::Q8_K)
        .collect();
    for &ty in &types {
        // Several rows per type: one long, a few short, so that both many
        // blocks per call and single blocks are exercised.
        let block = ty.block_size() as usize;
        for (k, blocks) in [256usize, 1, 3, 17].into_iter().enumerate() {
            let n = block.max(32) * blocks;
            let n = n - n % block;
            cases.push(Case {
                label: format!("random {ty} case {k} ({n} elements)"),
                ty,
                bytes: random_row(&mut rng, ty, n),
                n,
            });
        }
    }
    let theirs = reference(&py, "random", &cases);
    assert_no_failures(compare_all(&cases, &theirs));
    eprintln!("gguf-py has no Q8_K dequantizer; Q8_K is checked by q8_k_is_d_times_q");
}

/// Q8_K, which gguf-py cannot decode: `y = d * q` for random blocks.
#[test]
fn q8_k_is_d_times_q() {
    let mut rng = StdRng::seed_from_u64(8);
    let n_blocks = 8;
    let mut bytes = vec![0u8; n_blocks * std::mem::size_of::<BlockQ8K>()];
    rng.fill(&mut bytes[..]);
    for b in bytes.chunks_exact_mut(std::mem::size_of::<BlockQ8K>()) {
        let d: f32 = rng.gen_range(-2.0..2.0);
        b[..4].copy_from_slice(&d.to_le_bytes());
    }
    let mut ours = vec![0.0f32; n_blocks * QK_K];
    dequantize_row(GgmlType::Q8_K, &bytes, &mut ours).unwrap();
    for (bi, b) in bytes
        .chunks_exact(std::mem::size_of::<BlockQ8K>())
        .enumerate()
    {
        let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        for j in 0..QK_K {
            let want = d * (b[4 + j] as i8) as f32;
            assert_eq!(ours[bi * QK_K + j].to_bits(), want.to_bits());
        }
    }
}

/// Signals for the quantizer comparison: the test-quantize-fns cosine,
/// uniform noise at very different scales, and edge blocks (all zero,
/// constant, one spike of either sign).
fn quantizer_inputs(rng: &mut StdRng) -> Vec<Vec<f32>> {
    let mut v: Vec<Vec<f32>> = vec![(0..4096)
        .map(|i| (0.1f64 + (2.0f32 * (i as f32).cos()) as f64) as f32)
        .collect()];
    for scale in [1e-3f32, 1.0, 5e3] {
        v.push((0..4096).map(|_| rng.gen_range(-scale..scale)).collect());
    }
    let mut edge = vec![0.0f32; 256];
    edge[32..64].fill(0.75);
    edge[64 + 3] = -2.0;
    edge[96 + 9] = 2.0;
    edge[128..160].copy_from_slice(&(0..32).map(|i| i as f32 * 0.5 - 8.0).collect::<Vec<_>>());
    v.push(edge);
    v
}

/// Our reference quantizers produce the very bytes gguf-py's do (gguf-py
/// implements llama.cpp's `quantize_row_*_ref` for these types; for Q8_0
/// that is the portable reference, not the x86 activation quantizer).
#[test]
fn reference_quantizers_match_gguf_py() {
    let Some(py) = python_with_gguf() else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x0051_A27E);
    let inputs = quantizer_inputs(&mut rng);
    // Every quantizable type but F32, which is stored as it is.
    let types: Vec<GgmlType> = QUANTIZABLE
        .into_iter()
        .filter(|&ty| ty != GgmlType::F32)
        .collect();
    let mut ours = Vec::new();
    let mut labels = Vec::new();
    let mut src_bytes = Vec::new();
    for &ty in &types {
        for (k, x) in inputs.iter().enumerate() {
            let mut q = vec![0u8; ty.bytes_for(x.len() as u64).unwrap() as usize];
            if ty == GgmlType::Q8_0 {
                let blocks: &mut [BlockQ8_0] = bytemuck::cast_slice_mut(&mut q);
                minfer_kernels::quant::quantize_row_q8_0_ref(x, blocks);
            } else {
                minfer_kernels::quant::quantize_row(ty, x, &mut q).unwrap();
            }
            ours.push(q);
            labels.push((ty, k));
            src_bytes.push(x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
        }
    }
    let jobs: Vec<(String, &[u8])> = labels
        .iter()
        .zip(&src_bytes)
        .map(|((ty, _), b)| (format!("q:{}", ty.name()), &b[..]))
        .collect();
    let theirs = run_script(&py, "quantize", &jobs);
    let mut failures = Vec::new();
    for (((ty, k), a), b) in labels.iter().zip(&ours).zip(&theirs) {
        if a != b {
            let bs = ty.type_size() as usize;
            let first = a
                .chunks(bs)
                .zip(b.chunks(bs))
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            failures.push(format!(
                "{ty} input {k}: {} vs {} bytes, first differing block {first}: ours {:?} gguf-py {:?}",
                a.len(),
                b.len(),
                a.chunks(bs).nth(first),
                b.chunks(bs).nth(first)
            ));
        }
    }
    eprintln!(
        "compared {} quantized rows with gguf-py ({} types)",
        labels.len(),
        types.len()
    );
    assert_no_failures(failures);
}

/// `src/iq_grids.rs` is exactly what `scripts/gen_iq_grids.py` makes from
/// gguf-py's tables today, so the grids the kernels use are the
/// reference's (the dequantization comparison above then checks how they
/// are indexed).
#[test]
fn iq_grid_tables_are_generated_from_gguf_py() {
    let Some(py) = python_with_gguf() else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&py)
        .arg(dir.join("scripts/gen_iq_grids.py"))
        .arg("--stdout")
        .output()
        .expect("run gen_iq_grids.py");
    assert!(
        out.status.success(),
        "gen_iq_grids.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read_to_string(dir.join("src/iq_grids.rs")).unwrap();
    let generated = String::from_utf8(out.stdout).unwrap();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or(
                committed.lines().count().min(generated.lines().count()),
                |i| i,
            );
        panic!(
            "src/iq_grids.rs differs from the generator's output from line {}; \
             rerun `python3 crates/kernels/scripts/gen_iq_grids.py`",
            line + 1
        );
    }
}

/// The e2m1 values of the sixteen MXFP4 codes (OCP MX spec), not doubled.
/// Code 8 is "-0", which ggml's integer table (and so its output) makes +0.
const E2M1: [f64; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// `e8m0_to_f32_half(e)` is `2^(e - 128)` for every byte, the subnormal
/// `e` 0 and 1 included.
#[test]
fn e8m0_half_is_a_power_of_two() {
    for e in 0..=255u8 {
        let want = f64::powi(2.0, e as i32 - 128) as f32;
        assert_eq!(e8m0_to_f32_half(e).to_bits(), want.to_bits(), "e = {e}");
    }
}

/// Hand-made MXFP4 blocks decode to `2^(e - 127) * e2m1[code]`: every code
/// in both nibbles, at the extreme and middle scales (255 overflows to
/// infinity for the codes ±6, as in ggml's f32 product).
#[test]
fn mxfp4_blocks_follow_the_formula() {
    for e in [0u8, 1, 2, 126, 127, 128, 129, 200, 254, 255] {
        // Byte j holds code j in its low nibble and 15 - j in its high one.
        let block = BlockMXFP4 {
            e,
            qs: std::array::from_fn(|j| j as u8 | ((15 - j as u8) << 4)),
        };
        let mut got = [0f32; 32];
        dequantize_row(GgmlType::MXFP4, bytemuck::bytes_of(&block), &mut got).unwrap();
        let scale = f64::powi(2.0, e as i32 - 127);
        for j in 0..16 {
            for (k, code) in [(j, j), (j + 16, 15 - j)] {
                let want = (scale * E2M1[code]) as f32;
                assert_eq!(
                    got[k].to_bits(),
                    want.to_bits(),
                    "e = {e}, element {k} (code {code}): {} vs {want}",
                    got[k]
                );
            }
        }
    }
    // A short destination or a partial block is an error, not a panic.
    let bytes = [0u8; 17];
    assert!(dequantize_row(GgmlType::MXFP4, &bytes, &mut [0f32; 16]).is_err());
    assert!(dequantize_row(GgmlType::MXFP4, &bytes[..16], &mut [0f32; 32]).is_err());
}
