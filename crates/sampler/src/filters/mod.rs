//! The stages that work on the candidate list: truncations (top-k, top-p,
//! min-p, typical, top-n-sigma, XTC), temperature (fixed and dynamic),
//! softmax and the final draw. Each follows llama.cpp's definition; ties
//! are broken by the lowest token id so results never depend on a sort
//! algorithm's whims.

use std::cmp::Ordering;

use rand::Rng;

/// One entry of the candidate list the stages narrow down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) id: u32,
    pub(crate) logit: f32,
    /// Softmax probability, valid right after [`softmax`].
    pub(crate) p: f32,
}

impl Candidate {
    pub(crate) fn new(id: u32, logit: f32) -> Candidate {
        Candidate { id, logit, p: 0.0 }
    }
}

/// Order by logit, highest first; equal logits by id, lowest first.
pub(crate) fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
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

/// The `k` best entries of a dense logits row as candidates, best first,
/// without building the whole list when `k` is small.
pub(crate) fn top_k_dense(logits: &[f32], k: usize, out: &mut Vec<Candidate>) {
    out.clear();
    if k == 0 || k >= logits.len() || k > 512 {
        out.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| Candidate::new(i as u32, l)),
        );
        top_k(out, k);
        return;
    }
    // A sorted insertion into at most k entries; most logits fail the first
    // comparison against the current k-th best.
    for (i, &l) in logits.iter().enumerate() {
        if out.len() == k && l <= out[k - 1].logit {
            // Equal logits keep the lower id, which came first.
            continue;
        }
        let c = Candidate::new(i as u32, l);
        let at = out.partition_point(|x| by_logit_desc(x, &c) == Ordering::Less);
        if out.len() == k {
            out.pop();
        }
        out.insert(at, c);
    }
}

/// Keeps the `k` best candidates, sorted best first; `k == 0` is off.
pub(crate) fn top_k(cands: &mut Vec<Candidate>, k: usize) {
    if k == 0 || k >= cands.len() {
        if k != 0 {
            cands.sort_unstable_by(by_logit_desc);
        }
        return;
    }
    cands.select_nth_unstable_by(k - 1, by_logit_desc);
    cands.truncate(k);
    cands.sort_unstable_by(by_logit_desc);
}

/// The largest logit of the candidates (`-inf` when there are none).
pub(crate) fn max_logit(cands: &[Candidate]) -> f32 {
    cands.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.logit))
}

/// Sorts best first and fills in each candidate's softmax probability.
pub(crate) fn softmax(cands: &mut [Candidate]) {
    cands.sort_unstable_by(by_logit_desc);
    let Some(first) = cands.first() else { return };
    let max = first.logit;
    if !max.is_finite() {
        // All -inf (or +inf present): uniform over the best.
        let n = cands.iter().filter(|c| c.logit == max).count().max(1) as f32;
        for c in cands.iter_mut() {
            c.p = if c.logit == max { 1.0 / n } else { 0.0 };
        }
        return;
    }
    let sum: f64 = cands.iter().map(|c| f64::from((c.logit - max).exp())).sum();
    for c in cands.iter_mut() {
        c.p = (f64::from((c.logit - max).exp()) / sum) as f32;
    }
}

