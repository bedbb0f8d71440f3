//! How many guessed tokens a step should check: the adaptive rule.
//!
//! A step of `r` rows costs `T(r)`; checking `k` guesses of a sequence whose
//! guesses are accepted with probability `a` each (given the ones before
//! were) yields `1 + a + a² + … + aᵏ` tokens on average instead of one.
//! The rule picks the number of guess rows that maximizes the expected
//! tokens per second of the whole step (the guesses with the best odds
//! first, across sequences), counting the drafting time, and none when no
//! number beats plain decoding. `T` is measured as the scheduler runs
//! (per row count, smoothed), so the rule follows the machine: on a CPU
//! where extra rows cost compute, few guesses pay; where rows are nearly
//! free (a GPU, a memory-bound model), many do.

/// Rows whose step time is tracked; larger steps are estimated from the
/// largest tracked ones.
pub const MAX_TRACKED_ROWS: usize = 96;

/// The acceptance odds of one source of guesses: accepted guesses against
/// rejections, both decaying so that the estimate follows the text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Acceptance {
    accepted: f32,
    rejected: f32,
}

/// Weight of the prior in an [`Acceptance`]: a few observations outweigh it.
const PRIOR_WEIGHT: f32 = 2.0;
/// Per-observation decay of the counts: about the last 30 checks count.
const DECAY: f32 = 0.97;

impl Acceptance {
    /// Odds that start at `prior` (between 0 and 1).
    pub fn new(prior: f32) -> Acceptance {
        let p = prior.clamp(0.0, 1.0);
        Acceptance {
            accepted: p * PRIOR_WEIGHT,
            rejected: (1.0 - p) * PRIOR_WEIGHT,
        }
    }

    /// Records one check: `accepted` guesses in a row were right, and then
    /// one was wrong (`rejected`), or all were right (`!rejected`).
    pub fn record(&mut self, accepted: usize, rejected: bool) {
        self.accepted = self.accepted * DECAY + accepted as f32;
        self.rejected = self.rejected * DECAY + f32::from(u8::from(rejected));
    }

    /// The estimated probability that the next guess is right: for a run of
    /// independent guesses, accepted / (accepted + rejections) is the
    /// maximum-likelihood value.
    pub fn rate(&self) -> f32 {
        let n = self.accepted + self.rejected;
        if n > 0.0 {
            self.accepted / n
        } else {
            0.0
        }
    }
}

/// Measured step times by row count.
#[derive(Debug, Clone)]
pub struct CostTable {
    /// Smoothed seconds of a step of `r` rows at `r - 1`; 0 when unmeasured.
    secs: Vec<f64>,
}

/// Weight of a new measurement in the smoothed time.
const ALPHA: f64 = 0.25;
/// Extra cost per row assumed before two row counts are measured, as a
/// fraction of a one-row step (a conservative CPU figure: a step of 5 rows
/// is taken to cost 2.2 of one).
const PRIOR_ROW_COST: f64 = 0.3;

impl Default for CostTable {
    fn default() -> Self {
        CostTable {
            secs: vec![0.0; MAX_TRACKED_ROWS],
        }
    }
}

impl CostTable {
    /// Records that a step of `rows` rows took `secs`.
    pub fn record(&mut self, rows: usize, secs: f64) {
        if rows == 0 || rows > MAX_TRACKED_ROWS || secs.is_nan() || secs <= 0.0 {
            return;
        }
        let s = &mut self.secs[rows - 1];
        *s = if *s == 0.0 {
            secs
        } else {
            *s + ALPHA * (secs - *s)
        };
    }

    /// Whether some step of at least `rows` rows has been measured (so the
    /// estimate for `rows` is an interpolation, not an extrapolation).
    pub fn known_up_to(&self, rows: usize) -> bool {
        (rows.max(1)..=MAX_TRACKED_ROWS).any(|r| self.secs[r - 1] > 0.0)
    }

    /// Whether a step of `rows` rows has been measured.
    pub fn measured(&self, rows: usize) -> bool {
        (1..=MAX_TRACKED_ROWS).contains(&rows) && self.secs[rows - 1] > 0.0
    }

