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
    /// A parameter is outside its range.
    #[error("invalid {0} {1}: must be {2}")]
    InvalidParam(&'static str, f32, &'static str),
    /// A sampler order names a stage that does not exist.
    #[error("unknown sampler stage '{0}' (known: penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature; or the letters edskypmxt)")]
    UnknownStage(String),
    /// A grammar or JSON schema that cannot be compiled: a syntax error, an
    /// unsatisfiable schema. (A schema keyword the grammar cannot enforce
    /// is relaxed instead, see [`Sampler::relaxed`](crate::Sampler::relaxed).)
    /// The message says what is wrong in one line of at most a few hundred
    /// bytes; it never quotes the grammar, which for tool calls holds every
    /// tool's schema.
    #[error("grammar: {0}")]
    Grammar(String),
    /// The model's vocabulary cannot be used for constrained output.
    #[error("grammar: the model's vocabulary cannot be used for constrained output: {0}")]
    GrammarVocab(String),
    /// A stage that needs the vocabulary (DRY, a grammar) was configured
    /// for a sampler built without one.
    #[error("{0} needs the model's vocabulary, but the sampler was built without one")]
    NeedsVocab(&'static str),
    /// The grammar allows no token at all in its current state.
    #[error("grammar: no token can continue the output")]
    GrammarDeadEnd,
    /// [`Sampler::sample`](crate::Sampler::sample) was called while the
    /// grammar was lent out ([`Sampler::lend_grammar`](crate::Sampler::lend_grammar)).
    #[error("the grammar is lent out: give it back before sampling")]
    GrammarLent,
    /// The logits row handed to the sampler is empty.
    #[error("cannot sample from an empty logits row")]
    EmptyLogits,
    /// The logits row has more entries than a `u32` token id can name.
    #[error("logits row of {0} entries is larger than the u32 token id space")]
    VocabTooLarge(usize),
}
