//! Speculative decoding: tokens guessed cheaply, checked by the model in
//! one step.
//!
//! A decode step reads every weight once whatever the number of rows, so
//! the target model can check several guessed tokens for little more than
//! the cost of one. The guesses come from a small draft model of the same
//! vocabulary ([`DraftModel`]) or from the sequence itself ([`lookup`]).
//! The [`Scheduler`](crate::Scheduler) evaluates the last sampled token and
//! the guesses as one entry, then samples from each row in turn with the
//! generation's own sampler, exactly as without guesses, and keeps going
//! while the sampled token is the guessed one. A row's logits do not
//! depend on the other rows of its step (batch invariance), so the tokens
//! are the very ones decoding without speculation gives, greedy or
//! sampled; the rejected rows' cells are rolled back.
//!
//! How many guesses to check is decided per step by [`plan`] from the
//! measured step times and each generation's acceptance.

mod draft;
pub mod lookup;
pub mod plan;

pub use draft::DraftModel;
pub(crate) use draft::Request as DraftRequest;

use crate::error::{EngineError, Result};

/// Most guesses one step may check for one generation.
pub const MAX_DRAFT: usize = 32;

/// Default of [`SpecConfig::draft_max`], chosen by measurement: past it the
/// extra rows of a CPU step cost more than the guesses they check win, even
/// when most are accepted.
pub const DEFAULT_DRAFT_MAX: usize = 8;

/// Default of [`SpecConfig::lookup_max`]: the longest n-gram that prompt
/// lookup matches.
pub const DEFAULT_LOOKUP_NGRAM: usize = 3;

/// How to speculate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecConfig {
    /// Most guesses checked per step (`--draft-max`).
    pub draft_max: usize,
    /// Fewest guesses worth checking (`--draft-min`): a generation gets
    /// either none or at least this many.
    pub draft_min: usize,
    /// A draft model stops guessing at a token it gives less than this
    /// probability (`--draft-p-min`).
    pub p_min: f32,
    /// Prompt lookup: the longest n-gram matched, 0 for no lookup.
    /// With a draft model too, a lookup match is preferred.
    pub lookup_max: usize,
    /// Let measured costs and acceptance choose the number of guesses
    /// (up to `draft_max`) and switch speculation off where it does not
    /// pay; `false` always checks as many guesses as there are.
    pub adaptive: bool,
}

impl Default for SpecConfig {
    fn default() -> Self {
        SpecConfig {
            draft_max: DEFAULT_DRAFT_MAX,
            draft_min: 0,
            p_min: 0.0,
            lookup_max: 0,
            adaptive: true,
        }
    }
}

impl SpecConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] for a `draft_max` of 0 or above
    /// [`MAX_DRAFT`], a `draft_min` above `draft_max`, a `p_min` outside
    /// `0..=1` or a `lookup_max` above 16.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(EngineError::InvalidArgument(m));
        if self.draft_max == 0 || self.draft_max > MAX_DRAFT {
            return bad(format!(
                "draft-max must be from 1 to {MAX_DRAFT}, not {}",
                self.draft_max
            ));
        }
        if self.draft_min > self.draft_max {
            return bad(format!(
                "draft-min ({}) is above draft-max ({})",
                self.draft_min, self.draft_max
            ));
        }
        if !(0.0..=1.0).contains(&self.p_min) {
            return bad(format!(
                "draft-p-min must be between 0 and 1, not {}",
                self.p_min
            ));
        }
        if self.lookup_max > 16 {
            return bad(format!(
                "lookup n-grams are at most 16 tokens, not {}",
                self.lookup_max
            ));
        }
        Ok(())
    }
}

/// What speculation a [`Scheduler`](crate::Scheduler) does.
#[derive(Debug)]
pub struct Speculation {
    pub(crate) cfg: SpecConfig,
    pub(crate) draft: Option<DraftModel>,
}

impl Speculation {
    /// Speculation by `cfg`, with a draft model or without one (then only
    /// prompt lookup guesses, when `cfg.lookup_max > 0`).
    ///
    /// # Errors
    /// As [`SpecConfig::validate`]; [`EngineError::InvalidArgument`] when
    /// there is neither a draft model nor lookup.
    pub fn new(cfg: SpecConfig, draft: Option<DraftModel>) -> Result<Speculation> {
        cfg.validate()?;
        if draft.is_none() && cfg.lookup_max == 0 {
            return Err(EngineError::InvalidArgument(
                "speculation needs a draft model or prompt lookup".into(),
            ));
        }
        Ok(Speculation { cfg, draft })
    }

    /// The settings.
    pub fn config(&self) -> &SpecConfig {
        &self.cfg
    }

    /// The draft model, when there is one.
    pub fn draft(&self) -> Option<&DraftModel> {
        self.draft.as_ref()
    }
}

/// Counters of speculation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpecStats {
    /// Guessed tokens checked by the target.
    pub drafted: u64,
    /// Guessed tokens the target accepted.
    pub accepted: u64,
    /// Steps that checked guesses for this generation (or, in a
    /// scheduler's totals, entries that did).
    pub checks: u64,
    /// Draft-model steps run.
    pub draft_steps: u64,
}

impl SpecStats {
    /// Accepted over drafted (0 when nothing was drafted).
    pub fn acceptance(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &SpecStats) {
        self.drafted += other.drafted;
        self.accepted += other.accepted;
        self.checks += other.checks;
        self.draft_steps += other.draft_steps;
    }
}
