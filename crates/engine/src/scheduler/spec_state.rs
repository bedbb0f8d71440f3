//! The speculation state the scheduler keeps, per generation and for
//! itself.

use crate::runtime::SeqId;
use crate::spec::plan::{Acceptance, Candidate, CostTable};
use crate::spec::{SpecStats, Speculation};

/// Odds a draft model's guess starts with, before any is checked.
pub(super) const DRAFT_PRIOR: f32 = 0.6;
/// Odds a lookup guess starts with.
pub(super) const LOOKUP_PRIOR: f32 = 0.5;
/// Decode steps a generation whose draft-model guesses do not pay waits
/// before checking one guess again (the text may have changed); the wait
/// doubles after every probe that finds nothing, up to `PROBE_MAX`, since
/// a probe costs feeding the draft every token it missed.
pub(super) const PROBE_FIRST: usize = 16;
/// The longest wait between probes.
pub(super) const PROBE_MAX: usize = 512;
/// Weight of a new drafting-step time in the smoothed one.
pub(super) const DRAFT_ALPHA: f64 = 0.2;

/// Where a generation's guesses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// Prompt lookup, from a match of this many tokens.
    Lookup(usize),
    /// The draft model.
    Draft,
}

/// One generation's speculation state.
#[derive(Debug)]
pub(super) struct GenSpec {
    /// The guesses to check in the coming step.
    pub(super) drafts: Vec<u32>,
    pub(super) source: Option<Source>,
    /// Guesses the draft model is asked for.
    pub(super) want: usize,
    /// The generation's sequence on the draft runtime.
    pub(super) draft_seq: Option<SeqId>,
    pub(super) draft_acc: Acceptance,
    /// Lookup odds by the length of the matched n-gram.
    pub(super) lookup_acc: [Acceptance; 17],
    /// A lookup guess that was not checked, with its n-gram length: the
    /// next sampled token tells whether it was right, for free.
    pub(super) shadow: Option<(u32, usize)>,
    /// Decode steps since the draft model last guessed.
    pub(super) idle: usize,
    /// Decode steps to wait before the next probe.
    pub(super) probe_wait: usize,
    pub(super) stats: SpecStats,
}

impl Default for GenSpec {
    fn default() -> Self {
        GenSpec {
            drafts: Vec::new(),
            source: None,
            want: 0,
            draft_seq: None,
            draft_acc: Acceptance::new(DRAFT_PRIOR),
            lookup_acc: [Acceptance::new(LOOKUP_PRIOR); 17],
            shadow: None,
            idle: 0,
            probe_wait: PROBE_FIRST,
            stats: SpecStats::default(),
        }
    }
}

/// The scheduler's speculation state.
#[derive(Debug, Default)]
pub(super) struct SpecState {
    pub(super) spec: Option<Speculation>,
    /// Decode-only step times by rows.
    pub(super) cost: CostTable,
    /// Smoothed seconds of one drafting step.
    pub(super) draft_secs: f64,
    pub(super) totals: SpecStats,
    /// Poison the cells of rejected rows (a testing aid).
    pub(super) poison: bool,
    // Per-step scratch.
    pub(super) idx: Vec<usize>,
    pub(super) cands: Vec<Candidate>,
    pub(super) ks: Vec<usize>,
    pub(super) gains: Vec<(f32, usize)>,
}
