//! Tests of each sampler stage and of the whole chain.

use proptest::prelude::*;

use super::*;
use crate::Stage;

fn cands(logits: &[f32]) -> Vec<Candidate> {
    logits
        .iter()
        .enumerate()
        .map(|(i, &logit)| Candidate::new(i as u32, logit))
        .collect()
}

fn ids(c: &[Candidate]) -> Vec<u32> {
    c.iter().map(|c| c.id).collect()
}

/// Logits whose softmax is exactly `probs` (up to rounding).
fn logits_of(probs: &[f32]) -> Vec<f32> {
    probs.iter().map(|p| p.ln()).collect()
}

/// A configuration with every filtering stage off.
fn plain(temp: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temp,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        seed,
        ..SamplingParams::default()
    }
}

fn repeat_only(repeat: f32) -> Penalties {
    Penalties {
        repeat,
        frequency: 0.0,
        presence: 0.0,
    }
}

#[test]
fn top_k_keeps_the_k_best_sorted() {
    let logits = [0.5, 3.0, -1.0, 2.0, 7.0, 2.5, 0.0];
    let mut c = cands(&logits);
    top_k(&mut c, 3);
    assert_eq!(ids(&c), vec![4, 1, 5]);

    let mut c = cands(&logits);
    top_k(&mut c, 0);
    assert_eq!(c.len(), logits.len(), "k = 0 is off");
    let mut c = cands(&logits);
    top_k(&mut c, 100);
    assert_eq!(
        c.len(),
        logits.len(),
        "k larger than the vocabulary keeps all"
    );
}

#[test]
fn top_k_breaks_ties_by_lowest_id() {
    let mut c = cands(&[1.0, 5.0, 5.0, 5.0, 2.0]);
    top_k(&mut c, 2);
    assert_eq!(ids(&c), vec![1, 2]);
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    let logits = logits_of(&[0.05, 0.5, 0.15, 0.3]);
    let keep = |p: f32| {
        let mut c = cands(&logits);
        top_p(&mut c, p);
        ids(&c)
    };
    assert_eq!(keep(0.45), vec![1]);
    assert_eq!(keep(0.75), vec![1, 3]);
    assert_eq!(keep(0.9), vec![1, 3, 2]);
    assert_eq!(keep(0.99), vec![1, 3, 2, 0]);
    assert_eq!(keep(1.0).len(), 4, "p = 1 is off");
}

#[test]
fn top_p_grows_past_the_first_prefix() {
    // 1000 equal logits: reaching p = 0.3 needs about 300 of them, more
    // than the first sorted prefix of 64.
    let mut c = cands(&vec![0.25; 1000]);
    top_p(&mut c, 0.3);
    assert!((299..=301).contains(&c.len()), "kept {}", c.len());
    // Ties are kept in id order.
    assert!(ids(&c).iter().enumerate().all(|(i, &id)| i as u32 == id));
}

#[test]
fn min_p_drops_tokens_below_the_scaled_best() {
    let logits = logits_of(&[0.05, 0.5, 0.15, 0.3]);
    let keep = |m: f32| {
        let mut c = cands(&logits);
        min_p(&mut c, m);
        ids(&c)
    };
    // Threshold 0.2 * 0.5 = 0.1: only 0.05 goes.
    assert_eq!(keep(0.2), vec![1, 2, 3]);
    // Threshold 0.5 * 0.5 = 0.25.
    assert_eq!(keep(0.5), vec![1, 3]);
    assert_eq!(keep(1.0), vec![1]);
    assert_eq!(keep(0.0).len(), 4, "min-p = 0 is off");
}

#[test]
fn repeat_penalty_divides_positive_and_multiplies_negative_once() {
    let mut logits = vec![2.0, -2.0, 1.0, 4.0];
    let mut seen = Vec::new();
    // Id 0 occurs twice but is penalised once; 99 is outside the row.
    apply_penalties(&mut logits, &[0, 1, 0, 99], repeat_only(2.0), &mut seen);
    assert_eq!(logits, vec![1.0, -4.0, 1.0, 4.0]);

    let mut logits = vec![2.0, -2.0];
    apply_penalties(&mut logits, &[0, 1], repeat_only(1.0), &mut seen);
    assert_eq!(logits, vec![2.0, -2.0], "penalty 1 is off");
}

