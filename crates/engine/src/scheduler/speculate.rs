//! Speculation in the scheduler: guesses chosen before a step, checked
//! row by row after it.

use minfer_text::Tokenizer;

use super::gen::{Gen, Phase, Stash};
use super::spec_state::{GenSpec, Source, DRAFT_ALPHA, PROBE_FIRST, PROBE_MAX};
use super::state::Scheduler;
use super::step_plan::{Feed, Planned};
use crate::error::Result;
use crate::generate::StopReason;
use crate::runtime::SeqId;
use crate::spec::plan::{self, Candidate, DraftCost};
use crate::spec::{lookup, DraftRequest, SpecConfig, SpecStats, Speculation};

impl Scheduler {
    /// Turns speculative decoding on (`Some`) or off (`None`) for the
    /// decode steps from now on. The answers stay the same either way.
    pub fn set_speculation(&mut self, mut spec: Option<Speculation>) {
        if let Some(s) = spec.as_mut() {
            // One graph per check length besides the usual ones.
            let keep = minfer_graph::DEFAULT_CAPACITY + s.cfg.draft_max + 1;
            self.rt.keep_graphs(keep);
            if let Some(d) = s.draft.as_mut() {
                d.keep_graphs(keep);
            }
        }
        let old = std::mem::replace(&mut self.spec.spec, spec);
        for g in &mut self.gens {
            // Draft sequences lived on the old draft runtime.
            g.spec.draft_seq = None;
        }
        drop(old);
    }

    /// Turns speculative decoding off and hands its settings and draft
    /// model back (to turn it on again later without reloading).
    pub fn take_speculation(&mut self) -> Option<Speculation> {
        for g in &mut self.gens {
            g.spec.draft_seq = None;
        }
        self.spec.spec.take()
    }

    /// The speculation in use.
    pub fn speculation(&self) -> Option<&Speculation> {
        self.spec.spec.as_ref()
    }

    /// Speculation counters over every generation so far (running ones
    /// included).
    pub fn spec_stats(&self) -> SpecStats {
        self.spec.totals
    }

    /// Overwrites the freed cells with NaN after every rollback of rejected
    /// guesses: a testing aid that proves they are never read again (it
    /// costs a write of every free cell per step).
    pub fn set_poison_rejected(&mut self, on: bool) {
        self.spec.poison = on;
    }

    /// Chooses the guesses of every decoding generation for the coming
    /// step, in at most `room` cells and `budget` rows (the decode rows
    /// themselves included).
    pub(super) fn propose(&mut self, room: usize, budget: usize) {
        let Some(cfg) = self.spec.spec.as_ref().map(|s| s.cfg) else {
            return;
        };
        self.candidates(&cfg);
        let st = &mut self.spec;
        let n_dec = st.idx.len();
        if n_dec == 0 {
            return;
        }
        if cfg.adaptive {
            let draft = DraftCost {
                per_token: st.draft_secs,
            };
            plan::plan(&st.cost, n_dec, &st.cands, draft, &mut st.gains, &mut st.ks);
        } else {
            st.ks.clear();
            st.ks.extend(st.cands.iter().map(|c| c.cap));
        }
        let spare = room.saturating_sub(n_dec).min(budget.saturating_sub(n_dec));
        if self.allot(&cfg, spare) {
            self.run_draft(cfg.p_min);
        }
    }

    /// Finds each decoding generation's guesses: a lookup match, or the
    /// draft model's turn; fills the candidates the plan weighs.
    fn candidates(&mut self, cfg: &SpecConfig) {
        let st = &mut self.spec;
        let has_draft = st.spec.as_ref().is_some_and(|s| s.draft.is_some());
        let n_ctx = self.rt.n_ctx() as usize;
        st.idx.clear();
        st.cands.clear();
        for (i, g) in self.gens.iter_mut().enumerate() {
            let gs = &mut g.spec;
            gs.drafts.clear();
            gs.source = None;
            if !matches!(g.phase, Phase::Decode { .. }) {
                continue;
            }
            st.idx.push(i);
            let hist = g.gate.history();
            // The entry holds the sampled token and the guesses; every
            // guess but the last may become a generated token.
            let cap = cfg
                .draft_max
                .min(n_ctx.saturating_sub(hist.len()))
                .min(g.gate.remaining().saturating_sub(1));
            let mut cand = Candidate {
                rate: 0.0,
                cap: 0,
                costly: false,
            };
            if cap > 0 && cfg.lookup_max > 0 {
                let n = lookup::propose(hist, cfg.lookup_max, cap, &mut gs.drafts);
                if n > 0 {
                    gs.source = Some(Source::Lookup(n));
                    cand = Candidate {
                        rate: gs.lookup_acc[n].rate(),
                        cap: gs.drafts.len(),
                        costly: false,
                    };
                }
            }
            if cap > 0 && gs.source.is_none() && has_draft {
                gs.source = Some(Source::Draft);
                cand = Candidate {
                    rate: gs.draft_acc.rate(),
                    cap,
                    costly: true,
                };
            }
            st.cands.push(cand);
        }
    }