    /// The estimated time of a step of `rows` rows: measured, else
    /// interpolated between the nearest measured counts, else extrapolated
    /// along the slope of the nearest two (or the prior slope); `None` when
    /// nothing is measured yet.
    pub fn estimate(&self, rows: usize) -> Option<f64> {
        let rows = rows.max(1);
        if rows <= MAX_TRACKED_ROWS && self.secs[rows - 1] > 0.0 {
            return Some(self.secs[rows - 1]);
        }
        let known = |r: usize| self.measured(r);
        let below = (1..rows.min(MAX_TRACKED_ROWS + 1))
            .rev()
            .find(|&r| known(r));
        let above = (rows + 1..=MAX_TRACKED_ROWS).find(|&r| known(r));
        let t = |r: usize| self.secs[r - 1];
        match (below, above) {
            (Some(b), Some(a)) => {
                let f = (rows - b) as f64 / (a - b) as f64;
                Some(t(b) + f * (t(a) - t(b)))
            }
            (Some(b), None) => {
                let slope = match (1..b).rev().find(|&r| known(r)) {
                    Some(b2) => ((t(b) - t(b2)) / (b - b2) as f64).max(0.0),
                    None => PRIOR_ROW_COST * t(b) / (1.0 + PRIOR_ROW_COST * (b - 1) as f64),
                };
                Some(t(b) + slope * (rows - b) as f64)
            }
            (None, Some(a)) => {
                // Fewer rows never cost more; scale down by the prior.
                let unit = t(a) / (1.0 + PRIOR_ROW_COST * (a - 1) as f64);
                Some(unit * (1.0 + PRIOR_ROW_COST * (rows - 1) as f64))
            }
            (None, None) => None,
        }
    }
}

/// One sequence's say in a step's plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Odds that each guess is right.
    pub rate: f32,
    /// Most guesses this sequence may have checked.
    pub cap: usize,
    /// Whether its guesses cost a drafting step each ([`DraftCost`]).
    pub costly: bool,
}

/// The drafting cost a plan must count.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DraftCost {
    /// Seconds of one drafting step (one token for every drafting
    /// sequence); 0 for guesses that cost nothing to make.
    pub per_token: f64,
}

