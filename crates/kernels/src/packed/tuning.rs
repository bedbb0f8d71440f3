//! How a decode step's lone token reads each type of interleaved weights
//! on this machine: which tile kernel runs it and how far ahead it asks
//! for weight bytes, measured on the machine instead of tuned to one CPU.
//!
//! A one-token product reads every weight byte once from memory and does
//! little with it, so its speed is how many reads the core keeps in
//! flight, and that differs between cores and between weight types. On an
//! AMD Zen 4, for one: the AVX2 tile ran a lone token's Q4_K and Q6_K
//! products 5–10 % faster than the AVX-512 one (which executes there as two
//! 256-bit halves and spends more instructions per block), and asking for
//! Q6_K's bytes 8 KiB ahead made it 35–50 % faster, while the same hint
//! made Q4_K, Q5_0 and Q8_0 5–12 % slower than none. So both are measured
//! per type ([`measure`]) when a runtime starts.
//!
//! Every tile kernel gives the scalar reference's bits and the hint only
//! changes timing, so whatever a measurement picks, and a noisy machine
//! may pick differently from one start to the next, the results are the
//! same.

use std::time::Instant;

use minfer_gguf::GgmlType;

use super::Tiles;
use crate::operand::{ActScratch, MatRef};
use crate::pool::ThreadPool;

/// Bytes ahead that the first tile of a group asks for when nothing was
/// measured, and always for tiles of several tokens: measured on Zen 5
/// with one token of Q6_K (18 GB/s from memory without, 34 GB/s with) and
/// on tiles of four tokens in a decode step of several sequences (Q4_K and
/// Q6_K twice as fast with the hint).
pub const DEFAULT_AHEAD: usize = 4096;

/// The prefetch distances [`measure`] tries, in KiB (0: no hint).
const AHEAD_KIB: [u8; 3] = [0, 4, 8];

/// Timed rounds per candidate; the median of each is compared.
const ROUNDS: usize = 5;

/// How a lone token's product reads one type of weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneRow {
    /// Software prefetch distance in KiB; 0 asks for nothing.
    pub ahead_kib: u8,
    /// Run the AVX2 tile (with AVX-VNNI where the CPU has it) instead of
    /// the AVX-512 one. Only on CPUs with both.
    pub narrow: bool,
}

impl OneRow {
    /// The kernels' choice before any measurement.
    pub const DEFAULT: OneRow = OneRow {
        ahead_kib: (DEFAULT_AHEAD >> 10) as u8,
        narrow: false,
    };

    /// The prefetch distance in bytes.
    pub fn ahead(self) -> usize {
        usize::from(self.ahead_kib) << 10
    }
}

/// Ids below this are the ones a [`TileTuning`] keeps (every type with an
/// interleaved layout has one).
const TYPE_IDS: usize = 40;

/// Per weight type, how a lone token's product reads it (see the module
/// documentation). The default is the kernels' fixed choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileTuning {
    one: [OneRow; TYPE_IDS],
}

impl Default for TileTuning {
    fn default() -> Self {
        TileTuning {
            one: [OneRow::DEFAULT; TYPE_IDS],
        }
    }
}

impl TileTuning {
    /// How a lone token's product reads weights of type `ty`.
    pub fn one_row(&self, ty: GgmlType) -> OneRow {
        self.one
            .get(ty.id() as usize)
            .copied()
            .unwrap_or(OneRow::DEFAULT)
    }

    /// Sets [`Self::one_row`] for `ty` (ignored for a type without an
    /// interleaved layout).
    pub fn set_one_row(&mut self, ty: GgmlType, one: OneRow) {
        if let Some(slot) = self.one.get_mut(ty.id() as usize) {
            *slot = one;
        }
    }

    /// The types whose choice differs from the default, as
    /// `Q6_K: 8 KiB ahead, AVX2 tile` lines for a log.
    pub fn describe(&self) -> Vec<String> {
        GgmlType::ALL
            .iter()
            .filter(|&&ty| self.one_row(ty) != OneRow::DEFAULT)
            .map(|&ty| {
                let one = self.one_row(ty);
                let ahead = match one.ahead_kib {
                    0 => "no prefetch".to_string(),
                    k => format!("{k} KiB ahead"),
                };
                let tile = if one.narrow { ", AVX2 tile" } else { "" };
                format!("{}: {ahead}{tile}", ty.name())
            })
            .collect()
    }
}

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
