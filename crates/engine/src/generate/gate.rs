//! Sampling and the stop gates of one generation, shared by the closed
//! loop of [`generate`](super::generate) and the scheduler's pulled
//! generations.

use std::sync::Arc;

use minfer_sampler::{GrammarLoan, Sampler, StopMatcher, TokenVocab};
use minfer_text::Tokenizer;

use super::types::{logprobs_of, GenerateConfig, StopReason, TokenLogprobs, MAX_TOP_LOGPROBS};
use crate::error::{sampler_error, EngineError, Result};

/// What the loop needs from a tokenizer.
pub(crate) trait Vocab {
    fn is_eog(&self, id: u32) -> bool;
    fn token_bytes(&self, id: u32) -> &[u8];
    fn sampler_vocab(&self) -> Result<Arc<TokenVocab>>;
}

impl Vocab for Tokenizer {
    fn is_eog(&self, id: u32) -> bool {
        Tokenizer::is_eog(self, id)
    }
    fn token_bytes(&self, id: u32) -> &[u8] {
        self.decode_token(id)
    }
    fn sampler_vocab(&self) -> Result<Arc<TokenVocab>> {
        crate::vocab::token_vocab(self)
    }
}

/// What a [`Gate`] decided for a sampled token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Generation goes on: evaluate this token to get the next logits.
    Eval(u32),
    /// Generation is over.
    Stop(StopReason),
}

/// Sampling and the stop gates of one generation, shared by the closed
/// loop above and the scheduler's pulled generations.
#[derive(Debug)]
pub(crate) struct Gate {
    sampler: Sampler,
    stops: StopMatcher,
    max_tokens: usize,
    /// Generated tokens, the end-of-generation token not included.
    pub(crate) tokens: Vec<u32>,
    /// The penalty window's source: the sequence's tokens so far.
    history: Vec<u32>,
    /// How many alternatives to report per token, when reporting.
    logprobs: Option<usize>,
    /// The report of the last generated token, until taken.
    last_logprobs: Option<TokenLogprobs>,
}

impl Gate {
    /// A gate for a generation that continues `before` with `prompt` in a
    /// context of `n_ctx`; `vocab` is needed for a grammar or DRY.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] for an invalid sampler
    /// configuration; [`EngineError::Grammar`] for a grammar or schema
    /// that does not compile.
    pub(crate) fn new(
        cfg: &GenerateConfig,
        vocab: Option<&Arc<TokenVocab>>,
        before: &[u32],
        prompt: &[u32],
        n_ctx: u32,
    ) -> Result<Gate> {
        let sampler = match vocab {
            Some(v) => Sampler::with_vocab(cfg.sampler.clone(), v),
            None => Sampler::new(cfg.sampler.clone()),
        }
        .map_err(sampler_error)?;
        if let Some(n) = cfg.logprobs {
            if n > MAX_TOP_LOGPROBS {
                return Err(EngineError::InvalidArgument(format!(
                    "logprobs: at most {MAX_TOP_LOGPROBS} alternatives, got {n}"
                )));
            }
        }
        let max_tokens = if cfg.max_tokens == 0 {
            usize::MAX
        } else {
            cfg.max_tokens
        };
        // Reserving the rest of the context up front keeps the decode loop
        // from reallocating.
        let room = (n_ctx as usize).saturating_sub(before.len());
        let mut history = Vec::with_capacity(before.len() + room + 1);
        history.extend_from_slice(before);
        history.extend_from_slice(prompt);
        Ok(Gate {
            sampler,
            stops: StopMatcher::new(&cfg.stop),
            max_tokens,
            tokens: Vec::with_capacity(room.min(max_tokens).min(1 << 16)),
            history,
            logprobs: cfg.logprobs.map(usize::from),
            last_logprobs: None,
        })
    }

