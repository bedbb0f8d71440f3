//! Running one step of the [`Scheduler`]: plan, forward pass, sampling,
//! and the events that follow.

use std::time::Instant;

use super::gen::{Outcomes, Phase};
use super::masks::MaskHelper;
use super::read::{self, Reader};
use super::state::Scheduler;
use super::step_plan::StepPlan;
use super::types::Event;
use crate::error::Result;
use crate::generate::{GenerationStats, StopReason};

impl Scheduler {
    /// Ends generation `i` with `reason`: flushes held-back text, queues
    /// the stats and hands the sequence back.
    pub(super) fn finish(&mut self, i: usize, reason: StopReason) {
        let leader = self.gens[i].id;
        let prefilling = matches!(self.gens[i].phase, Phase::Prefill { .. });
        self.finish_one(i, reason);
        if prefilling {
            // Its followers would wait forever for the prompt.
            for j in 0..self.gens.len() {
                if matches!(self.gens[j].phase, Phase::Follow { leader: l } if l == leader) {
                    self.finish_one(j, reason);
                }
            }
        }
    }

    fn finish_one(&mut self, i: usize, reason: StopReason) {
        self.end_spec(i);
        let g = &mut self.gens[i];
        let mut flushed = Vec::new();
        g.gate.finish(reason, &mut |b: &[u8]| {
            flushed.extend_from_slice(b);
            true
        });
        if !flushed.is_empty() {
            g.events.push_back(Event::Text(flushed));
        }
        let t_first = g.t_first.unwrap_or_else(Instant::now);
        let stats = GenerationStats {
            prompt_tokens: g.prompt.len(),
            generated_tokens: g.gate.tokens.len(),
            prefill_secs: t_first.duration_since(g.t_submit).as_secs_f64(),
            decode_secs: t_first.elapsed().as_secs_f64(),
            stop_reason: reason,
            graph_builds: self.rt.graph_builds() - g.builds_before,
            tokens: std::mem::take(&mut g.gate.tokens),
            spec: g.spec.stats,
        };
        g.events.push_back(Event::Done(stats));
        g.phase = Phase::Done;
        if g.owns_seq {
            // The handle is this generation's own; it cannot be stale.
            let _ = self.rt.release(g.seq);
        }
    }

    /// Ends the generations `outcomes` says stopped (a failed one as
    /// cancelled) and returns the first failure.
    fn settle(&mut self, outcomes: Outcomes) -> Result<()> {
        for (i, reason) in outcomes.ended.into_iter().rev() {
            self.finish(i, reason);
        }
        outcomes.failure.map_or(Ok(()), Err)
    }

    /// Draws the first token of every generation that starts from saved
    /// logits ([`submit_sampled`](Scheduler::submit_sampled)); returns
    /// whether there was any.
    fn sample_saved(&mut self) -> Result<bool> {
        let n_ctx = self.rt.n_ctx();
        let mut outcomes = Outcomes::default();
        let mut any = false;
        for i in 0..self.gens.len() {
            if !matches!(self.gens[i].phase, Phase::Sample { .. }) {
                continue;
            }
            any = true;
            // `advance` sets the next phase when the generation goes on.
            let Phase::Sample { logits } = std::mem::replace(&mut self.gens[i].phase, Phase::Done)
            else {
                continue;
            };
            let r = self.gens[i].advance(&logits, &self.tok, n_ctx, &mut self.stash);
            outcomes.record(i, r);
        }
        self.settle(outcomes)?;
        Ok(any)
    }

    /// Runs one step: a decode row for every generation that has a token
    /// to evaluate, then prompt chunks while the step has room (at most
    /// `n_batch` rows in all), as one batch. Returns `false` when no
    /// generation had anything to run.
    ///
    /// A generation that cannot get a cell ends with
    /// [`StopReason::CacheFull`]; the others go on.
    ///
    /// # Errors
    /// An error of the forward pass itself (the runtime restores every
    /// sequence; the generations of the step are ended with
    /// [`StopReason::Cancelled`] so a retry does not loop on the same
    /// failure).
    pub fn step(&mut self) -> Result<bool> {
        let t = crate::trace::rec::start();
        let r = self.step_inner();
        crate::trace::rec::end(t, "engine", "step", 0);
        r
    }

