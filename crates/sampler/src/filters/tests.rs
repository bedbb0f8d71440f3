//! Each truncation and temperature stage against values worked out by hand.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;

fn cands(probs: &[f32]) -> Vec<Candidate> {
    probs
        .iter()
        .enumerate()
        .map(|(i, p)| Candidate::new(i as u32, p.ln()))
        .collect()
}

fn ids(c: &[Candidate]) -> Vec<u32> {
    c.iter().map(|c| c.id).collect()
}

#[test]
fn top_k_dense_matches_the_full_sort_and_breaks_ties_by_id() {
    let row = [0.5, 3.0, -1.0, 3.0, 7.0, 2.5, f32::NEG_INFINITY, 3.0];
    let mut out = Vec::new();
    top_k_dense(&row, 3, &mut out);
    assert_eq!(ids(&out), vec![4, 1, 3]);
    let mut full: Vec<Candidate> = row
        .iter()
        .enumerate()
        .map(|(i, &l)| Candidate::new(i as u32, l))
        .collect();
    top_k(&mut full, 5);
    top_k_dense(&row, 5, &mut out);
    assert_eq!(out, full);
}

#[test]
fn typical_keeps_the_tokens_nearest_the_entropy() {
    // p = [0.5, 0.3, 0.15, 0.05]; H = 1.1437 nats; surprises 0.693,
    // 1.204, 1.897, 2.996; distances 0.451, 0.060, 0.753, 1.852. Order by
    // distance: 1 (0.3), 0 (0.5, cum 0.8), 2 (cum 0.95), 3.
    let mut order = Vec::new();
    let mut c = cands(&[0.5, 0.3, 0.15, 0.05]);
    typical(&mut c, 0.5, &mut order);
    assert_eq!(ids(&c), vec![1, 0]);
    let mut c = cands(&[0.5, 0.3, 0.15, 0.05]);
    typical(&mut c, 0.25, &mut order);
    assert_eq!(ids(&c), vec![1]);
    let mut c = cands(&[0.5, 0.3, 0.15, 0.05]);
    typical(&mut c, 0.9, &mut order);
    assert_eq!(ids(&c), vec![1, 0, 2]);
    let mut c = cands(&[0.5, 0.3, 0.15, 0.05]);
    typical(&mut c, 1.0, &mut order);
    assert_eq!(c.len(), 4);
}

#[test]
fn top_n_sigma_cuts_below_max_minus_n_std() {
    // Logits 0, 1, 2, 3, 10: mean 3.2, std sqrt(((3.2²+2.2²+1.2²+0.2²+6.8²)/5))
    // = sqrt(12.56) = 3.544; n = 1 keeps logits >= 6.456: only 10.
    let mut c: Vec<Candidate> = [0.0, 1.0, 2.0, 3.0, 10.0]
        .iter()
        .enumerate()
        .map(|(i, &l)| Candidate::new(i as u32, l))
        .collect();
    top_n_sigma(&mut c, 1.0);
    assert_eq!(ids(&c), vec![4]);
    // n = 2.5 keeps logits >= 1.14: 2, 3, 10.
    let mut c: Vec<Candidate> = [0.0, 1.0, 2.0, 3.0, 10.0]
        .iter()
        .enumerate()
        .map(|(i, &l)| Candidate::new(i as u32, l))
        .collect();
    top_n_sigma(&mut c, 2.5);
    assert_eq!(ids(&c), vec![2, 3, 4]);
}

/// An RNG whose first f32 is below any positive probability.
fn always_fires() -> ChaCha8Rng {
    for seed in 0.. {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        if r.gen::<f32>() < 0.01 {
            return ChaCha8Rng::seed_from_u64(seed);
        }
    }
    unreachable!()
}

#[test]
fn xtc_removes_all_top_choices_but_the_least_likely() {
    // Above 0.1: 0.4, 0.3, 0.2 → keep 0.2 and everything below.
    let mut c = cands(&[0.3, 0.4, 0.05, 0.2, 0.05]);
    xtc(&mut c, 1.0, 0.1, &mut always_fires());
    assert_eq!(ids(&c), vec![3, 2, 4]);
    // Only one above the threshold: nothing to remove.
    let mut c = cands(&[0.9, 0.05, 0.05]);
    xtc(&mut c, 1.0, 0.1, &mut always_fires());
    assert_eq!(c.len(), 3);
    // A threshold above 0.5 turns the stage off.
    let mut c = cands(&[0.3, 0.4, 0.3]);
    xtc(&mut c, 1.0, 0.6, &mut always_fires());
    assert_eq!(c.len(), 3);
    // The coin: probability 0 never fires.
    let mut c = cands(&[0.3, 0.4, 0.3]);
    xtc(&mut c, 0.0, 0.1, &mut always_fires());
    assert_eq!(c.len(), 3);
}

#[test]
fn temperature_zero_keeps_the_first_best() {
    let mut c: Vec<Candidate> = [1.0, 3.0, 3.0, 2.0]
        .iter()
        .enumerate()
        .map(|(i, &l)| Candidate::new(i as u32, l))
        .collect();
    temperature(&mut c, 0.0);
    assert_eq!(ids(&c), vec![1]);
}

#[test]
fn dynamic_temperature_follows_the_normalised_entropy() {
    // Uniform over 4: normalised entropy 1, so t = temp + range.
    let mut c: Vec<Candidate> = (0..4).map(|i| Candidate::new(i, 2.0)).collect();
    dynamic_temperature(&mut c, 1.0, 0.5, 1.0);
    assert!(c.iter().all(|c| (c.logit - 2.0 / 1.5).abs() < 1e-6));
    // p = [0.5, 0.3, 0.15, 0.05], H = 1.1421 nats; with
    // exponent 2 and range [0.5, 1.5]: t = 0.5 + (H / ln 4)^2.
    let mut c = cands(&[0.5, 0.3, 0.15, 0.05]);
    let before: Vec<f32> = c.iter().map(|c| c.logit).collect();
    dynamic_temperature(&mut c, 1.0, 0.5, 2.0);
    let h: f32 = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| -p * p.ln()).sum();
    let t = 0.5 + (h / 4f32.ln()).powi(2);
    for (c, b) in c.iter().zip(before) {
        assert!((c.logit - b / t).abs() < 1e-4, "{} vs {}", c.logit, b / t);
    }
}

#[test]
fn softmax_sorts_and_normalises() {
    let mut c = cands(&[0.2, 0.5, 0.3]);
    softmax(&mut c);
    assert_eq!(ids(&c), vec![1, 2, 0]);
    for (c, want) in c.iter().zip([0.5, 0.3, 0.2]) {
        assert!((c.p - want).abs() < 1e-6);
    }
}
