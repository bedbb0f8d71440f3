//! Planning a step: which generations feed which rows.

use super::gen::Phase;
use super::state::Scheduler;
use super::step_plan::{Feed, Planned, StepPlan};
use crate::generate::StopReason;
use crate::runtime::Wanted;

impl Scheduler {
    /// Plans a step into `plan`: a decode entry (the sampled token and its
    /// guesses) for every decoding generation, then prompt chunks while the
    /// step has room, at most `n_batch` rows in all. Generations that
    /// cannot get a cell end with [`StopReason::CacheFull`].
    pub(super) fn plan_rows(&mut self, plan: &mut StepPlan) {
        plan.clear();
        let budget_total = self.rt.config().n_batch;
        let mut room = self.rt.room();
        let mut budget = budget_total;
        self.propose(room, budget);
        for (i, g) in self.gens.iter_mut().enumerate() {
            let Phase::Decode { next } = g.phase else {
                continue;
            };
            if room == 0 {
                plan.starved.push(i);
                continue;
            }
            if budget == 0 {
                continue;
            }
            // The sampled token, then its guesses as far as they fit.
            g.spec.drafts.truncate((room - 1).min(budget - 1));
            let tokens = std::iter::once(next).chain(g.spec.drafts.iter().copied());
            plan.batch.push(g.seq, tokens, Wanted::All);
            plan.entries.push(Planned {
                gen: i,
                feed: Feed::Decode,
                samples: true,
            });
            let rows = 1 + g.spec.drafts.len();
            room -= rows;
            budget -= rows;
        }
        plan.decode_rows = budget_total - budget;
        for (i, g) in self.gens.iter().enumerate() {
            let Phase::Prefill { fed } = g.phase else {
                continue;
            };
            let take = (g.prompt.len() - fed).min(self.chunk).min(budget).min(room);
            if take == 0 {
                continue;
            }
            let end = fed + take;
            let last = end == g.prompt.len();
            let wanted = if g.score_prompt.is_some() {
                Wanted::All
            } else if last {
                Wanted::Last
            } else {
                Wanted::None
            };
            plan.batch
                .push(g.seq, g.prompt[fed..end].iter().copied(), wanted);
            plan.entries.push(Planned {
                gen: i,
                feed: Feed::Prompt(fed..end),
                samples: last,
            });
            room -= take;
            budget -= take;
        }
        for k in (0..plan.starved.len()).rev() {
            self.finish(plan.starved[k], StopReason::CacheFull);
        }
    }

    /// Ends the prompts that can never get room (nothing is decoding to
    /// free any) rather than let them wait forever; returns whether there
    /// was any.
    pub(super) fn end_stuck(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.gens.len() {
            if matches!(self.gens[i].phase, Phase::Prefill { .. }) {
                self.finish(i, StopReason::CacheFull);
                any = true;
            }
        }
        any
    }
}
