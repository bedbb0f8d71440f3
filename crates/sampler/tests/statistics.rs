//! The draw follows the distribution the chain computes: 20,000 seeded
//! draws against the expected probabilities, by a chi-square test.

use minfer_sampler::{Sampler, SamplingParams};

/// The expected distribution, computed directly from llama.cpp's
/// definitions: top-k and top-p cut on the raw logits, then temperature.
fn expected(logits: &[f32], k: usize, p: f64, temp: f64) -> Vec<(u32, f64)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    idx.truncate(k);
    let z: f64 = idx
        .iter()
        .map(|&i| f64::from(logits[i as usize]).exp())
        .sum();
    let mut cum = 0.0;
    let mut kept = Vec::new();
    for &i in &idx {
        kept.push(i);
        cum += f64::from(logits[i as usize]).exp() / z;
        if cum >= p {
            break;
        }
    }
    let zt: f64 = kept
        .iter()
        .map(|&i| (f64::from(logits[i as usize]) / temp).exp())
        .sum();
    kept.iter()
        .map(|&i| (i, (f64::from(logits[i as usize]) / temp).exp() / zt))
        .collect()
}

/// Pearson's statistic of `counts` (over `n` draws) against `want`.
fn chi_square(counts: &[usize], want: &[(u32, f64)], n: usize) -> f64 {
    want.iter()
        .map(|&(i, q)| {
            let e = q * n as f64;
            (counts[i as usize] as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn draws_match_the_computed_distribution() {
    let logits = [1.0f32, 2.5, 0.3, 2.2, -1.0, 1.8, 0.9, 2.4, -0.5, 1.2];
    let (k, p, temp) = (6, 0.9, 0.7);
    let want = expected(&logits, k, p, temp);
    assert!(
        want.len() >= 4,
        "the cut should leave several tokens: {want:?}"
    );
    let mut s = Sampler::new(SamplingParams {
        temp: temp as f32,
        top_k: k,
        top_p: p as f32,
        min_p: 0.0,
        seed: 1234,
        ..SamplingParams::default()
    })
    .unwrap();
    let n = 20_000;
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample(&logits, &[]).unwrap() as usize] += 1;
    }
    // Nothing outside the kept set is ever drawn.
    let kept_total: usize = want.iter().map(|&(i, _)| counts[i as usize]).sum();
    assert_eq!(kept_total, n, "{counts:?} vs {want:?}");
    let chi2 = chi_square(&counts, &want, n);
    // The 0.999 quantile of chi-square with up to 5 degrees of freedom is
    // 20.5; a wrong distribution (say, temperature applied before top-p)
    // lands in the hundreds.
    assert!(
        chi2 < 20.5,
        "chi2 = {chi2:.2} over {} cells: {counts:?} vs {want:?}",
        want.len()
    );

    // The same test is sensitive: the untempered distribution fails it.
    let wrong = expected(&logits, k, p, 1.0);
    let chi2_wrong = chi_square(&counts, &wrong, n);
    assert!(
        chi2_wrong > 100.0,
        "chi2 against the wrong distribution: {chi2_wrong:.1}"
    );
}
