//! Small helpers shared by the CPU-kernel tests: random inputs, a
//! tolerance check against f64 references, RoPE parameters, a KV cache
//! filled batch by batch.

#![allow(dead_code)]

use minfer_cpu::kv_store;
use minfer_graph::kv::{BatchPlan, KvCells, KvRegion};
use minfer_graph::{KvFormat, RopeParams, RopeStyle};
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

/// A K and a V region of `n_ctx` cells with their cell table, and the plan
/// of the batch stored last, as the attention tests fill them.
pub struct TestCache {
    pub k: KvRegion,
    pub v: KvRegion,
    pub cells: KvCells,
    pub plan: BatchPlan,
}

impl TestCache {
    /// Empty regions of rows of `row` values in `format`.
    pub fn new(format: KvFormat, row: usize, n_ctx: usize) -> Self {
        Self {
            k: KvRegion::new(format, row, n_ctx).unwrap(),
            v: KvRegion::new(format, row, n_ctx).unwrap(),
            cells: KvCells::new(n_ctx),
            plan: BatchPlan::default(),
        }
    }

    /// Plans `batch` of `(sequence, position)` rows and stores its K and V
    /// rows (one a token, in batch order).
    pub fn store(&mut self, batch: &[(u32, i32)], k: &[f32], v: &[f32]) {
        self.cells.plan_batch(batch, &mut self.plan).unwrap();
        kv_store(&mut self.k, k, &self.plan.kv_cells).unwrap();
        kv_store(&mut self.v, v, &self.plan.kv_cells).unwrap();
    }

    /// As [`TestCache::store`], with each token's q, k and v rows from
    /// `rows(sequence, position)`; returns the batch's queries.
    pub fn store_rows(
        &mut self,
        batch: &[(u32, i32)],
        rows: impl Fn(u32, i32) -> (Vec<f32>, Vec<f32>, Vec<f32>),
    ) -> Vec<f32> {
        let (mut q, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new());
        for &(s, p) in batch {
            let (qr, kr, vr) = rows(s, p);
            q.extend(qr);
            ks.extend(kr);
            vs.extend(vr);
        }
        self.store(batch, &ks, &vs);
        q
    }
}
