//! Errors of the sampler crate.

use thiserror::Error;

/// What can go wrong when configuring or running a [`crate::Sampler`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SamplerError {
    /// The temperature is negative or not a number.
    #[error("invalid temperature {0}: must be a number >= 0 (0 = greedy)")]
    InvalidTemperature(f32),
    /// top-p is outside (0, 1].
    #[error("invalid top-p {0}: must be in (0, 1]")]
    InvalidTopP(f32),
    /// min-p is outside [0, 1].
    #[error("invalid min-p {0}: must be in [0, 1]")]
    InvalidMinP(f32),
    /// The repeat penalty is not a positive number.
    #[error("invalid repeat penalty {0}: must be > 0 (1 = off)")]
    InvalidRepeatPenalty(f32),
    /// The presence penalty is outside [-2, 2].
    #[error("invalid presence penalty {0}: must be in [-2, 2] (0 = off)")]
    InvalidPresencePenalty(f32),
    /// The frequency penalty is outside [-2, 2].
    #[error("invalid frequency penalty {0}: must be in [-2, 2] (0 = off)")]
    InvalidFrequencyPenalty(f32),
    /// A logit bias is outside [-100, 100].
    #[error("invalid logit bias {bias} for token {id}: must be in [-100, 100]")]
    InvalidLogitBias {
        /// The token id.
        id: u32,
        /// The bias.
        bias: f32,
    },
    /// A logit bias names a token id the vocabulary does not have.
    #[error(
        "logit bias for token {id}, but the vocabulary has {n_vocab} tokens (ids 0..{n_vocab})"
    )]
    LogitBiasIdOutOfRange {
        /// The token id.
        id: u32,
        /// The vocabulary size (the logits row's length).
        n_vocab: usize,
    },
    /// The logits row handed to the sampler is empty.
    #[error("cannot sample from an empty logits row")]
    EmptyLogits,
    /// The logits row has more entries than a `u32` token id can name.
    #[error("logits row of {0} entries is larger than the u32 token id space")]
    VocabTooLarge(usize),
}
