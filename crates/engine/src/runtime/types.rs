//! The values a [`Runtime`](super::Runtime) hands out: sequence handles,
//! a step's logits, and its cell store's counters.

/// A handle to one sequence of a [`Runtime`]: an id the runtime hands out
/// and checks on every use (a removed sequence's handle is rejected, even
/// after its id has been given to a new sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqId {
    pub(super) slot: u32,
    pub(super) generation: u32,
}

impl SeqId {
    /// The slot (cell-store sequence id, `0..64`) behind this handle.
    pub fn index(self) -> u32 {
        self.slot
    }
}

impl std::fmt::Display for SeqId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sequence {}", self.slot)
    }
}

/// The logits a step produced, entry by entry.
#[derive(Debug)]
pub struct StepLogits<'a> {
    pub(super) logits: &'a [f32],
    pub(super) n_vocab: usize,
    /// Entry `i`'s rows are `offsets[i]..offsets[i + 1]`.
    pub(super) offsets: &'a [usize],
}

impl<'a> StepLogits<'a> {
    /// Every returned row of entry `i`, row after row (empty when the entry
    /// asked for none).
    pub fn entry(&self, i: usize) -> &'a [f32] {
        let (a, b) = (self.offsets[i], self.offsets[i + 1]);
        &self.logits[a * self.n_vocab..b * self.n_vocab]
    }

    /// The last returned row of entry `i`, `None` when it asked for none.
    pub fn last(&self, i: usize) -> Option<&'a [f32]> {
        let rows = self.entry(i);
        (!rows.is_empty()).then(|| &rows[rows.len() - self.n_vocab..])
    }

    /// Every returned row of the step, entry after entry.
    pub fn all(&self) -> &'a [f32] {
        self.logits
    }
}

/// Counters of a runtime's cell store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Cells in the KV regions (the context window).
    pub n_ctx: usize,
    /// Cells held by at least one sequence (idle ones included).
    pub used: usize,
    /// Live sequences (not released).
    pub live: usize,
    /// Released sequences kept for prefix reuse.
    pub idle: usize,
}
