//! The sampler chain: logits (plus recent history) → one token id.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::dry::{dry_penalties, Breakers, DryParams, DryScratch};
pub(crate) use crate::filters::*;
use crate::grammar::{Allowed, Grammar};
use crate::mirostat::mirostat;
pub(crate) use crate::penalties::*;
use crate::{Mirostat, SamplerError, SamplingParams, Stage, TokenVocab};

/// A [`Sampler`]'s grammar while it is lent out: moved, not copied, so it
/// can travel to a helper thread and back without allocating.
#[derive(Debug)]
pub struct GrammarLoan(Grammar);

impl GrammarLoan {
    /// Computes the grammar's mask for the next token, as
    /// [`Sampler::prepare`] does.
    ///
    /// # Errors
    /// [`SamplerError::Grammar`] when the grammar engine fails; the
    /// sampler's next [`sample`](Sampler::sample) meets the same failure.
    pub fn prepare(&mut self) -> Result<(), SamplerError> {
        self.0.prepare()
    }
}

/// Turns logits into token ids.
///
/// The order is llama.cpp's: the grammar mask (when a constraint is set),
/// the logit bias, then the configured [`Stage`]s (by default penalties →
/// DRY → top-n-sigma → top-k → typical → top-p → min-p → XTC →
/// temperature), then a seeded draw. Mirostat replaces everything after
/// the bias with temperature and its own truncation and draw.
///
/// Until a stage needs the candidate list, the stages work on the dense
/// logits row, and top-k builds its short list straight from the row, so a
/// step over a large vocabulary stays cheap. The buffers live in the
/// sampler and keep their capacity between calls.
///
/// The random generator is the sampler's own: one sampler per sequence
/// gives each sequence a stream that depends only on its seed and its own
/// tokens, whatever else runs beside it.
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplingParams,
    rng: ChaCha8Rng,
    grammar: Option<Grammar>,
    /// What compiling the constraint relaxed (see [`Sampler::relaxed`]).
    relaxed: Arc<[String]>,
    /// Whether the grammar is lent out (see [`Sampler::lend_grammar`]).
    lent: bool,
    breakers: Arc<Breakers>,
    /// Mirostat's learned surprise threshold.
    mu: f32,
    /// Set when the last mask allowed only end-of-generation tokens.
    grammar_done: bool,
    /// The logits after NaN clean-up, mask, bias and dense-mode stages.
    work: Vec<f32>,
    /// The candidates still in play once the list exists.
    cands: Vec<Candidate>,
    /// Distinct ids of the penalty window.
    seen: Vec<u32>,
    dry_out: Vec<(u32, f32)>,
    dry_scratch: DryScratch,
    order: Vec<(f32, usize)>,
}

impl Sampler {
    /// A sampler for `cfg` that needs no vocabulary: no constraint, and DRY
    /// only without sequence breakers.
    ///
    /// # Errors
    /// A parameter out of range, or [`SamplerError::NeedsVocab`].
    pub fn new(cfg: SamplingParams) -> Result<Self, SamplerError> {
        cfg.validate()?;
        if cfg.constraint.is_some() {
            return Err(SamplerError::NeedsVocab("a grammar or JSON schema"));
        }
        if cfg.dry_multiplier > 0.0 && !cfg.dry_sequence_breakers.is_empty() {
            return Err(SamplerError::NeedsVocab("DRY with sequence breakers"));
        }
        Ok(Self::build(cfg, None, Arc::new(Breakers::default())))
    }

    /// A sampler for `cfg` over a model's vocabulary: compiles the
    /// constraint, if any, and DRY's sequence breakers.
    ///
    /// # Errors
    /// A parameter out of range, a grammar or schema that does not compile
    /// ([`SamplerError::Grammar`]), or a vocabulary llguidance cannot use
    /// ([`SamplerError::GrammarVocab`]).
    pub fn with_vocab(cfg: SamplingParams, vocab: &TokenVocab) -> Result<Self, SamplerError> {
        cfg.validate()?;
        cfg.validate_vocab(vocab.len())?;
        let (grammar, relaxed) = match &cfg.constraint {
            Some(c) => {
                let (g, relaxed) = Grammar::compile(c, || vocab.grammar_env())?;
                let g = match &cfg.trigger {
                    Some(t) => g.lazy(t),
                    None => g,
                };
                (Some(g), relaxed)
            }
            None => (None, Vec::new()),
        };
        let breakers = if cfg.dry_multiplier > 0.0 {
            vocab.dry_breakers(&cfg.dry_sequence_breakers)
        } else {
            Arc::new(Breakers::default())
        };
        let mut s = Self::build(cfg, grammar, breakers);
        s.relaxed = relaxed.into();
        Ok(s)
    }

