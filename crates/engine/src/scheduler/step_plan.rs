//! A step's plan: which generations feed which rows.

use std::ops::Range;

use minfer_sampler::GrammarLoan;

use crate::runtime::Batch;

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
    pub(super) starved: Vec<usize>,
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

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.batch.clear();
        self.decode_rows = 0;
        self.starved.clear();
        debug_assert!(self.loans.is_empty(), "every lent grammar came back");
    }
}
