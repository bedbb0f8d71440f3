//! The measurement behind [`super::tuning`]: each choice for a lone
//! token's products timed on the machine, over the model's own matrices.

use std::time::Instant;

use super::tuning::{OneRow, TileTuning};
use super::Tiles;
use crate::operand::{ActScratch, MatRef};
use crate::pool::ThreadPool;

/// The prefetch distances [`measure`] tries, in KiB (0: no hint).
const AHEAD_KIB: [u8; 3] = [0, 4, 8];

/// Timed rounds per candidate; the median of each is compared.
const ROUNDS: usize = 5;

/// Measures, for each type among `probes` (matrices in the interleaved
/// layout, typically a model's own), the fastest way for a lone token's
/// product to read it on `pool`'s threads: every prefetch distance of
/// [`AHEAD_KIB`], each with the AVX2 tile too where `tiles` has one beside
/// a wider kernel, timed in interleaved rounds over that type's probes in
/// turn (pass enough of them to outgrow the caches, as a decode step
/// does). Other types keep the default; so does a type whose probes are
/// refused (not interleaved, or of an inconsistent shape).
pub fn measure(tiles: &Tiles, pool: &ThreadPool, probes: &[MatRef]) -> TileTuning {
    let mut tuning = TileTuning::default();
    let mut candidates = Vec::new();
    for narrow in [false, true] {
        if narrow && tiles.narrow.is_none() {
            continue;
        }
        for ahead_kib in AHEAD_KIB {
            candidates.push(OneRow { ahead_kib, narrow });
        }
    }
    let mut seen = Vec::new();
    for p in probes {
        if seen.contains(&p.ty) || p.layout != crate::Layout::Packed {
            continue;
        }
        seen.push(p.ty);
        let of_type: Vec<&MatRef> = probes
            .iter()
            .filter(|q| q.ty == p.ty && q.layout == crate::Layout::Packed)
            .collect();
        if let Some(best) = time_candidates(tiles, pool, &of_type, &candidates) {
            tuning.set_one_row(p.ty, best);
        }
    }
    tuning
}

/// The candidate with the lowest median time for one token against every
/// matrix of `mats` in turn (all of one type); `None` if a product fails.
fn time_candidates(
    tiles: &Tiles,
    pool: &ThreadPool,
    mats: &[&MatRef],
    candidates: &[OneRow],
) -> Option<OneRow> {
    let ty = mats.first()?.ty;
    let cols = mats.iter().map(|m| m.cols).max()?;
    let rows = mats.iter().map(|m| m.rows).max()?;
    let x: Vec<f32> = (0..cols).map(|i| ((i % 97) as f32 - 48.0) / 50.0).collect();
    let mut out = vec![0f32; rows];
    let mut scratch = ActScratch::default();
    let mut times = vec![Vec::with_capacity(ROUNDS); candidates.len()];
    for _ in 0..ROUNDS {
        for (c, &one) in candidates.iter().enumerate() {
            let mut tuning = TileTuning::default();
            tuning.set_one_row(ty, one);
            let tiles = Tiles { tuning, ..*tiles };
            let t = Instant::now();
            for m in mats {
                let out = &mut out[..m.rows];
                super::matmul(&tiles, pool, m, &x[..m.cols], 1, out, &mut scratch).ok()?;
            }
            times[c].push(t.elapsed().as_secs_f64());
        }
    }
    let mut best = (f64::INFINITY, OneRow::DEFAULT);
    for (c, &one) in candidates.iter().enumerate() {
        let v = &mut times[c];
        v.sort_by(f64::total_cmp);
        if v[v.len() / 2] < best.0 {
            best = (v[v.len() / 2], one);
        }
    }
    Some(best.1)
}
