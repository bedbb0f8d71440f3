//! Planning a step: which generations feed which rows.

use std::ops::Range;

use minfer_sampler::GrammarLoan;

use super::gen::Phase;
use super::Scheduler;
use crate::generate::StopReason;
use crate::runtime::{Batch, Wanted};

/// What one entry of a step feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Feed {
    /// The generation's sampled token, then its guesses.
    Decode,
    /// Prompt tokens `range` of the generation.
    Prompt(Range<usize>),
}

/// One entry of a step's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Planned {
    /// The generation (its index in the scheduler's list).
    pub(super) gen: usize,
    /// What the entry feeds.
    pub(super) feed: Feed,
    /// Whether a token is sampled from the entry's logits: a decode entry,
    /// or a prompt's last chunk.
    pub(super) samples: bool,
}

/// A step's plan, kept on the scheduler and refilled every step (its
/// buffers are cleared, not reallocated).
#[derive(Debug, Default)]
pub(super) struct StepPlan {
    /// The entries, in the batch's order.
    pub(super) entries: Vec<Planned>,
    /// What the runtime evaluates: entry `k` is `entries[k]`'s tokens.
    pub(super) batch: Batch,
    /// Rows of the decode entries (sampled tokens and guesses).
    pub(super) decode_rows: usize,
    /// Decoding generations that found no free cell.
    starved: Vec<usize>,
    /// Grammars lent to the mask helper during the forward pass, with the
    /// generation each belongs to.
    pub(super) loans: Vec<(usize, GrammarLoan)>,
}

impl StepPlan {
    /// Whether the step has nothing to run.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether every entry is a decode entry.
    pub(super) fn decode_only(&self) -> bool {
        self.entries.iter().all(|p| p.feed == Feed::Decode)
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.batch.clear();
        self.decode_rows = 0;
        self.starved.clear();
        debug_assert!(self.loans.is_empty(), "every lent grammar came back");
    }
}

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
