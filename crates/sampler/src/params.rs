//! Sampling parameters and their validation.

use crate::{SamplerError, Stage};

/// The seed used when the caller does not pick one.
///
/// llama.cpp's `LLAMA_DEFAULT_SEED` has the same value but there it means
/// "draw a random seed"; here it is an ordinary fixed seed, so two runs with
/// default settings produce the same text and tests stay reproducible.
pub const DEFAULT_SEED: u64 = 0xFFFF_FFFF;

/// Parameters of the sampler chain, shared by every front end (`run`,
/// `chat`, the server). The defaults are llama.cpp's.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `<= 0` keeps only the most likely candidate
    /// (greedy decoding).
    pub temp: f32,
    /// Dynamic temperature: with a range `r > 0` the temperature moves
    /// between `temp - r` and `temp + r` with the normalised entropy of the
    /// candidates; `0` is off.
    pub dynatemp_range: f32,
    /// Exponent applied to the normalised entropy by dynamic temperature.
    pub dynatemp_exponent: f32,
    /// Keep only the `top_k` most likely tokens; `0` turns the stage off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability mass
    /// reaches `top_p`; `1` turns the stage off.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the probability
    /// of the most likely token; `0` turns the stage off.
    pub min_p: f32,
    /// Locally typical sampling: keep the tokens whose surprise is closest
    /// to the distribution's entropy until their mass exceeds `typical_p`;
    /// `1` turns the stage off.
    pub typical_p: f32,
    /// Keep the tokens whose logit is within `top_n_sigma` standard
    /// deviations of the best one; `<= 0` turns the stage off.
    pub top_n_sigma: f32,
    /// Chance that XTC ("exclude top choices") acts on a step; `0` is off.
    pub xtc_probability: f32,
    /// XTC removes every candidate with a probability of at least this,
    /// except the least likely of them; above `0.5` XTC never acts.
    pub xtc_threshold: f32,
    /// Penalty for tokens seen in the last `repeat_last_n` tokens: positive
    /// logits are divided by it, negative ones multiplied; `1` is off.
    pub repeat_penalty: f32,
    /// Subtracted once from the logit of every token seen in the last
    /// `repeat_last_n` tokens (OpenAI's and llama.cpp's presence penalty);
    /// in [-2, 2], `0` is off.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per occurrence in the last
    /// `repeat_last_n` tokens (OpenAI's and llama.cpp's frequency penalty);
    /// in [-2, 2], `0` is off.
    pub frequency_penalty: f32,
    /// How many of the most recent history tokens the penalties look at.
    pub repeat_last_n: usize,
    /// DRY ("don't repeat yourself"): a token that would extend a sequence
    /// already seen in the history by more than `dry_allowed_length` tokens
    /// loses `dry_multiplier * dry_base^(length - dry_allowed_length)`;
    /// `0` is off.
    pub dry_multiplier: f32,
    /// Base of DRY's exponential penalty (at least 1).
    pub dry_base: f32,
    /// Repeats up to this many tokens long go unpunished by DRY.
    pub dry_allowed_length: usize,
    /// How many history tokens DRY scans; `-1` means the whole history,
    /// `0` turns DRY off.
    pub dry_penalty_last_n: i32,
    /// Strings that end a repeated sequence for DRY (a repeat never spans
    /// one); llama.cpp's default is newline, colon, double quote, asterisk.
    pub dry_sequence_breakers: Vec<String>,
    /// Mirostat replaces the chain after the logit bias with temperature and
    /// its own adaptive truncation and draw.
    pub mirostat: Mirostat,
    /// Mirostat's target surprise (entropy), in bits.
    pub mirostat_tau: f32,
    /// Mirostat's learning rate.
    pub mirostat_eta: f32,
    /// The stages between the logit bias and the final draw, in order
    /// (llama.cpp's `--samplers`). A stage left out never runs.
    pub stages: Vec<Stage>,
    /// `(token id, bias)` pairs added to the logits before every other
    /// stage; biases in [-100, 100]. An id appearing twice gets both
    /// biases. Ids outside the vocabulary are refused by
    /// [`validate_vocab`](SamplingParams::validate_vocab) and by the sampler.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the random generator behind the draw (and XTC's coin).
    pub seed: u64,
    /// A grammar or JSON schema the output must follow; its token mask is
    /// applied before every other stage.
    pub constraint: Option<Constraint>,
    /// Makes the constraint lazy: the output is free until this trigger
    /// shows in it, and the constraint governs from there (llama.cpp's
    /// lazy grammars, for tool calls that may or may not come).
    pub trigger: Option<Trigger>,
}

/// Where a lazy constraint wakes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The text in the output that wakes the constraint.
    pub text: String,
    /// Whether the constraint's grammar starts with the trigger itself (a
    /// tool call's opening tag) or with what follows it (the answer after
    /// a thinking block).
    pub include: bool,
}

