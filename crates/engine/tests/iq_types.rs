//! Models whose weight matrices are of the grid types (IQ2_XXS, IQ2_XS,
//! IQ2_S, IQ3_XXS, IQ3_S, IQ1_S) or of the Q8_K-activation types the
//! engine repacks into its interleaved layout at load (IQ4_XS, Q3_K, Q2_K)
//! run through the engine and compute what their weights say.
//!
//! gguf-py cannot quantize these types, so `scripts/make-iq-fixture.py`
//! makes the files: the repository's random-weight qwen3, widened to rows of
//! 256, with every weight matrix replaced by random blocks of the type, and a
//! twin whose matrices hold gguf-py's dequantization of the same blocks as
//! F32. The two differ only in that the quantized matrices dot with
//! activations quantized to Q8_K, so:
//!
//! - their logits agree within bounds stated below, which Q6_K (a type with
//!   long-established kernels, its fixture made the same way) meets with
//!   the same margin: the grid types may be at most [`VS_Q6K`] times as far
//!   from their twins as Q6_K is from its own;
//! - fed the twin's greedy tokens, the quantized model picks the same token
//!   at every step where the twin's choice is clear (its top-2 gap at least
//!   [`GAP`]), which must be at least [`MIN_STEPS`] of [`STEPS`] steps;
//!   where the choice is a near tie, 8-bit activations may pick the other
//!   token, as llama.cpp's would;
//! - the quantized model's logits are the same bits at every SIMD level,
//!   since each grid-type kernel is bit-exact with its scalar reference;
//! - the bounds can fail: the logits of two different fixtures are far
//!   further apart than they allow.
//!
//! Needs the Python named by `MINFER_PYTHON` (default `python3`) with
//! `gguf==0.19.0`, as the kernels' dequantization tests do. Without it the
//! test fails, unless `MINFER_REQUIRE_MODELS=0` turns that into a recorded
//! skip.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use minfer_engine::{Engine, EngineConfig, SimdLevel};
use minfer_models::Model;

/// The control first, then the grid types, then the repacked types.
const TYPES: [&str; 10] = [
    "Q6_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ4_XS", "Q3_K", "Q2_K",
];

/// Mean |logit difference| over every row compared, relative to the twin's
/// logits' RMS. Quantizing the activations to 8 bits before each of the 28
/// matrix products costs this random model about 2-3 % (Q6_K included).
const MEAN_TOL: f32 = 0.05;

/// Largest |logit difference| of a row, relative to the twin's largest
/// |logit| in that row (measured: up to about 5 %).
const MAX_TOL: f32 = 0.08;

/// How much further than Q6_K from its twin a grid type may be, in mean
/// |logit difference| (measured: up to about 1.4).
const VS_Q6K: f32 = 2.0;

/// A top-2 gap (in logits) above which the twin's greedy choice must be the
/// quantized model's too: about ten times the mean logit difference (the
/// logits' RMS is about 8). Measured: choices flip at gaps up to about 0.6.
const GAP: f32 = 2.0;

/// Greedy steps compared, and how many of them must be clear.
const STEPS: usize = 16;
const MIN_STEPS: usize = 3;

