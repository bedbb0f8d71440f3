//! Mirostat 1 and 2: adaptive truncation that steers the surprise of the
//! drawn tokens towards a target `tau`, learning a threshold `mu` as it
//! goes (Basu et al., as llama.cpp implements it).

use rand::Rng;

use crate::filters::{draw_index, softmax, top_k, Candidate};
use crate::Mirostat;

/// Candidates used to estimate the Zipf exponent in Mirostat 1.
const MIROSTAT_M: usize = 100;

/// Mirostat `version` (1 or 2) over `cands` from a vocabulary of `n_vocab`
/// tokens: truncates them by `mu`, draws, and moves `mu` at rate `eta`
/// towards the target surprise `tau`.
pub(crate) fn mirostat(
    cands: &mut Vec<Candidate>,
    version: Mirostat,
    n_vocab: usize,
    (tau, eta): (f32, f32),
    mu: &mut f32,
    rng: &mut impl Rng,
) -> u32 {
    softmax(cands);
    if version == Mirostat::V1 {
        truncate_v1(cands, n_vocab, *mu);
    } else {
        truncate_v2(cands, *mu);
    }
    softmax(cands);
    let i = draw_index(cands, rng);
    let Some(c) = cands.get(i) else { return 0 };
    let surprise = -c.p.log2();
    *mu -= eta * (surprise - tau);
    c.id
}

/// Mirostat 1: estimates the Zipf exponent from the best candidates and
/// keeps the top-k it and `mu` give.
fn truncate_v1(cands: &mut Vec<Candidate>, n_vocab: usize, mu: f32) {
    let mut sum_ti_bi = 0.0f32;
    let mut sum_ti_sq = 0.0f32;
    for i in 0..(MIROSTAT_M - 1).min(cands.len().saturating_sub(1)) {
        let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
        let b_i = (cands[i].p / cands[i + 1].p).ln();
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    let s_hat = sum_ti_bi / sum_ti_sq;
    let eps = s_hat - 1.0;
    let k = ((eps * 2f32.powf(mu)) / (1.0 - (n_vocab as f32).powf(-eps))).powf(1.0 / s_hat);
    // A degenerate estimate (a flat or single-candidate list) keeps all.
    let k = if k.is_finite() {
        (k as usize).max(1)
    } else {
        cands.len()
    };
    top_k(cands, k);
}

/// Mirostat 2: keeps the candidates whose surprise (in bits) is at most
/// `mu`.
fn truncate_v2(cands: &mut Vec<Candidate>, mu: f32) {
    let keep = cands
        .iter()
        .position(|c| -c.p.log2() > mu)
        .unwrap_or(cands.len())
        .max(1);
    cands.truncate(keep);
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn zipf(n: usize, s: f32) -> Vec<Candidate> {
        (0..n)
            .map(|i| Candidate::new(i as u32, -s * ((i + 1) as f32).ln()))
            .collect()
    }

    #[test]
    fn v2_truncates_by_surprise_and_learns_mu() {
        // p ∝ 1, 1/2, 1/4, 1/8 ... surprise in bits grows by one per rank.
        let base: Vec<Candidate> = (0..8)
            .map(|i| Candidate::new(i, -(i as f32) * 2f32.ln()))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut mu = 1.5; // keeps p >= 2^-1.5: only the first (p ≈ 0.5).
        let mut c = base.clone();
        let t = mirostat(&mut c, Mirostat::V2, 8, (3.0, 0.1), &mut mu, &mut rng);
        assert_eq!(t, 0);
        assert_eq!(c.len(), 1);
        // The drawn token had surprise 0 after renormalisation: mu rises
        // by eta * tau.
        assert!((mu - (1.5 + 0.1 * 3.0)).abs() < 1e-6);
    }

    #[test]
    fn mirostat_drives_the_average_surprise_to_tau() {
        for version in [Mirostat::V1, Mirostat::V2] {
            for tau in [2.0f32, 4.0] {
                let mut rng = ChaCha8Rng::seed_from_u64(7);
                let eta = 0.1;
                let mut mu = 2.0 * tau;
                let mut total = 0.0f32;
                let n = 2000;
                for _ in 0..n {
                    let mut c = zipf(1000, 1.1);
                    let before = mu;
                    mirostat(&mut c, version, 1000, (tau, eta), &mut mu, &mut rng);
                    // mu moves by -eta * (surprise - tau): recover the
                    // surprise the algorithm observed.
                    total += tau - (mu - before) / eta;
                }
                let avg = total / n as f32;
                assert!(
                    (avg - tau).abs() < 0.1,
                    "{version:?}, tau={tau}: average surprise {avg}"
                );
            }
        }
    }
}