#[test]
fn repeat_penalty_changes_the_greedy_choice_within_the_window() {
    let logits = [3.0, 2.0, 0.0];
    let mut cfg = SamplingParams::greedy();
    cfg.repeat_penalty = 2.0;
    cfg.repeat_last_n = 2;
    let mut s = Sampler::new(cfg).unwrap();
    // Token 0 in the window: 3 / 2 = 1.5 < 2, so token 1 wins.
    assert_eq!(s.sample(&logits, &[5, 0]).unwrap(), 1);
    // Token 0 only outside the last two: no penalty.
    assert_eq!(s.sample(&logits, &[0, 5, 6]).unwrap(), 0);
}

#[test]
fn frequency_and_presence_subtract_per_count_and_once() {
    let mut seen = Vec::new();
    // Id 0 three times, id 1 once, id 3 never; 99 is outside the row.
    let window = [0, 1, 0, 99, 0];
    // The same row each time, so each result shows one setting's effect.
    let mut penalized = |repeat: f32, frequency: f32, presence: f32| {
        let mut logits = vec![2.0, -2.0, 1.0, 4.0];
        let p = Penalties {
            repeat,
            frequency,
            presence,
        };
        apply_penalties(&mut logits, &window, p, &mut seen);
        logits
    };
    assert_eq!(penalized(1.0, 0.5, 0.0), vec![0.5, -2.5, 1.0, 4.0]);
    assert_eq!(penalized(1.0, 0.0, 1.5), vec![0.5, -3.5, 1.0, 4.0]);
    // All three, in llama.cpp's order: repeat first, then
    // `c * frequency + presence` subtracted; negative values reward.
    // id 0: 2 / 2 = 1, - (3 * -0.25 + 1) = 0.75; id 1: -2 * 2 = -4,
    // - (-0.25 + 1) = -4.75.
    assert_eq!(penalized(2.0, -0.25, 1.0), vec![0.75, -4.75, 1.0, 4.0]);
}