fn python() -> Option<String> {
    let py = std::env::var("MINFER_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let ok = Command::new(&py)
        .args(["-c", "import gguf, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    minfer_testutil::skip(
        &format!("{py} with gguf-py"),
        "run `pip install gguf==0.19.0`, or name the Python with MINFER_PYTHON",
    );
    None
}

/// Writes the fixture pair of `ty` into `dir` and loads it: (quantized,
/// F32 twin).
fn fixtures(py: &str, ty: &str, dir: &Path) -> (Arc<Model>, Arc<Model>) {
    let script = minfer_testutil::workspace_root().join("scripts/make-iq-fixture.py");
    let (q, f) = (
        dir.join(format!("{ty}.gguf")),
        dir.join(format!("{ty}-f32.gguf")),
    );
    let out = Command::new(py)
        .arg(&script)
        .arg(ty)
        .arg(&q)
        .arg(&f)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run make-iq-fixture.py");
    assert!(
        out.status.success(),
        "make-iq-fixture.py {ty} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let load = |p: &Path| Arc::new(Model::open(p).expect("the fixture loads"));
    let models = (load(&q), load(&f));
    // Loaded models keep their own copy or mapping; the files can go.
    let _ = std::fs::remove_file(&q);
    let _ = std::fs::remove_file(&f);
    models
}

/// Logit rows: every prompt row, then one per decode step.
fn rows_of(
    model: &Arc<Model>,
    simd: Option<SimdLevel>,
    prompt: &[u32],
    feed: &[u32],
) -> Vec<Vec<f32>> {
    let cfg = EngineConfig {
        n_ctx: 64,
        n_threads: 2,
        simd,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(Arc::clone(model), cfg).expect("engine");
    let n_vocab = e.n_vocab();
    let prefill = e.eval(prompt, true).expect("prefill");
    let mut rows: Vec<Vec<f32>> = prefill.chunks_exact(n_vocab).map(<[f32]>::to_vec).collect();
    for &tok in feed {
        rows.push(e.eval(&[tok], false).expect("decode").to_vec());
    }
    rows
}

/// Greedy decoding of `STEPS` tokens: the tokens and the logit rows
/// (prompt rows, then one per step after the first).
fn greedy(model: &Arc<Model>, prompt: &[u32]) -> (Vec<u32>, Vec<Vec<f32>>) {
    let cfg = EngineConfig {
        n_ctx: 64,
        n_threads: 2,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(Arc::clone(model), cfg).expect("engine");
    let n_vocab = e.n_vocab();
    let prefill = e.eval(prompt, true).expect("prefill");
    let mut rows: Vec<Vec<f32>> = prefill.chunks_exact(n_vocab).map(<[f32]>::to_vec).collect();
    let mut tokens = vec![common::argmax(&rows[rows.len() - 1])];
    while tokens.len() < STEPS {
        let row = e
            .eval(&[tokens[tokens.len() - 1]], false)
            .expect("decode")
            .to_vec();
        tokens.push(common::argmax(&row));
        rows.push(row);
    }
    (tokens, rows)
}

/// The gap between the largest and the second-largest logit.
fn top2_gap(v: &[f32]) -> f32 {
    let best = common::argmax(v) as usize;
    let second = v
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != best)
        .fold(f32::NEG_INFINITY, |m, (_, &x)| m.max(x));
    v[best] - second
}

/// (mean |a - b| / RMS of b, largest over rows of max |a - b| / max |b|).
fn distance(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
    assert_eq!(a.len(), b.len());
    let (mut sum, mut sq, mut n, mut worst) = (0f64, 0f64, 0usize, 0f32);
    for (a, b) in a.iter().zip(b) {
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        worst = worst.max(diff / scale);
        sum += a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() as f64)
            .sum::<f64>();
        sq += b.iter().map(|&y| y as f64 * y as f64).sum::<f64>();
        n += b.len();
    }
    ((sum / n as f64 / (sq / n as f64).sqrt()) as f32, worst)
}

#[test]
fn grid_type_models_match_their_dequantized_twins() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // The levels below the best one, at which the rest runs.
    let lower: Vec<SimdLevel> = SimdLevel::supported()
        .into_iter()
        .filter(|&l| l != SimdLevel::detect())
        .collect();
    // Arbitrary ids below the vocabulary's size (49152).
    let prompt: Vec<u32> = (0..12u32).map(|i| (i * 7919 + 101) % 49_152).collect();
    let mut control = None;
    let mut previous: Option<(&str, Vec<Vec<f32>>)> = None;
    for ty in TYPES {
        let (quant, twin) = fixtures(&py, ty, dir.path());
        // The twin decodes greedily; the quantized model is fed the same
        // tokens, so each of its rows answers the same context.
        let (tokens, want) = greedy(&twin, &prompt);
        let got = rows_of(&quant, None, &prompt, &tokens[..STEPS - 1]);
        let (mean, max) = distance(&got, &want);
        let steps = &want[prompt.len() - 1..];
        let clear: Vec<usize> = (0..STEPS).filter(|&i| top2_gap(&steps[i]) >= GAP).collect();
        let picked: Vec<u32> = got[prompt.len() - 1..]
            .iter()
            .map(|r| common::argmax(r))
            .collect();
        eprintln!(
            "{ty:8} mean |diff| {mean:.2e} of the logit RMS, largest {max:.2e} of a row's largest; \
             twin's greedy tokens {tokens:?}, quantized {picked:?}, clear steps {clear:?} \
             (gaps {:?})",
            steps.iter().map(|r| (top2_gap(r) * 100.0).round() / 100.0).collect::<Vec<_>>()
        );
        assert!(
            mean <= MEAN_TOL && max <= MAX_TOL,
            "{ty}: logits differ from the F32 twin's by {mean:e} (mean, of the RMS) and {max:e} \
             (largest, of a row's largest); bounds {MEAN_TOL}, {MAX_TOL}"
        );
        match control {
            None => control = Some(mean),
            Some(q6k) => assert!(
                mean <= VS_Q6K * q6k,
                "{ty} is {mean:e} from its twin, Q6_K only {q6k:e}"
            ),
        }
        assert!(
            clear.len() >= MIN_STEPS,
            "{ty}: the twin's greedy choice is clear at only {} steps; the fixture cannot show \
             that decoding agrees",
            clear.len()
        );
        for &i in &clear {
            assert_eq!(
                picked[i], tokens[i],
                "{ty}: step {i} picks another token than the F32 twin's clear choice"
            );
        }

        // Every lower level computes the quantized model's very bits.
        for &level in &lower {
            let other = rows_of(&quant, Some(level), &prompt, &tokens[..STEPS - 1]);
            let same = other
                .iter()
                .flatten()
                .zip(got.iter().flatten())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{ty}: logits at {level} differ from the best level's");
        }

        // The bounds mean something: another model's logits are far off.
        if let Some((other, rows)) = &previous {
            let (apart, _) = distance(&got[..prompt.len()], &rows[..prompt.len()]);
            assert!(
                apart > 10.0 * MEAN_TOL,
                "{ty} and {other} fixtures are only {apart:e} apart: the bounds cannot tell \
                 models apart"
            );
        }
        previous = Some((ty, want));
    }
}
