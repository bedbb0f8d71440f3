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
    /// The logits row handed to the sampler is empty.
    #[error("cannot sample from an empty logits row")]
    EmptyLogits,
    /// The logits row has more entries than a `u32` token id can name.
    #[error("logits row of {0} entries is larger than the u32 token id space")]
    VocabTooLarge(usize),
}
