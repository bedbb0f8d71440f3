//! What the sampler needs to know about a model's tokens: the bytes each
//! one stands for, which ones are special, the end-of-generation set and a
//! way to tokenize text. DRY turns its sequence breakers into token
//! sequences with it, and a grammar builds its token trie from it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::dry::Breakers;
use crate::grammar::GrammarEnv;
use crate::tokens::{TokenizeFn, Tokens};
use crate::SamplerError;

/// A model's vocabulary as the sampler sees it; build it once per model and
/// share it (`Arc`) between samplers. The grammar environment and DRY's
/// breaker tables are built on first use and cached here.
pub struct TokenVocab {
    tokens: Tokens,
    grammar: OnceLock<Result<Arc<GrammarEnv>, SamplerError>>,
    breakers: Mutex<HashMap<Vec<String>, Arc<Breakers>>>,
}

impl fmt::Debug for TokenVocab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenVocab")
            .field("n_vocab", &self.tokens.len())
            .field("eog", &self.tokens.eog())
            .finish_non_exhaustive()
    }
}

impl TokenVocab {
    /// A vocabulary of `pieces.len()` tokens: `pieces[i]` is the text token
    /// `i` stands for, `special[i]` marks the tokens ordinary text never
    /// produces (control tokens such as `<|im_end|>`), `eog` lists the
    /// end-of-generation tokens and `tokenize` encodes plain text.
    ///
    /// # Errors
    /// [`SamplerError::GrammarVocab`] when the lists disagree in length or
    /// an end-of-generation id is outside the vocabulary.
    pub fn new(
        pieces: Vec<Vec<u8>>,
        special: Vec<bool>,
        eog: Vec<u32>,
        tokenize: Box<TokenizeFn>,
    ) -> Result<TokenVocab, SamplerError> {
        Ok(TokenVocab {
            tokens: Tokens::new(pieces, special, eog, tokenize)?,
            grammar: OnceLock::new(),
            breakers: Mutex::new(HashMap::new()),
        })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the vocabulary has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.len() == 0
    }

    /// The text bytes of token `id` (empty outside the vocabulary).
    pub fn piece(&self, id: u32) -> &[u8] {
        self.tokens.piece(id)
    }

    /// Whether token `id` is special (never produced by plain text).
    pub fn is_special(&self, id: u32) -> bool {
        self.tokens.is_special(id)
    }

    /// The end-of-generation tokens.
    pub fn eog(&self) -> &[u32] {
        self.tokens.eog()
    }

    /// Encodes plain text with the model's tokenizer.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokens.tokenize(text)
    }

    /// The grammar environment (token trie and parser factory), built on
    /// first use: about a tenth of a second for a 150k vocabulary.
    pub(crate) fn grammar_env(&self) -> Result<Arc<GrammarEnv>, SamplerError> {
        self.grammar
            .get_or_init(|| GrammarEnv::build(&self.tokens).map(Arc::new))
            .clone()
    }

    /// DRY's breaker table for `breakers`, built on first use and cached.
    pub(crate) fn dry_breakers(&self, breakers: &[String]) -> Arc<Breakers> {
        let mut cache = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(breakers.to_vec())
            .or_insert_with(|| Arc::new(Breakers::build(&self.tokens, breakers)))
            .clone()
    }
}
