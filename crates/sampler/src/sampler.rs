//! The sampler chain: logits (plus recent history) → one token id.

use std::cmp::Ordering;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{SamplerConfig, SamplerError};

/// One entry of the candidate list the stages narrow down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) id: u32,
    pub(crate) logit: f32,
}

/// Turns logits into token ids.
///
/// The stages run in llama.cpp's default order: logit bias → penalties
/// (repeat, frequency, presence) → top-k → top-p → min-p → temperature →
/// softmax → draw. With a temperature of 0 the sampler instead returns the
/// argmax of the biased and penalised logits (llama.cpp also applies bias
/// and penalties before its greedy pick).
///
/// The buffers the stages work in live in the sampler and keep their
/// capacity, so after the first call sampling does not allocate.
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: ChaCha8Rng,
    /// The logits after NaN clean-up, bias and penalties.
    work: Vec<f32>,
    /// The candidates still in play.
    cands: Vec<Candidate>,
    /// Distinct ids of the penalty window.
    seen: Vec<u32>,
}

impl Sampler {
    /// A sampler for `cfg`, after checking its ranges.
    pub fn new(cfg: SamplerConfig) -> Result<Self, SamplerError> {
        cfg.validate()?;
        Ok(Self {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            work: Vec::new(),
            cands: Vec::new(),
            seen: Vec::new(),
        })
    }

    /// The configuration this sampler runs with.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Restarts the random sequence from `seed`.
    pub fn reseed(&mut self, seed: u64) {
        self.cfg.seed = seed;
        self.rng = ChaCha8Rng::seed_from_u64(seed);
    }

    /// Picks the next token from one row of `logits`.
    ///
    /// `history` is every token before this one (prompt and generated); the
    /// penalties look at its last `repeat_last_n` entries. History ids
    /// outside the logits row are ignored, and NaN logits are treated as
    /// `-inf` so a broken row can never be chosen from. A logit bias id
    /// outside the row is an error
    /// ([`SamplerError::LogitBiasIdOutOfRange`]).
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, SamplerError> {
        if logits.is_empty() {
            return Err(SamplerError::EmptyLogits);
        }
        if u32::try_from(logits.len() - 1).is_err() {
            return Err(SamplerError::VocabTooLarge(logits.len()));
        }

        self.cfg.validate_vocab(logits.len())?;

        self.work.clear();
        self.work.extend(
            logits
                .iter()
                .map(|&l| if l.is_nan() { f32::NEG_INFINITY } else { l }),
        );

        apply_logit_bias(&mut self.work, &self.cfg.logit_bias);
        let window = &history[history.len().saturating_sub(self.cfg.repeat_last_n)..];
        apply_penalties(
            &mut self.work,
            window,
            Penalties {
                repeat: self.cfg.repeat_penalty,
                frequency: self.cfg.frequency_penalty,
                presence: self.cfg.presence_penalty,
            },
            &mut self.seen,
        );

        if self.cfg.is_greedy() {
            return Ok(argmax(&self.work));
        }

        self.cands.clear();
        self.cands
            .extend(self.work.iter().enumerate().map(|(i, &logit)| Candidate {
                // The length check above makes every index fit in a u32.
                id: i as u32,
                logit,
            }));
        top_k(&mut self.cands, self.cfg.top_k);
        top_p(&mut self.cands, self.cfg.top_p);
        min_p(&mut self.cands, self.cfg.min_p);
        temperature(&mut self.cands, self.cfg.temp);
        Ok(draw(&self.cands, &mut self.rng))
    }
}