    fn build(cfg: SamplingParams, grammar: Option<Grammar>, breakers: Arc<Breakers>) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            mu: 2.0 * cfg.mirostat_tau,
            cfg,
            grammar,
            relaxed: Arc::from([]),
            lent: false,
            breakers,
            grammar_done: false,
            work: Vec::new(),
            cands: Vec::new(),
            seen: Vec::new(),
            dry_out: Vec::new(),
            dry_scratch: DryScratch::default(),
            order: Vec::new(),
        }
    }

    /// The configuration this sampler runs with.
    pub fn config(&self) -> &SamplingParams {
        &self.cfg
    }

    /// Restarts the random sequence from `seed`.
    pub fn reseed(&mut self, seed: u64) {
        self.cfg.seed = seed;
        self.rng = ChaCha8Rng::seed_from_u64(seed);
    }

    /// What compiling the constraint relaxed, one short line each; empty
    /// when nothing was (or there is no constraint).
    ///
    /// JSON schemas (a [`Constraint::JsonSchema`](crate::Constraint), or
    /// `%json` in a [`Constraint::Lark`](crate::Constraint) grammar) are
    /// compiled leniently: a keyword the grammar cannot enforce
    /// (`propertyNames`, `if`/`then`/`else`, an unknown `format`, a pattern
    /// with look-around, an unresolvable `$ref`, …) is dropped instead of
    /// failing the request, so the output may be looser than the schema,
    /// never stricter. These lines name what was dropped, for a log.
    pub fn relaxed(&self) -> &[String] {
        &self.relaxed
    }

    /// Whether a grammar constrains this sampler (lent out or not).
    pub fn has_grammar(&self) -> bool {
        self.grammar.is_some() || self.lent
    }

    /// Lends the grammar out, so that its next mask can be computed on
    /// another thread ([`GrammarLoan::prepare`]) while this sampler stays
    /// where it is; `None` without a grammar or when it is already lent.
    /// Until it comes back ([`restore_grammar`](Sampler::restore_grammar)),
    /// [`sample`](Sampler::sample) fails with [`SamplerError::GrammarLent`]
    /// rather than sample unconstrained.
    pub fn lend_grammar(&mut self) -> Option<GrammarLoan> {
        let g = self.grammar.take()?;
        self.lent = true;
        Some(GrammarLoan(g))
    }

    /// Takes back a grammar [`lend_grammar`](Sampler::lend_grammar) lent.
    pub fn restore_grammar(&mut self, loan: GrammarLoan) {
        self.grammar = Some(loan.0);
        self.lent = false;
    }

    /// Computes the grammar's mask for the next token ahead of
    /// [`sample`](Sampler::sample), e.g. on another thread while the
    /// forward pass runs. Does nothing without a grammar or when the mask
    /// is already known.
    pub fn prepare(&mut self) -> Result<(), SamplerError> {
        match &mut self.grammar {
            Some(g) => g.prepare(),
            None => Ok(()),
        }
    }

    /// Whether the last [`sample`](Sampler::sample) found the grammar
    /// complete: its mask allowed nothing but end-of-generation tokens.
    pub fn grammar_finished(&self) -> bool {
        self.grammar_done
    }

    /// Picks the next token from one row of `logits`.
    ///
    /// `history` is every token before this one (prompt and generated); the
    /// penalties and DRY look at its most recent entries. History ids
    /// outside the logits row are ignored, and NaN logits are treated as
    /// `-inf` so a broken row can never be chosen from. A logit bias id
    /// outside the row is an error
    /// ([`SamplerError::LogitBiasIdOutOfRange`]). With a grammar, the token
    /// is also fed to it.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, SamplerError> {
        if self.lent {
            return Err(SamplerError::GrammarLent);
        }
        if logits.is_empty() {
            return Err(SamplerError::EmptyLogits);
        }
        if u32::try_from(logits.len() - 1).is_err() {
            return Err(SamplerError::VocabTooLarge(logits.len()));
        }
        self.cfg.validate_vocab(logits.len())?;

        self.work.clear();
        self.work.extend(
            logits
                .iter()
                .map(|&l| if l.is_nan() { f32::NEG_INFINITY } else { l }),
        );
        if let Some(g) = &mut self.grammar {
            self.grammar_done = g.apply(&mut self.work)? == Allowed::EndOnly;
        }
        apply_logit_bias(&mut self.work, &self.cfg.logit_bias);

        let token = match self.cfg.mirostat {
            Mirostat::Off if self.greedy_shortcut() => self.greedy(history),
            Mirostat::Off => self.chain(history),
            m => self.mirostat(m),
        };
        if let Some(g) = &mut self.grammar {
            g.accept(token)?;
        }
        Ok(token)
    }

    /// Whether temperature 0 may skip straight to the argmax: nothing in
    /// the chain can then move the best token except the penalties and DRY
    /// applied to the whole row before any truncation.
    fn greedy_shortcut(&self) -> bool {
        let c = &self.cfg;
        let stages = &c.stages;
        let has = |s: Stage| stages.contains(&s);
        let first_cut = stages
            .iter()
            .position(|s| !matches!(s, Stage::Penalties | Stage::Dry))
            .unwrap_or(stages.len());
        let late_penalty = stages[first_cut..]
            .iter()
            .any(|s| matches!(s, Stage::Penalties | Stage::Dry));
        c.temp <= 0.0
            && c.dynatemp_range <= 0.0
            && has(Stage::Temperature)
            && !(has(Stage::Xtc) && c.xtc_probability > 0.0 && c.xtc_threshold <= 0.5)
            && !(has(Stage::Typical) && c.typical_p < 1.0)
            && !late_penalty
    }

    fn greedy(&mut self, history: &[u32]) -> u32 {
        for i in 0..self.cfg.stages.len() {
            match self.cfg.stages[i] {
                Stage::Penalties => self.penalties_dense(history),
                Stage::Dry => self.dry(history, true),
                _ => {}
            }
        }
        argmax(&self.work)
    }

    fn chain(&mut self, history: &[u32]) -> u32 {
        let mut dense = true;
        for i in 0..self.cfg.stages.len() {
            let stage = self.cfg.stages[i];
            match stage {
                Stage::Penalties if dense => self.penalties_dense(history),
                Stage::Penalties => {
                    let window = self.penalty_window(history);
                    let p = self.penalties();
                    apply_penalties_sparse(&mut self.cands, window, p, &mut self.seen);
                }
                Stage::Dry => self.dry(history, dense),
                Stage::TopK if dense && self.cfg.top_k > 0 => {
                    top_k_dense(&self.work, self.cfg.top_k, &mut self.cands);
                    dense = false;
                }
                _ => {
                    if dense {
                        self.list_candidates();
                        dense = false;
                    }
                    self.truncate(stage);
                }
            }
        }
        if dense {
            self.list_candidates();
        }
        draw(&self.cands, &mut self.rng)
    }

    fn truncate(&mut self, stage: Stage) {
        let c = &self.cfg;
        match stage {
            Stage::TopK => top_k(&mut self.cands, c.top_k),
            Stage::TopNSigma => top_n_sigma(&mut self.cands, c.top_n_sigma),
            Stage::Typical => typical(&mut self.cands, c.typical_p, &mut self.order),
            Stage::TopP => top_p(&mut self.cands, c.top_p),
            Stage::MinP => min_p(&mut self.cands, c.min_p),
            Stage::Xtc => xtc(
                &mut self.cands,
                c.xtc_probability,
                c.xtc_threshold,
                &mut self.rng,
            ),
            Stage::Temperature => dynamic_temperature(
                &mut self.cands,
                c.temp,
                c.dynatemp_range,
                c.dynatemp_exponent,
            ),
            Stage::Penalties | Stage::Dry => {}
        }
    }

    fn mirostat(&mut self, m: Mirostat) -> u32 {
        self.list_candidates();
        temperature(&mut self.cands, self.cfg.temp);
        let target = (self.cfg.mirostat_tau, self.cfg.mirostat_eta);
        let n_vocab = self.work.len();
        mirostat(
            &mut self.cands,
            m,
            n_vocab,
            target,
            &mut self.mu,
            &mut self.rng,
        )
    }

    fn list_candidates(&mut self) {
        self.cands.clear();
        self.cands.extend(
            self.work
                .iter()
                .enumerate()
                // The length check in `sample` makes every index fit.
                .map(|(i, &l)| Candidate::new(i as u32, l)),
        );
    }

    fn penalties(&self) -> Penalties {
        Penalties {
            repeat: self.cfg.repeat_penalty,
            frequency: self.cfg.frequency_penalty,
            presence: self.cfg.presence_penalty,
        }
    }

    fn penalty_window<'h>(&self, history: &'h [u32]) -> &'h [u32] {
        &history[history.len().saturating_sub(self.cfg.repeat_last_n)..]
    }

    fn penalties_dense(&mut self, history: &[u32]) {
        let window = self.penalty_window(history);
        let p = self.penalties();
        apply_penalties(&mut self.work, window, p, &mut self.seen);
    }

    fn dry(&mut self, history: &[u32], dense: bool) {
        let c = &self.cfg;
        let p = DryParams {
            multiplier: c.dry_multiplier,
            base: c.dry_base,
            allowed_length: c.dry_allowed_length,
            last_n: match c.dry_penalty_last_n {
                -1 => usize::MAX,
                n => n.max(0) as usize,
            },
        };
        dry_penalties(
            history,
            p,
            &self.breakers,
            &mut self.dry_scratch,
            &mut self.dry_out,
        );
        for &(id, pen) in &self.dry_out {
            if dense {
                if let Some(l) = self.work.get_mut(id as usize) {
                    *l -= pen;
                }
            } else if let Some(c) = self.cands.iter_mut().find(|c| c.id == id) {
                c.logit -= pen;
            }
        }
    }
}

#[cfg(test)]
mod tests;
