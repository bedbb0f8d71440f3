//! What callers of the [`Scheduler`](super::Scheduler) hold and read:
//! generation handles, events and timings.

use crate::generate::{GenerationStats, TokenLogprobs};

/// Default prompt chunk: tokens of one prompt evaluated in one step.
pub const DEFAULT_CHUNK: usize = 512;

/// Most emptied text buffers [`Scheduler::recycle`] keeps.
pub(super) const MAX_SPARE_TEXT: usize = 64;

/// A handle to a generation of a [`Scheduler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GenId(pub(super) u64);

/// What a generation produced, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Output bytes, safe to show (text that might start a stop string is
    /// held back until that is decided; a chunk may end inside a UTF-8
    /// character, which [`Utf8Stream`](crate::generate::Utf8Stream)
    /// reassembles).
    Text(Vec<u8>),
    /// The log-probabilities of one generated token, when
    /// [`GenerateConfig::logprobs`](crate::GenerateConfig::logprobs) asks for
    /// them; it comes before any [`Event::Text`] of that token's bytes. The
    /// end-of-generation token has none; tokens of a stop string do.
    Logprobs(TokenLogprobs),
    /// The log-probabilities of the prompt's tokens from the second one on
    /// (the first has nothing before it), once the prompt is evaluated,
    /// before any event of the first generated token; only for a
    /// generation started with [`Scheduler::submit_scored`].
    PromptLogprobs(Vec<TokenLogprobs>),
    /// The generation is over; no event follows.
    Done(GenerationStats),
}

/// Counters and timings of one generation, beyond [`GenerationStats`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenTimes {
    /// Prompt tokens taken from the cache instead of computed.
    pub reused_tokens: usize,
    /// Seconds from submission to the first sampled token.
    pub first_token_secs: f64,
}

/// Where a generation stands, as [`Scheduler::progress`](super::Scheduler::progress)
/// reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenProgress {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens taken from the cache instead of computed.
    pub reused_tokens: usize,
    /// Prompt tokens in the cache so far, the reused ones included; all of
    /// them once the first token is sampled.
    pub evaluated_tokens: usize,
    /// Tokens generated so far.
    pub generated_tokens: usize,
    /// Seconds of prompt evaluation so far (from submission to the first
    /// sampled token, once there is one).
    pub prefill_secs: f64,
    /// Seconds since the first sampled token (0 before it).
    pub decode_secs: f64,
}