/// Order by logit, highest first; equal logits by id, lowest first, so every
/// stage is deterministic whatever the sort algorithm does with ties.
fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// The index of the largest value; among equal values the lowest index.
pub(crate) fn argmax(values: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in values.iter().enumerate().skip(1) {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

/// Adds each `(id, bias)` to its logit; the ids were checked against the
/// row by [`SamplerConfig::validate_vocab`].
pub(crate) fn apply_logit_bias(logits: &mut [f32], bias: &[(u32, f32)]) {
    for &(id, b) in bias {
        if let Some(l) = logits.get_mut(id as usize) {
            *l += b;
        }
    }
}

/// The three history penalties of llama.cpp's `penalties` sampler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Penalties {
    /// Divides positive / multiplies non-positive logits; `1` is off.
    pub(crate) repeat: f32,
    /// Subtracted once per occurrence; `0` is off.
    pub(crate) frequency: f32,
    /// Subtracted once for any occurrence; `0` is off.
    pub(crate) presence: f32,
}

/// llama.cpp's penalties: for each distinct id seen `c` times in `window`,
/// the repeat penalty divides its logit when positive and multiplies it when
/// not (once, however often it occurs), then
/// `c * frequency + presence` is subtracted.
pub(crate) fn apply_penalties(
    logits: &mut [f32],
    window: &[u32],
    p: Penalties,
    seen: &mut Vec<u32>,
) {
    if window.is_empty() || (p.repeat == 1.0 && p.frequency == 0.0 && p.presence == 0.0) {
        return;
    }
    // Sorting a copy of the window is O(n log n) and reuses `seen`'s
    // capacity, where a hash map of counts would allocate.
    seen.clear();
    seen.extend_from_slice(window);
    seen.sort_unstable();
    for run in seen.chunk_by(|a, b| a == b) {
        let Some(l) = logits.get_mut(run[0] as usize) else {
            continue;
        };
        if p.repeat != 1.0 {
            if *l <= 0.0 {
                *l *= p.repeat;
            } else {
                *l /= p.repeat;
            }
        }
        *l -= run.len() as f32 * p.frequency + p.presence;
    }
}

/// Keeps the `k` best candidates, sorted best first; `k == 0` is off.
pub(crate) fn top_k(cands: &mut Vec<Candidate>, k: usize) {
    if k == 0 || k >= cands.len() {
        return;
    }
    cands.select_nth_unstable_by(k - 1, by_logit_desc);
    cands.truncate(k);
    cands.sort_unstable_by(by_logit_desc);
}

/// The largest logit of the candidates (`-inf` when there are none).
fn max_logit(cands: &[Candidate]) -> f32 {
    cands.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.logit))
}

/// Keeps the smallest best-first prefix whose softmax mass reaches `p`
/// (always at least one candidate); leaves the candidates sorted best first.
pub(crate) fn top_p(cands: &mut Vec<Candidate>, p: f32) {
    if p >= 1.0 || cands.len() <= 1 {
        return;
    }
    let max = max_logit(cands);
    if !max.is_finite() {
        return;
    }
    let sum: f64 = cands.iter().map(|c| f64::from((c.logit - max).exp())).sum();
    let p = f64::from(p);
    // Sorting the whole vocabulary when top-k is off would cost milliseconds;
    // the prefix that reaches `p` is usually short, so sort a growing prefix.
    let n = cands.len();
    let mut k = n.min(64);
    loop {
        if k < n {
            cands.select_nth_unstable_by(k - 1, by_logit_desc);
        }
        cands[..k].sort_unstable_by(by_logit_desc);
        let mut cum = 0.0f64;
        for i in 0..k {
            cum += f64::from((cands[i].logit - max).exp()) / sum;
            if cum >= p {
                cands.truncate(i + 1);
                return;
            }
        }
        if k == n {
            return;
        }
        k = (k * 2).min(n);
    }
}

/// Drops candidates whose probability is below `min_p` times the best one's,
/// i.e. whose logit is below `max + ln(min_p)`; `min_p == 0` is off.
pub(crate) fn min_p(cands: &mut Vec<Candidate>, min_p: f32) {
    if min_p <= 0.0 || cands.len() <= 1 {
        return;
    }
    let threshold = max_logit(cands) + min_p.ln();
    // The best candidate always passes (ln(min_p) <= 0), so the list never
    // becomes empty.
    cands.retain(|c| c.logit >= threshold);
}

/// Divides every logit by the temperature (`temp > 0`).
pub(crate) fn temperature(cands: &mut [Candidate], temp: f32) {
    if temp == 1.0 || temp <= 0.0 {
        return;
    }
    for c in cands.iter_mut() {
        c.logit /= temp;
    }
}

/// Softmax over the candidates and one draw from it.
pub(crate) fn draw(cands: &[Candidate], rng: &mut impl Rng) -> u32 {
    let Some(first) = cands.first() else {
        // Unreachable through `Sampler::sample` (every stage keeps one
        // candidate), but a token id is still owed.
        return 0;
    };
    let max = max_logit(cands);
    if !max.is_finite() {
        // All -inf, or some +inf: the softmax is undefined, so take the
        // best candidate deterministically.
        let best = cands
            .iter()
            .copied()
            .min_by(by_logit_desc)
            .unwrap_or(*first);
        return best.id;
    }
    let sum: f64 = cands.iter().map(|c| f64::from((c.logit - max).exp())).sum();
    let target = rng.gen::<f64>() * sum;
    let mut cum = 0.0f64;
    let mut last = first.id;
    for c in cands {
        let w = f64::from((c.logit - max).exp());
        if w == 0.0 {
            continue;
        }
        cum += w;
        last = c.id;
        if target < cum {
            return c.id;
        }
    }
    // Rounding can leave `target` a hair above the final sum.
    last
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