/// Chooses how many guesses each candidate gets (written to `out`, one per
/// candidate), for a step that has `base` rows besides them: the count that
/// maximizes expected tokens per second, none when nothing beats plain
/// decoding. `gains` is scratch.
pub fn plan(
    cost: &CostTable,
    base: usize,
    cands: &[Candidate],
    draft: DraftCost,
    gains: &mut Vec<(f32, usize)>,
    out: &mut Vec<usize>,
) {
    out.clear();
    out.resize(cands.len(), 0);
    gains.clear();
    for (i, c) in cands.iter().enumerate() {
        let mut g = 1.0f32;
        for _ in 0..c.cap {
            g *= c.rate;
            if g < 1e-3 {
                break;
            }
            gains.push((g, i));
        }
    }
    if gains.is_empty() {
        return;
    }
    // Best odds first; equal ones in candidate order, so plans are
    // deterministic.
    gains.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    // Plain steps of this size are measured first: every choice is judged
    // against them.
    if !cost.measured(base) {
        return;
    }
    let Some(t0) = cost.estimate(base) else {
        return;
    };
    let tokens0 = base as f64;
    let mut best = (tokens0 / t0, 0usize);
    let mut tokens = tokens0;
    let mut depth = vec![0usize; cands.len()];
    let mut longest = 0;
    for (m, &(g, i)) in gains.iter().enumerate() {
        tokens += f64::from(g);
        depth[i] += 1;
        if cands[i].costly {
            longest = longest.max(depth[i]);
        }
        // Beside other decode rows only measured costs (or ones between
        // measured counts) are trusted: there a wrong guess at the cost of
        // a row slows every stream of the batch, so the rule does not
        // explore. A lone stream may explore along the prior slope.
        if base > 1 && !cost.known_up_to(base + m + 1) {
            break;
        }
        let Some(t) = cost.estimate(base + m + 1) else {
            break;
        };
        let rate = tokens / (t + draft.per_token * longest as f64);
        if rate > best.0 {
            best = (rate, m + 1);
        }
    }
    for &(_, i) in &gains[..best.1] {
        out[i] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &[(usize, f64)]) -> CostTable {
        let mut t = CostTable::default();
        for &(r, s) in pairs {
            t.record(r, s);
        }
        t
    }

    #[test]
    fn acceptance_follows_the_observations() {
        let mut a = Acceptance::new(0.5);
        assert!((a.rate() - 0.5).abs() < 1e-6);
        for _ in 0..50 {
            a.record(3, true);
        }
        assert!((a.rate() - 0.75).abs() < 0.02, "{}", a.rate());
        for _ in 0..200 {
            a.record(0, true);
        }
        assert!(a.rate() < 0.02, "{}", a.rate());
    }

    #[test]
    fn estimates_interpolate_and_extrapolate() {
        let t = table(&[(1, 1.0), (5, 3.0)]);
        assert_eq!(t.estimate(1), Some(1.0));
        assert_eq!(t.estimate(3), Some(2.0));
        assert_eq!(t.estimate(9), Some(5.0));
        assert!(CostTable::default().estimate(4).is_none());
        // Nothing is guessed before a plain step of the size is measured.
        let c = Candidate {
            rate: 0.9,
            cap: 4,
            costly: false,
        };
        assert_eq!(run(&table(&[(2, 1.0)]), 1, &[c], 0.0), [0]);
        let only = table(&[(4, 1.9)]);
        assert!((only.estimate(1).unwrap() - 1.0).abs() < 1e-9);
        assert!(only.estimate(6).unwrap() > 1.9);
    }

    fn run(cost: &CostTable, base: usize, cands: &[Candidate], draft: f64) -> Vec<usize> {
        let (mut g, mut out) = (Vec::new(), Vec::new());
        plan(
            cost,
            base,
            cands,
            DraftCost { per_token: draft },
            &mut g,
            &mut out,
        );
        out
    }

    #[test]
    fn cheap_rows_and_good_odds_draft_deep() {
        // Rows nearly free (memory-bound): many guesses pay.
        let cost = table(&[(1, 1.0), (17, 1.2)]);
        let k = run(
            &cost,
            1,
            &[Candidate {
                rate: 0.9,
                cap: 16,
                costly: false,
            }],
            0.0,
        );
        assert!(k[0] >= 12, "{k:?}");
    }

    #[test]
    fn costly_rows_or_bad_odds_switch_off() {
        // Each row costs as much as the first: guessing never pays.
        let linear = table(&[(1, 1.0), (2, 2.0), (8, 8.0)]);
        assert_eq!(
            run(
                &linear,
                1,
                &[Candidate {
                    rate: 0.9,
                    cap: 8,
                    costly: false
                }],
                0.0
            ),
            [0]
        );
        let cpu = table(&[(1, 1.0), (9, 3.0)]);
        assert_eq!(
            run(
                &cpu,
                1,
                &[Candidate {
                    rate: 0.1,
                    cap: 8,
                    costly: false
                }],
                0.0
            ),
            [0]
        );
        // A draft model that costs as much as the target never pays.
        assert_eq!(
            run(
                &cpu,
                1,
                &[Candidate {
                    rate: 0.9,
                    cap: 8,
                    costly: true
                }],
                1.0
            ),
            [0]
        );
    }

    #[test]
    fn a_full_batch_leaves_no_room_for_guesses() {
        // 16 decode rows already: the step is compute-bound, each further
        // row costs a sixteenth of it, and 0.5 odds do not pay for that.
        let cost = table(&[(1, 1.0), (16, 4.0), (32, 8.0)]);
        let c = Candidate {
            rate: 0.5,
            cap: 4,
            costly: false,
        };
        assert_eq!(run(&cost, 16, &[c; 16], 0.0), vec![0; 16]);
        // Alone, the same sequence's guesses do pay.
        assert!(run(&cost, 1, &[c], 0.0)[0] >= 1);
    }

    #[test]
    fn beside_other_streams_only_measured_costs_count() {
        let c = Candidate {
            rate: 0.95,
            cap: 4,
            costly: false,
        };
        // Four decode rows measured, nothing above: no guess.
        let cost = table(&[(1, 1.0), (4, 1.4)]);
        assert_eq!(run(&cost, 4, &[c; 4], 0.0), vec![0; 4]);
        // A measured 8-row step that is cheap enough: guesses up to it.
        let cost = table(&[(1, 1.0), (4, 1.4), (8, 1.6)]);
        let k = run(&cost, 4, &[c; 4], 0.0);
        assert!(
            k.iter().sum::<usize>() >= 1 && k.iter().sum::<usize>() <= 4,
            "{k:?}"
        );
        // Alone, a stream explores past what is measured.
        assert!(run(&table(&[(1, 1.0)]), 1, &[c], 0.0)[0] >= 1);
    }

    #[test]
    fn better_odds_get_the_rows() {
        let cost = table(&[(1, 1.0), (2, 1.15), (3, 1.3), (5, 2.5)]);
        let k = run(
            &cost,
            2,
            &[
                Candidate {
                    rate: 0.2,
                    cap: 4,
                    costly: false,
                },
                Candidate {
                    rate: 0.95,
                    cap: 4,
                    costly: false,
                },
            ],
            0.0,
        );
        assert_eq!(k[0], 0, "{k:?}");
        assert!(k[1] >= 1, "{k:?}");
    }
}