/// The entropy (nats) of the candidates' probabilities, after [`softmax`].
fn entropy(cands: &[Candidate]) -> f32 {
    cands
        .iter()
        .filter(|c| c.p > 0.0)
        .map(|c| -c.p * c.p.ln())
        .sum()
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

/// Locally typical sampling: orders the candidates by how far their
/// surprise (`-ln p`) is from the entropy, and keeps the closest ones until
/// their mass exceeds `typical_p`. `order` is scratch space.
pub(crate) fn typical(cands: &mut Vec<Candidate>, typical_p: f32, order: &mut Vec<(f32, usize)>) {
    if typical_p >= 1.0 || cands.len() <= 1 {
        return;
    }
    softmax(cands);
    let entropy = entropy(cands);
    order.clear();
    // A zero probability has an infinite surprise: last in the order.
    order.extend(cands.iter().enumerate().map(|(i, c)| {
        let shift = if c.p > 0.0 {
            (-c.p.ln() - entropy).abs()
        } else {
            f32::INFINITY
        };
        (shift, i)
    }));
    // Stable on the best-first order, so equal shifts keep the better token.
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cum = 0.0f32;
    let mut keep = order.len();
    for (n, &(_, i)) in order.iter().enumerate() {
        cum += cands[i].p;
        if cum > typical_p {
            keep = n + 1;
            break;
        }
    }
    let kept: Vec<Candidate> = order[..keep].iter().map(|&(_, i)| cands[i]).collect();
    cands.clear();
    cands.extend(kept);
}

/// Top-n-sigma: drops candidates whose logit is more than `n` standard
/// deviations (of the finite logits) below the best; `n <= 0` is off.
pub(crate) fn top_n_sigma(cands: &mut Vec<Candidate>, n: f32) {
    if n <= 0.0 || cands.len() <= 1 {
        return;
    }
    let finite = || cands.iter().filter(|c| c.logit != f32::NEG_INFINITY);
    let count = finite().count();
    if count == 0 {
        return;
    }
    let max = max_logit(cands);
    let mean = finite().map(|c| f64::from(c.logit)).sum::<f64>() / count as f64;
    let var = finite()
        .map(|c| (f64::from(c.logit) - mean).powi(2))
        .sum::<f64>()
        / count as f64;
    let threshold = max - n * var.sqrt() as f32;
    cands.retain(|c| c.logit >= threshold);
}

/// XTC ("exclude top choices"): with chance `probability`, removes every
/// candidate whose probability is at least `threshold` except the least
/// likely of them. The coin is tossed on every call (when the stage is
/// active), so the random stream does not depend on the logits.
pub(crate) fn xtc(
    cands: &mut Vec<Candidate>,
    probability: f32,
    threshold: f32,
    rng: &mut impl Rng,
) {
    if probability <= 0.0 || threshold > 0.5 || cands.len() < 2 {
        return;
    }
    let chance: f32 = rng.gen();
    if chance > probability {
        return;
    }
    softmax(cands);
    let above = cands.iter().take_while(|c| c.p >= threshold).count();
    if above >= 2 {
        cands.drain(..above - 1);
    }
}

/// Temperature: divides every logit by `temp`; `temp <= 0` keeps only the
/// best candidate (the first one in the list among equals).
pub(crate) fn temperature(cands: &mut Vec<Candidate>, temp: f32) {
    if temp <= 0.0 {
        let mut best = 0;
        for (i, c) in cands.iter().enumerate() {
            if c.logit > cands[best].logit {
                best = i;
            }
        }
        if let Some(&b) = cands.get(best) {
            cands.clear();
            cands.push(b);
        }
        return;
    }
    if temp == 1.0 {
        return;
    }
    for c in cands.iter_mut() {
        c.logit /= temp;
    }
}

/// Dynamic temperature: the temperature moves in `[temp - range, temp +
/// range]` (floored at 0) with the candidates' entropy normalised by its
/// maximum, raised to `exponent`.
pub(crate) fn dynamic_temperature(
    cands: &mut Vec<Candidate>,
    temp: f32,
    range: f32,
    exponent: f32,
) {
    if range <= 0.0 {
        temperature(cands, temp);
        return;
    }
    if cands.len() <= 1 {
        return;
    }
    let min_t = (temp - range).max(0.0);
    let max_t = temp + range;
    let max_entropy = (cands.len() as f32).ln();
    softmax(cands);
    let entropy = entropy(cands);
    let normalized = entropy / max_entropy;
    let t = min_t + (max_t - min_t) * normalized.powf(exponent);
    temperature(cands, t);
}

/// Index of one candidate drawn from the softmax of their logits.
pub(crate) fn draw_index(cands: &[Candidate], rng: &mut impl Rng) -> usize {
    if cands.is_empty() {
        return 0;
    }
    let max = max_logit(cands);
    if !max.is_finite() {
        // All -inf, or some +inf: the softmax is undefined, so take the
        // best candidate deterministically.
        return (0..cands.len())
            .min_by(|&a, &b| by_logit_desc(&cands[a], &cands[b]))
            .unwrap_or(0);
    }
    let sum: f64 = cands.iter().map(|c| f64::from((c.logit - max).exp())).sum();
    let target = rng.gen::<f64>() * sum;
    let mut cum = 0.0f64;
    let mut last = 0;
    for (i, c) in cands.iter().enumerate() {
        let w = f64::from((c.logit - max).exp());
        if w == 0.0 {
            continue;
        }
        cum += w;
        last = i;
        if target < cum {
            return i;
        }
    }
    // Rounding can leave `target` a hair above the final sum.
    last
}

/// One token drawn from the softmax of the candidates.
pub(crate) fn draw(cands: &[Candidate], rng: &mut impl Rng) -> u32 {
    cands.get(draw_index(cands, rng)).map_or(0, |c| c.id)
}

#[cfg(test)]
mod tests;
