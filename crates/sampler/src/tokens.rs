//! A model's tokens as the sampler reads them: the bytes each one stands
//! for, which ones are special, the end-of-generation set and a way to
//! tokenize text. [`TokenVocab`](crate::TokenVocab) wraps them with the
//! tables built from them (DRY's breakers, the grammar's trie), which are
//! built from this plain view so that they need nothing above it.

use crate::SamplerError;

/// Text to token ids, as the model's tokenizer does it (no special tokens
/// added, none parsed).
pub type TokenizeFn = dyn Fn(&str) -> Vec<u32> + Send + Sync;

/// The token lists of a [`TokenVocab`](crate::TokenVocab).
pub(crate) struct Tokens {
    pieces: Vec<Vec<u8>>,
    special: Vec<bool>,
    eog: Vec<u32>,
    tokenize: Box<TokenizeFn>,
}

impl Tokens {
    /// The lists, checked as [`TokenVocab::new`](crate::TokenVocab::new)
    /// documents.
    pub(crate) fn new(
        pieces: Vec<Vec<u8>>,
        special: Vec<bool>,
        eog: Vec<u32>,
        tokenize: Box<TokenizeFn>,
    ) -> Result<Tokens, SamplerError> {
        if pieces.len() != special.len() {
            return Err(SamplerError::GrammarVocab(format!(
                "{} token pieces but {} special flags",
                pieces.len(),
                special.len()
            )));
        }
        if let Some(&bad) = eog.iter().find(|&&e| e as usize >= pieces.len()) {
            return Err(SamplerError::GrammarVocab(format!(
                "end-of-generation token {bad} is outside the vocabulary of {}",
                pieces.len()
            )));
        }
        Ok(Tokens {
            pieces,
            special,
            eog,
            tokenize,
        })
    }

    /// Number of tokens.
    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
    }

    /// The text bytes of token `id` (empty outside the vocabulary).
    pub(crate) fn piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], |p| p.as_slice())
    }

    /// Whether token `id` is special (never produced by plain text).
    pub(crate) fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// The end-of-generation tokens.
    pub(crate) fn eog(&self) -> &[u32] {
        &self.eog
    }

    /// Encodes plain text with the model's tokenizer.
    pub(crate) fn tokenize(&self, text: &str) -> Vec<u32> {
        (self.tokenize)(text)
    }
}