#[test]
fn penalties_only_count_the_last_repeat_last_n_tokens() {
    let logits = [3.0, 2.5, 0.0];
    let cfg = SamplingParams {
        frequency_penalty: 0.4,
        repeat_last_n: 2,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(cfg).unwrap();
    // Token 0 once in the window: 3 - 0.4 = 2.6 > 2.5, still wins.
    assert_eq!(s.sample(&logits, &[0, 0, 0, 5, 0]).unwrap(), 0);
    // Twice: 3 - 0.8 = 2.2 < 2.5.
    assert_eq!(s.sample(&logits, &[0, 0]).unwrap(), 1);

    let cfg = SamplingParams {
        presence_penalty: 0.6,
        repeat_last_n: 3,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(cfg).unwrap();
    assert_eq!(s.sample(&logits, &[0, 7, 8, 9]).unwrap(), 0);
    assert_eq!(s.sample(&logits, &[7, 8, 0]).unwrap(), 1);
}

#[test]
fn logit_bias_is_added_before_the_penalties_and_seen_by_greedy() {
    let logits = [3.0, 2.0, 0.0, -1.0];
    let greedy = |bias: Vec<(u32, f32)>, repeat: f32, history: &[u32]| {
        let cfg = SamplingParams {
            logit_bias: bias,
            repeat_penalty: repeat,
            ..SamplingParams::greedy()
        };
        Sampler::new(cfg).unwrap().sample(&logits, history).unwrap()
    };
    assert_eq!(greedy(vec![], 1.0, &[]), 0);
    assert_eq!(greedy(vec![(0, -100.0)], 1.0, &[]), 1);
    assert_eq!(greedy(vec![(3, 100.0)], 1.0, &[]), 3);
    // Two entries for one id add up.
    assert_eq!(greedy(vec![(2, 1.6), (2, 1.6)], 1.0, &[]), 2);
    assert_eq!(greedy(vec![(1, 2.0)], 1.0, &[]), 1);
    // Bias first, then the repeat penalty: token 1 is (2 + 3) / 2 = 2.5 < 3
    // (penalty first would give 2 / 2 + 3 = 4 and pick it).
    assert_eq!(greedy(vec![(1, 3.0)], 2.0, &[1]), 0);
    // Token 2 is (0 + 2.5) / 2 = 1.25 < 2 (penalty first: 0 * 2 + 2.5).
    assert_eq!(greedy(vec![(2, 2.5), (0, -5.0)], 2.0, &[2]), 1);
}

#[test]
fn logit_bias_out_of_the_row_is_an_error() {
    let cfg = SamplingParams {
        logit_bias: vec![(4, 1.0)],
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(cfg).unwrap();
    assert_eq!(
        s.sample(&[0.0; 4], &[]),
        Err(SamplerError::LogitBiasIdOutOfRange { id: 4, n_vocab: 4 })
    );
    assert!(s.sample(&[0.0; 5], &[]).is_ok());
}

#[test]
fn logit_bias_shifts_the_sampled_distribution() {
    // +ln(3) on token 1 of a uniform pair: p = (1/4, 3/4).
    let cfg = SamplingParams {
        logit_bias: vec![(1, 3f32.ln())],
        ..plain(1.0, 5)
    };
    let f = frequencies(cfg, &[0.0, 0.0], 20_000);
    assert!((f[1] - 0.75).abs() < 0.015, "{f:?}");
}

#[test]
fn defaults_leave_the_old_chain_unchanged() {
    // The same draws as a chain with the new stages spelled out as off.
    let logits: Vec<f32> = (0..300).map(|i| ((i * 53 % 97) as f32) / 20.0).collect();
    let history: Vec<u32> = (0..100).map(|i| (i * 7) % 300).collect();
    let run = |cfg: SamplingParams| {
        let mut s = Sampler::new(cfg).unwrap();
        (0..32)
            .map(|_| s.sample(&logits, &history).unwrap())
            .collect::<Vec<_>>()
    };
    let base = SamplingParams {
        temp: 1.0,
        repeat_penalty: 1.3,
        seed: 11,
        ..SamplingParams::default()
    };
    let off = SamplingParams {
        presence_penalty: 0.0,
        frequency_penalty: 0.0,
        logit_bias: vec![(5, 0.0)],
        ..base.clone()
    };
    assert_eq!(run(base.clone()), run(off));

    // And the penalties with zero frequency and presence are exactly the
    // repeat penalty alone.
    let mut seen = Vec::new();
    let mut a = logits.clone();
    apply_penalties(&mut a, &history, repeat_only(1.3), &mut seen);
    let mut b = logits.clone();
    for id in 0..300u32 {
        if history.contains(&id) {
            let l = &mut b[id as usize];
            if *l <= 0.0 {
                *l *= 1.3;
            } else {
                *l /= 1.3;
            }
        }
    }
    assert_eq!(a, b);
}

#[test]
fn greedy_takes_the_argmax_and_the_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(s.sample(&[1.0, 3.0, 3.0, 2.0], &[]).unwrap(), 1);
    assert_eq!(s.sample(&[-5.0, -1.0, -3.0], &[]).unwrap(), 1);
    assert_eq!(s.sample(&[f32::NAN, 0.5, f32::NAN], &[]).unwrap(), 1);
    assert_eq!(s.sample(&[7.0], &[]).unwrap(), 0);
}

#[test]
fn empty_logits_are_an_error() {
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    assert_eq!(s.sample(&[], &[]), Err(SamplerError::EmptyLogits));
    let mut g = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(g.sample(&[], &[]), Err(SamplerError::EmptyLogits));
}

#[test]
fn invalid_config_is_refused() {
    let cfg = SamplingParams {
        top_p: 0.0,
        ..SamplingParams::default()
    };
    assert_eq!(
        Sampler::new(cfg).unwrap_err(),
        SamplerError::InvalidTopP(0.0)
    );
}

#[test]
fn degenerate_rows_still_yield_a_token() {
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    let all_neg_inf = [f32::NEG_INFINITY; 5];
    assert!(s.sample(&all_neg_inf, &[]).unwrap() < 5);
    let all_nan = [f32::NAN; 3];
    assert!(s.sample(&all_nan, &[]).unwrap() < 3);
    assert_eq!(s.sample(&[0.0, f32::INFINITY, 1.0], &[]).unwrap(), 1);
}

#[test]
fn same_seed_same_tokens_other_seed_other_tokens() {
    let logits: Vec<f32> = (0..500).map(|i| ((i * 37 % 101) as f32) / 25.0).collect();
    let run = |seed: u64| {
        let mut s = Sampler::new(plain(1.0, seed)).unwrap();
        (0..64)
            .map(|_| s.sample(&logits, &[]).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));

    let mut s = Sampler::new(plain(1.0, 7)).unwrap();
    let first: Vec<u32> = (0..8).map(|_| s.sample(&logits, &[]).unwrap()).collect();
    s.reseed(7);
    let again: Vec<u32> = (0..8).map(|_| s.sample(&logits, &[]).unwrap()).collect();
    assert_eq!(first, again, "reseed restarts the sequence");
}

/// Draw `n` tokens and return the observed frequencies.
fn frequencies(cfg: SamplingParams, logits: &[f32], n: usize) -> Vec<f64> {
    let mut s = Sampler::new(cfg).unwrap();
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample(logits, &[]).unwrap() as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

#[test]
fn temperature_one_follows_the_softmax() {
    let f = frequencies(plain(1.0, 1234), &logits_of(&[0.5, 0.3, 0.2]), 20_000);
    for (got, want) in f.iter().zip([0.5, 0.3, 0.2]) {
        assert!((got - want).abs() < 0.015, "{f:?}");
    }
}

#[test]
fn lower_temperature_sharpens_higher_flattens() {
    let logits = logits_of(&[0.5, 0.3, 0.2]);
    // T = 0.5 squares the probabilities before renormalising.
    let f = frequencies(plain(0.5, 99), &logits, 20_000);
    let z = 0.25 + 0.09 + 0.04;
    for (got, want) in f.iter().zip([0.25 / z, 0.09 / z, 0.04 / z]) {
        assert!((got - want).abs() < 0.015, "{f:?}");
    }
    // A very high temperature is close to uniform.
    let f = frequencies(plain(100.0, 99), &logits, 20_000);
    for got in &f {
        assert!((got - 1.0 / 3.0).abs() < 0.02, "{f:?}");
    }
}

#[test]
fn default_chain_only_draws_survivors() {
    // min-p 0.05 of the best (p = 0.6) is 0.03: token 3 (p = 0.01) must
    // never come out; top-k 2 further restricts to tokens 0 and 1.
    let logits = logits_of(&[0.6, 0.25, 0.14, 0.01]);
    let cfg = SamplingParams {
        temp: 1.0,
        top_k: 2,
        ..SamplingParams::default()
    };
    let f = frequencies(cfg, &logits, 5_000);
    assert_eq!(f[2], 0.0);
    assert_eq!(f[3], 0.0);
    assert!(f[0] > 0.6 && f[1] > 0.2, "{f:?}");

    let cfg = SamplingParams {
        temp: 1.0,
        top_k: 0,
        top_p: 1.0,
        ..SamplingParams::default()
    };
    let f = frequencies(cfg, &logits, 5_000);
    assert_eq!(f[3], 0.0, "min-p must remove the unlikely token");
}

#[test]
fn buffers_are_reused_between_calls() {
    let logits: Vec<f32> = (0..4096).map(|i| (i % 17) as f32 * 0.3).collect();
    let history: Vec<u32> = (0..200).collect();
    let cfg = SamplingParams {
        temp: 0.7,
        top_k: 0,
        repeat_penalty: 1.1,
        presence_penalty: 0.3,
        frequency_penalty: 0.2,
        logit_bias: vec![(3, 2.0), (4000, -5.0)],
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(cfg).unwrap();
    // Where each buffer lives and how much it holds: unchanged means no
    // allocation happened.
    let buffers = |s: &Sampler| {
        (
            s.work.as_ptr(),
            s.work.capacity(),
            s.cands.as_ptr(),
            s.cands.capacity(),
            s.seen.as_ptr(),
            s.seen.capacity(),
        )
    };
    s.sample(&logits, &history).unwrap();
    let before = buffers(&s);
    for _ in 0..10 {
        s.sample(&logits, &history).unwrap();
    }
    let after = buffers(&s);
    assert_eq!(before, after);
}

/// The textbook top-p: sort everything, then walk the cumulative mass.
fn top_p_reference(logits: &[f32], p: f32) -> Vec<u32> {
    let mut c = cands(logits);
    c.sort_by(by_logit_desc);
    let max = c[0].logit;
    let sum: f64 = c.iter().map(|c| f64::from((c.logit - max).exp())).sum();
    let mut cum = 0.0;
    for i in 0..c.len() {
        cum += f64::from((c[i].logit - max).exp()) / sum;
        if cum >= f64::from(p) {
            c.truncate(i + 1);
            break;
        }
    }
    ids(&c)
}

proptest! {
    #[test]
    fn top_p_matches_the_full_sort(
        logits in prop::collection::vec(-10.0f32..10.0, 1..400),
        p in 0.01f32..1.0,
    ) {
        let mut c = cands(&logits);
        top_p(&mut c, p);
        prop_assert_eq!(ids(&c), top_p_reference(&logits, p));
    }

    #[test]
    fn top_k_matches_the_full_sort(
        logits in prop::collection::vec(-10.0f32..10.0, 1..300),
        k in 1usize..50,
    ) {
        let mut c = cands(&logits);
        top_k(&mut c, k);
        let mut want = cands(&logits);
        want.sort_by(by_logit_desc);
        want.truncate(k);
        if k < logits.len() {
            prop_assert_eq!(ids(&c), ids(&want));
        } else {
            prop_assert_eq!(c.len(), logits.len());
        }
    }

    #[test]
    fn sampled_token_is_always_in_range(
        logits in prop::collection::vec(prop_oneof![-30.0f32..30.0, Just(f32::NEG_INFINITY)], 1..200),
        seed in any::<u64>(),
        temp in 0.0f32..3.0,
    ) {
        let mut s = Sampler::new(SamplingParams { temp, seed, ..SamplingParams::default() }).unwrap();
        let t = s.sample(&logits, &[0, 1, 2]).unwrap();
        prop_assert!((t as usize) < logits.len());
        // A token with logit -inf is only possible when nothing is finite.
        if logits.iter().any(|l| l.is_finite()) {
            prop_assert!(logits[t as usize].is_finite());
        }
    }
}

proptest! {
    /// At temperature 0 the dense shortcut (penalties on the whole row,
    /// then the argmax) chooses what the candidate-list path chooses. (At
    /// other temperatures the two paths list the candidates in different
    /// orders, so one seed may draw different tokens from the same
    /// distribution.)
    #[test]
    fn dense_and_sparse_paths_agree(
        logits in proptest::collection::vec(-5.0f32..5.0, 2..60),
        history in proptest::collection::vec(0u32..60, 0..40),
        seed in 0u64..1000,
    ) {
        let temp = 0.0;
        let base = SamplingParams {
            temp,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.3,
            frequency_penalty: 0.2,
            seed,
            ..SamplingParams::default()
        };
        // Penalties first (dense) vs after a top-k that keeps everything
        // (sparse, and no greedy shortcut).
        let dense = SamplingParams {
            stages: vec![Stage::Penalties, Stage::TopK, Stage::Temperature],
            ..base.clone()
        };
        let sparse = SamplingParams {
            top_k: logits.len(),
            stages: vec![Stage::TopK, Stage::Penalties, Stage::Temperature],
            ..base
        };
        let a = Sampler::new(dense).unwrap().sample(&logits, &history).unwrap();
        let b = Sampler::new(sparse).unwrap().sample(&logits, &history).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn the_stage_order_matters_and_left_out_stages_do_not_run() {
    // Token 1 is best but was just seen; a strong repeat penalty demotes it.
    let logits = [1.0, 2.0, 0.0];
    let history = [1];
    let greedy = |stages: Vec<Stage>| {
        Sampler::new(SamplingParams {
            temp: 0.0,
            top_k: 1,
            repeat_penalty: 4.0,
            stages,
            ..SamplingParams::default()
        })
        .unwrap()
        .sample(&logits, &history)
        .unwrap()
    };
    // Penalties then top-k: token 1 falls to 0.5 and token 0 wins.
    assert_eq!(
        greedy(vec![Stage::Penalties, Stage::TopK, Stage::Temperature]),
        0
    );
    // Top-k first keeps only token 1, whatever the penalty does.
    assert_eq!(
        greedy(vec![Stage::TopK, Stage::Penalties, Stage::Temperature]),
        1
    );
    // Without the penalties stage the repeat penalty is ignored.
    assert_eq!(greedy(vec![Stage::TopK, Stage::Temperature]), 1);
}
