//! Reading a step's logits back into the generations.

use minfer_text::Tokenizer;

use super::gen::{Gen, Outcomes, Phase, Stash};
use super::step_plan::{Feed, Planned};
use super::types::Event;
use crate::runtime::{SeqId, StepLogits};
use crate::spec::SpecStats;

/// What sampling a step's outputs decided.
pub(super) struct Read {
    /// Which generations ended, and the first failure.
    pub(super) outcomes: Outcomes,
    /// Leaders whose followers start from their prompt's logits.
    pub(super) forks: Vec<(usize, Vec<f32>)>,
    /// Rows of rejected guesses to roll back, per sequence.
    pub(super) drops: Vec<(SeqId, usize)>,
}

/// What sampling a step's outputs needs of the scheduler.
pub(super) struct Reader<'a> {
    pub(super) gens: &'a mut [Gen],
    pub(super) tok: &'a Tokenizer,
    pub(super) stash: &'a mut Stash,
    pub(super) totals: &'a mut SpecStats,
    pub(super) n_ctx: u32,
    pub(super) n_vocab: usize,
}

impl Reader<'_> {
    /// Turns a step's logits into events: prompt scores, then a sample for
    /// every entry that asked for one (row by row through the guesses of a
    /// decode entry). Returns the outcomes, the leaders whose followers
    /// start from their prompt's logits, and the rows of rejected guesses
    /// to roll back, per sequence.
    pub(super) fn read(self, plan: &[Planned], out: &StepLogits) -> Read {
        let (n_ctx, n_vocab) = (self.n_ctx, self.n_vocab);
        let mut outcomes = Outcomes::default();
        let mut forks: Vec<(usize, Vec<f32>)> = Vec::new();
        let mut drops: Vec<(SeqId, usize)> = Vec::new();
        for (k, p) in plan.iter().enumerate() {
            let i = p.gen;
            let g = &mut self.gens[i];
            let Feed::Prompt(r) = &p.feed else {
                let (res, unused) = g.advance_guessed(
                    out.entry(k),
                    n_vocab,
                    self.tok,
                    n_ctx,
                    self.stash,
                    self.totals,
                );
                if unused > 0 {
                    drops.push((g.seq, unused));
                }
                outcomes.record(i, res);
                continue;
            };
            g.phase = Phase::Prefill { fed: r.end };
            if let Some(top) = g.score_prompt {
                g.score_rows(r.clone(), out.entry(k), top, n_vocab);
                if p.samples {
                    let scores = std::mem::take(&mut g.prompt_scores);
                    g.events.push_back(Event::PromptLogprobs(scores));
                }
            }
            if !p.samples {
                continue;
            }
            let Some(logits) = out.last(k) else {
                continue;
            };
            let id = g.id;
            if self
                .gens
                .iter()
                .any(|f| matches!(f.phase, Phase::Follow { leader } if leader == id))
            {
                forks.push((i, logits.to_vec()));
            }
            let g = &mut self.gens[i];
            outcomes.record(i, g.advance(logits, self.tok, n_ctx, self.stash));
        }
        Read {
            outcomes,
            forks,
            drops,
        }
    }
}