    fn step_inner(&mut self) -> Result<bool> {
        let sampled = self.sample_saved()?;
        // Taken out for the step (leaving empty vectors, which allocate
        // nothing), so that it can be read while the generations change.
        let mut plan = std::mem::take(&mut self.plan);
        self.plan_rows(&mut plan);
        let r = if plan.is_empty() {
            Ok(self.end_stuck() || sampled)
        } else {
            self.prefill_draft(&plan.entries);
            self.run_plan(&mut plan).map(|()| true)
        };
        self.plan = plan;
        r
    }

    /// Runs a planned step, then samples every entry that asked for it:
    /// the forward pass, with the grammar masks of the generations that
    /// sample after it computed on the helper thread meanwhile, then the
    /// reading of its logits.
    fn run_plan(&mut self, plan: &mut StepPlan) -> Result<()> {
        let lent = self.lend_grammars(plan);
        let (n_ctx, n_vocab) = (self.rt.n_ctx(), self.rt.n_vocab());
        let builds_before = self.rt.graph_builds();
        let t_step = Instant::now();
        let stepped = self.rt.step_batch(&plan.batch);
        if lent {
            let helper = self.masks.as_ref().expect("grammars were lent to it");
            plan.loans = helper.finish();
            for (i, loan) in plan.loans.drain(..) {
                self.gens[i].gate.restore_grammar(loan);
            }
        }
        let out = match stepped {
            Ok(out) => out,
            Err(e) => {
                for p in plan.entries.iter().rev() {
                    self.finish(p.gen, StopReason::Cancelled);
                }
                return Err(e);
            }
        };
        let step_secs = t_step.elapsed().as_secs_f64();
        let reader = Reader {
            gens: &mut self.gens,
            tok: &self.tok,
            stash: &mut self.stash,
            totals: &mut self.spec.totals,
            n_ctx,
            n_vocab,
        };
        let read::Read {
            mut outcomes,
            forks,
            drops,
        } = reader.read(&plan.entries, &out);
        // Before `settle`, which releases the sequences of ended generations.
        self.roll_back(&drops);
        // A step that built a graph says nothing about the cost of its rows.
        if plan.decode_only() && self.rt.graph_builds() == builds_before {
            self.record_step(plan.decode_rows, step_secs);
        }
        // Before `settle`, which may release a leader that ended at once.
        for (i, logits) in forks {
            self.start_followers(i, &logits, &mut outcomes);
        }
        self.settle(outcomes)
    }

    /// Lends the grammar of every generation that samples after this step
    /// to the helper thread (started on first use), which computes their
    /// next masks while the forward pass runs; returns whether it got any.
    /// Without a helper thread the masks are computed when sampling.
    fn lend_grammars(&mut self, plan: &mut StepPlan) -> bool {
        for p in plan.entries.iter().filter(|p| p.samples) {
            if let Some(loan) = self.gens[p.gen].gate.lend_grammar() {
                plan.loans.push((p.gen, loan));
            }
        }
        if plan.loans.is_empty() {
            return false;
        }
        if self.masks.is_none() {
            match MaskHelper::spawn() {
                Ok(h) => self.masks = Some(h),
                Err(e) => tracing::debug!("no grammar helper thread: {e}"),
            }
        }
        match &self.masks {
            Some(helper) => {
                helper.start(std::mem::take(&mut plan.loans));
                true
            }
            None => {
                for (i, loan) in plan.loans.drain(..) {
                    self.gens[i].gate.restore_grammar(loan);
                }
                false
            }
        }
    }

    /// Forks the sequence of generation `i`, whose prompt is now in the
    /// cache, for each generation following it, and draws their first
    /// tokens from the prompt's `logits`.
    fn start_followers(&mut self, i: usize, logits: &[f32], outcomes: &mut Outcomes) {
        let leader = self.gens[i].id;
        let seq = self.gens[i].seq;
        let n_ctx = self.rt.n_ctx();
        for j in 0..self.gens.len() {
            if !matches!(self.gens[j].phase, Phase::Follow { leader: l } if l == leader) {
                continue;
            }
            match self.rt.fork(seq) {
                Ok(child) => {
                    let f = &mut self.gens[j];
                    f.seq = child;
                    f.owns_seq = true;
                    outcomes.record(j, f.advance(logits, &self.tok, n_ctx, &mut self.stash));
                }
                Err(_) => outcomes.ended.push((j, StopReason::CacheFull)),
            }
        }
        outcomes.ended.sort_by_key(|&(j, _)| j);
    }
}
