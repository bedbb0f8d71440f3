//! A step's entries: borrowed ([`BatchEntry`]) or owned and reused
//! ([`Batch`]), both read by the runtime through [`Entries`].

use std::ops::Range;

use super::types::SeqId;

/// One sequence's part of a step: `tokens` appended at its next positions,
/// and logits wanted for rows `first_out..` of them.
#[derive(Clone, Copy, Debug)]
pub struct BatchEntry<'a> {
    /// The sequence the tokens extend.
    pub seq: SeqId,
    /// Tokens, written at positions `n_past(seq)..`.
    pub tokens: &'a [u32],
    /// First row whose logits are returned; `tokens.len()` for none.
    pub first_out: usize,
}

impl<'a> BatchEntry<'a> {
    /// Logits of the last token only (a decode row, or a prompt's last chunk).
    pub fn last(seq: SeqId, tokens: &'a [u32]) -> Self {
        BatchEntry {
            seq,
            tokens,
            first_out: tokens.len().saturating_sub(1),
        }
    }

    /// Logits of every token (perplexity, speculative checks).
    pub fn all(seq: SeqId, tokens: &'a [u32]) -> Self {
        BatchEntry {
            seq,
            tokens,
            first_out: 0,
        }
    }

    /// No logits (a prompt chunk that is not the last).
    pub fn none(seq: SeqId, tokens: &'a [u32]) -> Self {
        BatchEntry {
            seq,
            tokens,
            first_out: tokens.len(),
        }
    }

    pub(super) fn n_out(&self) -> usize {
        self.tokens.len().saturating_sub(self.first_out)
    }
}

/// A step's entries, read one by one by the runtime.
pub(crate) trait Entries {
    /// How many entries there are.
    fn count(&self) -> usize;
    /// Entry `k` (`k < count()`).
    fn entry(&self, k: usize) -> BatchEntry<'_>;
}

impl Entries for [BatchEntry<'_>] {
    fn count(&self) -> usize {
        self.len()
    }

    fn entry(&self, k: usize) -> BatchEntry<'_> {
        self[k]
    }
}

/// Which rows of an entry return logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// The last row (a decode row, a prompt's last chunk).
    Last,
    /// Every row (a scored prompt, a decode row with its guesses).
    All,
    /// None (a prompt chunk that is not the last).
    None,
}

/// A step's entries that own their tokens, refilled step after step with
/// the same buffers: unlike a slice of [`BatchEntry`], it borrows nothing
/// from whoever planned the step, so it can be kept between steps.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    tokens: Vec<u32>,
    /// Per entry: the sequence, its range in `tokens`, its first output row.
    entries: Vec<(SeqId, Range<usize>, usize)>,
}

impl Batch {
    /// Empties the batch, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.tokens.clear();
        self.entries.clear();
    }

    /// Appends an entry of `tokens` for `seq`, with the `wanted` rows.
    pub(crate) fn push(
        &mut self,
        seq: SeqId,
        tokens: impl IntoIterator<Item = u32>,
        wanted: Wanted,
    ) {
        let at = self.tokens.len();
        self.tokens.extend(tokens);
        let n = self.tokens.len() - at;
        let first_out = match wanted {
            Wanted::Last => n.saturating_sub(1),
            Wanted::All => 0,
            Wanted::None => n,
        };
        self.entries.push((seq, at..self.tokens.len(), first_out));
    }
}

impl Entries for Batch {
    fn count(&self) -> usize {
        self.entries.len()
    }

    fn entry(&self, k: usize) -> BatchEntry<'_> {
        let (seq, range, first_out) = &self.entries[k];
        BatchEntry {
            seq: *seq,
            tokens: &self.tokens[range.clone()],
            first_out: *first_out,
        }
    }
}