/// Which Mirostat algorithm, if any, picks the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mirostat {
    /// The ordinary chain.
    #[default]
    Off,
    /// Mirostat 1 (Zipf-estimated top-k over the 100 best candidates).
    V1,
    /// Mirostat 2 (truncation by surprise).
    V2,
}

/// A constraint on the generated text.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A grammar in llama.cpp's GBNF format (start rule `root`).
    Gbnf(String),
    /// A grammar in llguidance's Lark dialect.
    Lark(String),
    /// A JSON schema, as JSON text.
    JsonSchema(String),
    /// Any JSON object (OpenAI's `json_object` response format).
    JsonObject,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temp: 0.8,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            top_n_sigma: -1.0,
            xtc_probability: 0.0,
            xtc_threshold: 0.1,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repeat_last_n: 64,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: -1,
            dry_sequence_breakers: ["\n", ":", "\"", "*"].map(String::from).to_vec(),
            mirostat: Mirostat::Off,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            stages: Stage::DEFAULT_ORDER.to_vec(),
            logit_bias: Vec::new(),
            seed: DEFAULT_SEED,
            constraint: None,
            trigger: None,
        }
    }
}

impl SamplingParams {
    /// The configuration for greedy decoding (temperature 0, no penalty).
    pub fn greedy() -> Self {
        Self {
            temp: 0.0,
            ..Self::default()
        }
    }

    /// Whether this configuration decodes greedily.
    pub fn is_greedy(&self) -> bool {
        self.temp == 0.0
    }

