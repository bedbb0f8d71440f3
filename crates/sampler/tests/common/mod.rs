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

/// Settings that sample from the whole distribution left after the
/// grammar's mask (no top-k, top-p or min-p cut), at `temp`.
pub fn whole_distribution(c: &Constraint, temp: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temp,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        constraint: Some(c.clone()),
        ..SamplingParams::default()
    }
}
