//! The generation options `run` and `chat` share: token budget, stop
//! strings and the sampler settings, each checked by the sampler's own rule
//! when parsed, so that a bad value is reported (naming its flag) before a
//! model is loaded.

use anyhow::Result;
use minfer_engine::{GenerateConfig, SamplingParams, DEFAULT_SEED};

/// How to generate an answer.
#[derive(clap::Args, Clone, Debug)]
pub struct SamplingArgs {
    /// Most tokens per answer (0: until the model stops or the context is full).
    #[arg(short = 'n', long = "n-predict", default_value_t = 0)]
    n_predict: usize,
    /// Stop when this text appears (not printed); repeatable.
    #[arg(long)]
    stop: Vec<String>,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.8, value_parser = parse_temp, allow_negative_numbers = true)]
    temp: f32,
    /// Keep the k most likely tokens (0: off).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p (1: off).
    #[arg(long = "top-p", default_value_t = 0.95, value_parser = parse_top_p, allow_negative_numbers = true)]
    top_p: f32,
    /// Drop tokens less likely than min-p times the most likely (0: off).
    #[arg(long = "min-p", default_value_t = 0.05, value_parser = parse_min_p, allow_negative_numbers = true)]
    min_p: f32,
    /// Penalty for tokens among the last 64 (1: off).
    #[arg(long = "repeat-penalty", default_value_t = 1.0, value_parser = parse_repeat_penalty, allow_negative_numbers = true)]
    repeat_penalty: f32,
    /// Random seed of the sampler.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
}

impl SamplingArgs {
    /// The engine's generation settings these options describe.
    pub fn generate_config(&self) -> Result<GenerateConfig> {
        let cfg = GenerateConfig {
            max_tokens: self.n_predict,
            stop: self.stop.clone(),
            sampler: SamplingParams {
                temp: self.temp,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                repeat_last_n: 64,
                seed: self.seed,
                ..SamplingParams::default()
            },
            logprobs: None,
        };
        cfg.sampler.validate()?;
        Ok(cfg)
    }
}

/// Parses one sampler setting and checks it with the sampler's own rule.
fn sampler_value(s: &str, set: fn(&mut SamplingParams, f32)) -> Result<f32, String> {
    let v: f32 = s.trim().parse().map_err(|_| "not a number".to_string())?;
    let mut cfg = SamplingParams::default();
    set(&mut cfg, v);
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(v)
}

fn parse_temp(s: &str) -> Result<f32, String> {
    sampler_value(s, |c, v| c.temp = v)
}

fn parse_top_p(s: &str) -> Result<f32, String> {
    sampler_value(s, |c, v| c.top_p = v)
}

fn parse_min_p(s: &str) -> Result<f32, String> {
    sampler_value(s, |c, v| c.min_p = v)
}

fn parse_repeat_penalty(s: &str) -> Result<f32, String> {
    sampler_value(s, |c, v| c.repeat_penalty = v)
}