    /// Gives each candidate the number of guesses the plan chose, within
    /// `spare` rows, with the probes and `draft_min`; returns whether the
    /// draft model has guesses to make.
    fn allot(&mut self, cfg: &SpecConfig, mut spare: usize) -> bool {
        let st = &mut self.spec;
        let mut any_draft = false;
        // Beside other streams the costs, not the odds, keep guesses off:
        // a probe there would only slow the batch.
        let alone = st.idx.len() == 1;
        for (j, &i) in st.idx.iter().enumerate() {
            let gs = &mut self.gens[i].spec;
            let mut k = st.ks[j];
            match gs.source {
                Some(Source::Draft) if k == 0 => {
                    gs.idle += 1;
                    if alone && gs.idle >= gs.probe_wait {
                        k = 1;
                        gs.probe_wait = (gs.probe_wait * 2).min(PROBE_MAX);
                    }
                }
                Some(Source::Lookup(n)) if k == 0 => gs.shadow = Some((gs.drafts[0], n)),
                _ => {}
            }
            if k < cfg.draft_min {
                k = 0;
            }
            k = k.min(spare);
            spare -= k;
            match gs.source {
                _ if k == 0 => {
                    gs.drafts.clear();
                    gs.source = None;
                }
                Some(Source::Draft) => {
                    gs.idle = 0;
                    gs.want = k;
                    any_draft = true;
                }
                _ => gs.drafts.truncate(k),
            }
        }
        any_draft
    }

    /// Has the draft model guess for every generation whose turn it is.
    fn run_draft(&mut self, p_min: f32) {
        let st = &mut self.spec;
        let Some(draft) = st.spec.as_mut().and_then(|s| s.draft.as_mut()) else {
            return;
        };
        let mut reqs: Vec<DraftRequest> = self
            .gens
            .iter_mut()
            .filter(|g| g.spec.source == Some(Source::Draft))
            .map(|g| {
                let GenSpec {
                    draft_seq,
                    drafts,
                    want,
                    ..
                } = &mut g.spec;
                DraftRequest {
                    seq: draft_seq,
                    tokens: g.gate.history(),
                    k: *want,
                    p_min,
                    out: drafts,
                }
            })
            .collect();
        let t_draft = crate::trace::rec::start();
        let (secs, steps) = draft.draft(&mut reqs);
        drop(reqs);
        crate::trace::rec::end(t_draft, "engine", "draft", steps as u64);
        if steps > 0 {
            let per = secs / steps as f64;
            st.draft_secs = if st.draft_secs == 0.0 {
                per
            } else {
                st.draft_secs + DRAFT_ALPHA * (per - st.draft_secs)
            };
            st.totals.draft_steps += steps as u64;
        }
        for g in &mut self.gens {
            if g.spec.source == Some(Source::Draft) && g.spec.drafts.is_empty() {
                // A drafting step spent for no guess (all under
                // `p_min`) counts as a wrong guess, so that a draft that
                // keeps doing that is switched off.
                g.spec.draft_acc.record(0, true);
                g.spec.source = None;
            }
        }
    }

    /// Feeds the draft model the prompt chunks a step is about to
    /// evaluate, so that a prompt is read by both models chunk by chunk
    /// (no step later stalls on the draft reading a whole prompt).
    pub(super) fn prefill_draft(&mut self, plan: &[Planned]) {
        let Some(draft) = self.spec.spec.as_mut().and_then(|s| s.draft.as_mut()) else {
            return;
        };
        let mut wanted = vec![None; self.gens.len()];
        for p in plan {
            if let Feed::Prompt(r) = &p.feed {
                wanted[p.gen] = Some(r.end);
            }
        }
        let mut pairs: Vec<(&mut Option<SeqId>, &[u32])> = self
            .gens
            .iter_mut()
            .zip(&wanted)
            .filter_map(|(g, w)| {
                let end = (*w)?;
                // In prefill the gate's history is what came before the
                // prompt, then the prompt.
                let hist = g.gate.history();
                let upto = hist.len() - g.prompt.len() + end;
                Some((&mut g.spec.draft_seq, &hist[..upto]))
            })
            .collect();
        if !pairs.is_empty() {
            let t = crate::trace::rec::start();
            draft.feed(&mut pairs);
            crate::trace::rec::end(t, "engine", "draft_prefill", pairs.len() as u64);
        }
    }

