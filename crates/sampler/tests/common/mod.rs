//! What the grammar tests share.

use minfer_sampler::{Constraint, Sampler, SamplerError, SamplingParams, TokenVocab};

/// A sampler over `vocab` held to `c`, every other setting the default:
/// the sampler a request with only a constraint gets, or the error it
/// gets before any token.
pub fn constrained(c: Constraint, vocab: &TokenVocab) -> Result<Sampler, SamplerError> {
    Sampler::with_vocab(
        SamplingParams {
            constraint: Some(c),
            ..SamplingParams::default()
        },
        vocab,
    )
}
