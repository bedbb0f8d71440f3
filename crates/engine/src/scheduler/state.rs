//! The [`Scheduler`]'s state. Its methods live beside it by concern:
//! submitting and reading generations ([`submit`](super::submit)), running
//! a step ([`step`](super::step)), planning one ([`plan`](super::plan)) and
//! speculating ([`speculate`](super::speculate)).

use minfer_text::Tokenizer;

use super::gen::{Gen, Stash};
use super::masks::MaskHelper;
use super::spec_state::SpecState;
use super::step_plan::StepPlan;
use crate::runtime::Runtime;
use crate::vocab::SharedVocab;

/// Runs any number of generations together on one [`Runtime`].
pub struct Scheduler {
    pub(super) rt: Runtime,
    pub(super) tok: Tokenizer,
    pub(super) gens: Vec<Gen>,
    pub(super) next_id: u64,
    pub(super) chunk: usize,
    pub(super) stash: Stash,
    /// The sampler's vocabulary, built the first time a generation needs
    /// it (a grammar or DRY); shared with the model that made the
    /// scheduler.
    pub(super) vocab: SharedVocab,
    /// Speculative decoding, when on.
    pub(super) spec: SpecState,
    /// The plan of the step being run, its buffers reused step after step.
    pub(super) plan: StepPlan,
    /// The thread that computes grammar masks beside the forward pass,
    /// started by the first step that samples under a grammar.
    pub(super) masks: Option<MaskHelper>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("active", &self.active())
            .field("chunk", &self.chunk)
            .field("runtime", &self.rt)
            .finish()
    }
}