    /// Samples a token from `logits` and runs the gates in order; the text
    /// that became safe to show goes to `on_text` (returning `false` there
    /// cancels). `n_past` is the position the token would be written at.
    pub(crate) fn advance<V: Vocab>(
        &mut self,
        logits: &[f32],
        vocab: &V,
        n_past: u32,
        n_ctx: u32,
        on_text: &mut impl FnMut(&[u8]) -> bool,
    ) -> Result<Next> {
        let t_sample = crate::trace::rec::start();
        let token = self
            .sampler
            .sample(logits, &self.history)
            .map_err(sampler_error)?;
        crate::trace::rec::end(t_sample, "engine", "sample", 1);
        if self.sampler.grammar_finished() {
            return Ok(Next::Stop(StopReason::Grammar));
        }
        if vocab.is_eog(token) {
            return Ok(Next::Stop(StopReason::Eog));
        }
        if let Some(n) = self.logprobs {
            let mut top = Vec::with_capacity(n);
            let logprob = logprobs_of(logits, token, n, &mut top);
            self.last_logprobs = Some(TokenLogprobs {
                token,
                logprob,
                top,
            });
        }
        self.tokens.push(token);
        self.history.push(token);
        let t_detok = crate::trace::rec::start();
        let pushed = self.stops.push(vocab.token_bytes(token));
        crate::trace::rec::end(t_detok, "engine", "detokenize", 1);
        if !pushed.emit.is_empty() && !on_text(pushed.emit) {
            return Ok(Next::Stop(StopReason::Cancelled));
        }
        if pushed.hit.is_some() {
            return Ok(Next::Stop(StopReason::StopString));
        }
        if self.tokens.len() >= self.max_tokens {
            return Ok(Next::Stop(StopReason::MaxTokens));
        }
        if n_past >= n_ctx {
            return Ok(Next::Stop(StopReason::ContextFull));
        }
        Ok(Next::Eval(token))
    }

    /// Lends the sampler's grammar out, so that its next mask can be
    /// computed on another thread while the forward pass runs; `None`
    /// without a grammar. Until [`restore_grammar`](Gate::restore_grammar)
    /// gives it back, [`advance`](Gate::advance) fails rather than sample
    /// unconstrained.
    pub(crate) fn lend_grammar(&mut self) -> Option<GrammarLoan> {
        self.sampler.lend_grammar()
    }

    /// Takes back the grammar [`lend_grammar`](Gate::lend_grammar) lent.
    pub(crate) fn restore_grammar(&mut self, loan: GrammarLoan) {
        self.sampler.restore_grammar(loan);
    }

    /// The log-probabilities of the token the last
    /// [`advance`](Gate::advance) generated, when they are reported (the
    /// end-of-generation token has none).
    pub(crate) fn take_logprobs(&mut self) -> Option<TokenLogprobs> {
        self.last_logprobs.take()
    }

    /// Tokens that may still be generated before the token limit.
    pub(crate) fn remaining(&self) -> usize {
        self.max_tokens.saturating_sub(self.tokens.len())
    }

    /// Tokens seen so far: the sequence before the prompt, the prompt and
    /// the generated tokens.
    pub(crate) fn history_len(&self) -> usize {
        self.history.len()
    }

    /// The tokens seen so far, as in [`history_len`](Gate::history_len).
    pub(crate) fn history(&self) -> &[u32] {
        &self.history
    }

    /// Ends the stream: without a stop string, bytes held back as a
    /// possible start of one are ordinary output.
    pub(crate) fn finish(&mut self, reason: StopReason, on_text: &mut impl FnMut(&[u8]) -> bool) {
        if matches!(
            reason,
            StopReason::Eog
                | StopReason::Grammar
                | StopReason::MaxTokens
                | StopReason::ContextFull
                | StopReason::CacheFull
        ) {
            let rest = self.stops.finish();
            if !rest.is_empty() {
                // The stream ends here either way, so a cancel changes nothing.
                let _ = on_text(rest);
            }
        }
    }
}