    /// Records a decode-only step's time for the cost model.
    pub(super) fn record_step(&mut self, rows: usize, secs: f64) {
        if self.spec.spec.is_some() {
            self.spec.cost.record(rows, secs);
        }
    }

    /// Gives back the cells of rejected guesses: `(sequence, rows)` pairs.
    pub(super) fn roll_back(&mut self, drops: &[(SeqId, usize)]) {
        for &(seq, rows) in drops {
            let Ok(n) = self.rt.n_past(seq) else {
                continue;
            };
            // The rows were appended by the step just run.
            let _ = self.rt.rollback(seq, n - rows as u32);
        }
        if self.spec.poison && !drops.is_empty() {
            let _ = self.rt.poison_free_cells(f32::NAN);
        }
    }

    /// Hands a finished generation's draft sequence back.
    pub(super) fn end_spec(&mut self, i: usize) {
        if self.spec.spec.is_some() && tracing::enabled!(tracing::Level::DEBUG) {
            let ms = |r: usize| self.spec.cost.estimate(r).map_or(f64::NAN, |t| t * 1e3);
            tracing::debug!(
                drafted = self.gens[i].spec.stats.drafted,
                accepted = self.gens[i].spec.stats.accepted,
                "speculation: draft step {:.2} ms; step of 1..6 rows {:.1} {:.1} {:.1} {:.1} {:.1} {:.1} ms",
                self.spec.draft_secs * 1e3,
                ms(1),
                ms(2),
                ms(3),
                ms(4),
                ms(5),
                ms(6)
            );
        }
        let gs = &mut self.gens[i].spec;
        if let Some(seq) = gs.draft_seq.take() {
            if let Some(d) = self.spec.spec.as_mut().and_then(|s| s.draft.as_mut()) {
                d.release(seq);
            }
        }
    }
}

impl Gen {
    /// Samples from the step's rows for this generation (the sampled
    /// token's, then one per guess), going on while each sampled token is
    /// the guessed one. Returns what the last sample decided and how many
    /// rows were not used (their cells must be rolled back); the check's
    /// counts are added to `totals` too.
    pub(super) fn advance_guessed(
        &mut self,
        rows: &[f32],
        n_vocab: usize,
        tok: &Tokenizer,
        n_ctx: u32,
        stash: &mut Stash,
        totals: &mut SpecStats,
    ) -> (Result<Option<StopReason>>, usize) {
        let n = rows.len() / n_vocab;
        let mut used = 0;
        let mut r = Ok(None);
        for (j, row) in rows.chunks_exact(n_vocab).enumerate() {
            used = j + 1;
            r = self.advance(row, tok, n_ctx, stash);
            let sampled = match (&r, &self.phase) {
                (Ok(None), Phase::Decode { next }) => Some(*next),
                _ => None,
            };
            if j == 0 {
                if let Some((guess, ng)) = self.spec.shadow.take() {
                    if let Some(t) = sampled {
                        self.spec.lookup_acc[ng].record(usize::from(t == guess), t != guess);
                    }
                }
            }
            if sampled.is_none() || self.spec.drafts.get(j).copied() != sampled {
                break;
            }
        }
        let k = self.spec.drafts.len();
        if k > 0 {
            let accepted = used - 1;
            // A stop is no verdict on the guess after it.
            let rejected = accepted < k && matches!(r, Ok(None));
            match self.spec.source {
                Some(Source::Lookup(ng)) => self.spec.lookup_acc[ng].record(accepted, rejected),
                Some(Source::Draft) => {
                    self.spec.draft_acc.record(accepted, rejected);
                    if accepted > 0 {
                        self.spec.probe_wait = PROBE_FIRST;
                    }
                }
                None => {}
            }
            let check = SpecStats {
                drafted: k as u64,
                accepted: accepted as u64,
                checks: 1,
                draft_steps: 0,
            };
            self.spec.stats.add(&check);
            totals.add(&check);
            crate::trace::rec::counter("spec_drafted", totals.drafted as f64);
            crate::trace::rec::counter("spec_accepted", totals.accepted as f64);
        }
        self.spec.drafts.clear();
        self.spec.source = None;
        (r, n - used)
    }
}
