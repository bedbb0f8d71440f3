//! Sampling parameters and their validation.

use crate::SamplerError;

/// The seed used when the caller does not pick one.
///
/// llama.cpp's `LLAMA_DEFAULT_SEED` has the same value but there it means
/// "draw a random seed"; here it is an ordinary fixed seed, so two runs with
/// default settings produce the same text and tests stay reproducible.
pub const DEFAULT_SEED: u64 = 0xFFFF_FFFF;

/// Parameters of the sampler chain. The defaults are llama.cpp's.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; `0` selects greedy decoding (argmax).
    pub temp: f32,
    /// Keep only the `top_k` most likely tokens; `0` turns the stage off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability mass
    /// reaches `top_p`; `1` turns the stage off.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the probability
    /// of the most likely token; `0` turns the stage off.
    pub min_p: f32,
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
    /// `(token id, bias)` pairs added to the logits before every other
    /// stage; biases in [-100, 100]. An id appearing twice gets both
    /// biases. Ids outside the vocabulary are refused by
    /// [`validate_vocab`](SamplerConfig::validate_vocab) and by the sampler.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the random generator behind the draw.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temp: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repeat_last_n: 64,
            logit_bias: Vec::new(),
            seed: DEFAULT_SEED,
        }
    }
}

impl SamplerConfig {
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
        for &(id, bias) in &self.logit_bias {
            if !(-100.0..=100.0).contains(&bias) {
                return Err(SamplerError::InvalidLogitBias { id, bias });
            }
        }
        Ok(())
    }

    /// Checks that every [`logit_bias`](SamplerConfig::logit_bias) id names
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
        let c = SamplerConfig::default();
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
        assert!(SamplerConfig::greedy().is_greedy());
        SamplerConfig::greedy().validate().unwrap();
    }

    #[test]
    fn validation_rejects_out_of_range_values() {
        let bad = |f: fn(&mut SamplerConfig)| {
            let mut c = SamplerConfig::default();
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
        let c = SamplerConfig {
            logit_bias: vec![(0, 1.0), (9, -1.0)],
            ..SamplerConfig::default()
        };
        c.validate().unwrap();
        c.validate_vocab(10).unwrap();
        assert_eq!(
            c.validate_vocab(9).unwrap_err(),
            SamplerError::LogitBiasIdOutOfRange { id: 9, n_vocab: 9 }
        );

        // Boundary values that are allowed.
        let mut c = SamplerConfig {
            top_p: 1.0,
            min_p: 0.0,
            temp: 0.0,
            ..SamplerConfig::default()
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
