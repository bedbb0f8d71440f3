//! Small helpers shared by the CPU-kernel tests: random inputs, a
//! tolerance check against f64 references, RoPE parameters.

#![allow(dead_code)]

use minfer_graph::{RopeParams, RopeStyle};
use rand::rngs::StdRng;
use rand::Rng;

/// `n` values drawn uniformly from [-2, 2).
pub fn randn(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()
}

/// Every `got[i]` is within `tol * (1 + |want[i]|)` of `want[i]`.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w} (tol {tol})"
        );
    }
}

/// RoPE parameters with llama's base frequency and no scaling.
pub fn rope_params(style: RopeStyle, n_head: usize, head_dim: usize, n_rot: usize) -> RopeParams {
    RopeParams {
        style,
        n_head,
        head_dim,
        n_rot,
        freq_base: 10000.0,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn: None,
    }
}
