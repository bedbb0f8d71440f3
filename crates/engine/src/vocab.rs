//! The sampler's view of a model's tokens, built from its tokenizer.

use std::sync::{Arc, OnceLock};

use minfer_sampler::TokenVocab;
use minfer_text::Tokenizer;

use crate::error::{sampler_error, EngineError, Result};
use crate::generate::GenerateConfig;

/// Builds the [`TokenVocab`] a grammar or DRY needs: every token's bytes
/// (special tokens as their text), which tokens are special, the
/// end-of-generation set, and plain-text tokenization.
///
/// # Errors
/// [`EngineError::InvalidArgument`] when the tokenizer's lists are
/// inconsistent (which a loaded model's never are).
pub fn token_vocab(tok: &Tokenizer) -> Result<Arc<TokenVocab>> {
    let n = tok.n_vocab() as u32;
    let pieces = (0..n).map(|id| tok.decode_token(id).to_vec()).collect();
    let special = (0..n).map(|id| tok.is_special(id)).collect();
    let eog = tok.eog_ids().to_vec();
    let owned = tok.clone();
    let tokenize = Box::new(move |text: &str| owned.encode(text, false, false));
    TokenVocab::new(pieces, special, eog, tokenize)
        .map(Arc::new)
        .map_err(|e| EngineError::InvalidArgument(e.to_string()))
}

/// A model's sampler vocabulary, built on first use and shared by
/// everything serving that model: the [`LoadedModel`](crate::LoadedModel)
/// and each scheduler it makes hold clones of the same cell, so the
/// vocabulary (and the tokenizer copy inside it) exists once.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedVocab(Arc<OnceLock<Arc<TokenVocab>>>);

impl SharedVocab {
    /// The vocabulary, built from `tok` the first time it is asked for.
    ///
    /// # Errors
    /// As [`token_vocab`].
    pub(crate) fn get(&self, tok: &Tokenizer) -> Result<Arc<TokenVocab>> {
        if let Some(v) = self.0.get() {
            return Ok(Arc::clone(v));
        }
        let v = token_vocab(tok)?;
        Ok(Arc::clone(self.0.get_or_init(|| v)))
    }
}

/// Whether sampling with `cfg` needs the [`TokenVocab`] (a grammar, or DRY
/// with its sequence breakers).
pub(crate) fn needs_vocab(cfg: &GenerateConfig) -> bool {
    let s = &cfg.sampler;
    s.constraint.is_some() || (s.dry_multiplier > 0.0 && !s.dry_sequence_breakers.is_empty())
}

/// Checks that `cfg`'s sampler can be built over `vocab`: parameter
/// ranges, logit bias ids, and that a grammar or JSON schema compiles, so
/// a front end can refuse a request before queueing it.
///
/// # Errors
/// [`EngineError::Grammar`] for a constraint that does not compile,
/// [`EngineError::InvalidArgument`] for anything else.
pub fn check_sampling(cfg: &GenerateConfig, vocab: &TokenVocab) -> Result<()> {
    minfer_sampler::Sampler::with_vocab(cfg.sampler.clone(), vocab)
        .map(drop)
        .map_err(sampler_error)
}