    /// Checks every parameter's range; written so that NaN fails each check.
    pub fn validate(&self) -> Result<(), SamplerError> {
        if !(self.temp >= 0.0 && self.temp.is_finite()) {
            return Err(SamplerError::InvalidTemperature(self.temp));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplerError::InvalidTopP(self.top_p));
        }
        if !(self.min_p >= 0.0 && self.min_p <= 1.0) {
            return Err(SamplerError::InvalidMinP(self.min_p));
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty.is_finite()) {
            return Err(SamplerError::InvalidRepeatPenalty(self.repeat_penalty));
        }
        if !(-2.0..=2.0).contains(&self.presence_penalty) {
            return Err(SamplerError::InvalidPresencePenalty(self.presence_penalty));
        }
        if !(-2.0..=2.0).contains(&self.frequency_penalty) {
            return Err(SamplerError::InvalidFrequencyPenalty(
                self.frequency_penalty,
            ));
        }
        if !(self.typical_p > 0.0 && self.typical_p <= 1.0) {
            return Err(SamplerError::InvalidParam(
                "typical-p",
                self.typical_p,
                "in (0, 1]",
            ));
        }
        if !self.top_n_sigma.is_finite() {
            return Err(SamplerError::InvalidParam(
                "top-n-sigma",
                self.top_n_sigma,
                "a number (<= 0 = off)",
            ));
        }
        if !(0.0..=1.0).contains(&self.xtc_probability) {
            return Err(SamplerError::InvalidParam(
                "xtc-probability",
                self.xtc_probability,
                "in [0, 1]",
            ));
        }
        if !(0.0..=1.0).contains(&self.xtc_threshold) {
            return Err(SamplerError::InvalidParam(
                "xtc-threshold",
                self.xtc_threshold,
                "in [0, 1]",
            ));
        }
        if !(self.dynatemp_range >= 0.0 && self.dynatemp_range.is_finite()) {
            return Err(SamplerError::InvalidParam(
                "dynatemp-range",
                self.dynatemp_range,
                ">= 0 (0 = off)",
            ));
        }
        if !self.dynatemp_exponent.is_finite() {
            return Err(SamplerError::InvalidParam(
                "dynatemp-exp",
                self.dynatemp_exponent,
                "a number",
            ));
        }
        if !(self.dry_multiplier >= 0.0 && self.dry_multiplier.is_finite()) {
            return Err(SamplerError::InvalidParam(
                "dry-multiplier",
                self.dry_multiplier,
                ">= 0 (0 = off)",
            ));
        }
        if !(self.dry_base >= 1.0 && self.dry_base.is_finite()) {
            return Err(SamplerError::InvalidParam(
                "dry-base",
                self.dry_base,
                ">= 1",
            ));
        }
        if self.dry_penalty_last_n < -1 {
            return Err(SamplerError::InvalidParam(
                "dry-penalty-last-n",
                self.dry_penalty_last_n as f32,
                ">= -1 (-1 = whole history, 0 = off)",
            ));
        }
        if !(self.mirostat_tau >= 0.0 && self.mirostat_tau.is_finite()) {
            return Err(SamplerError::InvalidParam(
                "mirostat-ent",
                self.mirostat_tau,
                ">= 0",
            ));
        }
        if !(self.mirostat_eta > 0.0 && self.mirostat_eta.is_finite()) {
            return Err(SamplerError::InvalidParam(
                "mirostat-lr",
                self.mirostat_eta,
                "> 0",
            ));
        }
        for &(id, bias) in &self.logit_bias {
            if !(-100.0..=100.0).contains(&bias) {
                return Err(SamplerError::InvalidLogitBias { id, bias });
            }
        }
        Ok(())
    }

    /// Checks that every [`logit_bias`](SamplingParams::logit_bias) id names
    /// a token of a vocabulary of `n_vocab` tokens.
    pub fn validate_vocab(&self, n_vocab: usize) -> Result<(), SamplerError> {
        match self
            .logit_bias
            .iter()
            .find(|&&(id, _)| id as usize >= n_vocab)
        {
            Some(&(id, _)) => Err(SamplerError::LogitBiasIdOutOfRange { id, n_vocab }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_llama_cpp() {
        let c = SamplingParams::default();
        c.validate().unwrap();
        assert_eq!(c.top_k, 40);
        assert_eq!(c.top_p, 0.95);
        assert_eq!(c.min_p, 0.05);
        assert_eq!(c.repeat_penalty, 1.0);
        assert_eq!(c.repeat_last_n, 64);
        assert_eq!(c.presence_penalty, 0.0);
        assert_eq!(c.frequency_penalty, 0.0);
        assert!(c.logit_bias.is_empty());
        assert_eq!(c.seed, DEFAULT_SEED);
        assert!(SamplingParams::greedy().is_greedy());
        SamplingParams::greedy().validate().unwrap();
    }

    #[test]
    fn validation_rejects_out_of_range_values() {
        let bad = |f: fn(&mut SamplingParams)| {
            let mut c = SamplingParams::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(
            bad(|c| c.temp = -0.1),
            SamplerError::InvalidTemperature(-0.1)
        );
        assert!(matches!(
            bad(|c| c.temp = f32::NAN),
            SamplerError::InvalidTemperature(_)
        ));
        assert!(matches!(
            bad(|c| c.temp = f32::INFINITY),
            SamplerError::InvalidTemperature(_)
        ));
        assert_eq!(bad(|c| c.top_p = 0.0), SamplerError::InvalidTopP(0.0));
        assert_eq!(bad(|c| c.top_p = 1.5), SamplerError::InvalidTopP(1.5));
        assert!(matches!(
            bad(|c| c.top_p = f32::NAN),
            SamplerError::InvalidTopP(_)
        ));
        assert_eq!(bad(|c| c.min_p = -0.5), SamplerError::InvalidMinP(-0.5));
        assert_eq!(bad(|c| c.min_p = 1.01), SamplerError::InvalidMinP(1.01));
        assert_eq!(
            bad(|c| c.repeat_penalty = 0.0),
            SamplerError::InvalidRepeatPenalty(0.0)
        );
        assert_eq!(
            bad(|c| c.repeat_penalty = -1.0),
            SamplerError::InvalidRepeatPenalty(-1.0)
        );

        assert_eq!(
            bad(|c| c.presence_penalty = 2.5),
            SamplerError::InvalidPresencePenalty(2.5)
        );
        assert!(matches!(
            bad(|c| c.presence_penalty = f32::NAN),
            SamplerError::InvalidPresencePenalty(_)
        ));
        assert_eq!(
            bad(|c| c.frequency_penalty = -2.01),
            SamplerError::InvalidFrequencyPenalty(-2.01)
        );
        assert!(matches!(
            bad(|c| c.frequency_penalty = f32::INFINITY),
            SamplerError::InvalidFrequencyPenalty(_)
        ));
        assert_eq!(
            bad(|c| c.logit_bias = vec![(3, 1.0), (4, -100.5)]),
            SamplerError::InvalidLogitBias {
                id: 4,
                bias: -100.5
            }
        );
        assert!(matches!(
            bad(|c| c.logit_bias = vec![(3, f32::NAN)]),
            SamplerError::InvalidLogitBias { id: 3, .. }
        ));

        // Bias ids are checked against the vocabulary separately.
        let c = SamplingParams {
            logit_bias: vec![(0, 1.0), (9, -1.0)],
            ..SamplingParams::default()
        };
        c.validate().unwrap();
        c.validate_vocab(10).unwrap();
        assert_eq!(
            c.validate_vocab(9).unwrap_err(),
            SamplerError::LogitBiasIdOutOfRange { id: 9, n_vocab: 9 }
        );

        // Boundary values that are allowed.
        let mut c = SamplingParams {
            top_p: 1.0,
            min_p: 0.0,
            temp: 0.0,
            ..SamplingParams::default()
        };
        c.validate().unwrap();
        c.min_p = 1.0;
        c.validate().unwrap();
        c.presence_penalty = -2.0;
        c.frequency_penalty = 2.0;
        c.logit_bias = vec![(1, 100.0), (2, -100.0)];
        c.validate().unwrap();
    }
}
