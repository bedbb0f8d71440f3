//! The generation options `run` and `chat` share: token budget, stop
//! strings, the sampler chain and output constraints. Each value is checked
//! by the sampler's own rule when parsed, so that a bad value is reported
//! (naming its flag) before a model is loaded. Names and defaults are
//! llama.cpp's.

use anyhow::{bail, Context, Result};
use minfer_engine::{
    Constraint, Gbnf, GenerateConfig, Mirostat, SamplingParams, Stage, DEFAULT_SEED,
};

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
    /// Dynamic temperature: move the temperature within temp ± this range
    /// with the entropy of the candidates (0: off).
    #[arg(long = "dynatemp-range", default_value_t = 0.0, value_parser = parse_dynatemp_range, allow_negative_numbers = true)]
    dynatemp_range: f32,
    /// Exponent of the entropy in dynamic temperature.
    #[arg(
        long = "dynatemp-exp",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    dynatemp_exp: f32,
    /// Keep the k most likely tokens (0: off).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p (1: off).
    #[arg(long = "top-p", default_value_t = 0.95, value_parser = parse_top_p, allow_negative_numbers = true)]
    top_p: f32,
    /// Drop tokens less likely than min-p times the most likely (0: off).
    #[arg(long = "min-p", default_value_t = 0.05, value_parser = parse_min_p, allow_negative_numbers = true)]
    min_p: f32,
    /// Locally typical sampling with parameter p (1: off).
    #[arg(long = "typical", default_value_t = 1.0, value_parser = parse_typical, allow_negative_numbers = true)]
    typical: f32,
    /// Keep tokens within n standard deviations of the best logit (<= 0: off).
    #[arg(long = "top-nsigma", default_value_t = -1.0, allow_negative_numbers = true)]
    top_nsigma: f32,
    /// XTC: chance of removing the top choices on a step (0: off).
    #[arg(long = "xtc-probability", default_value_t = 0.0, value_parser = parse_xtc_probability, allow_negative_numbers = true)]
    xtc_probability: f32,
    /// XTC: tokens at least this likely count as top choices (> 0.5: off).
    #[arg(long = "xtc-threshold", default_value_t = 0.1, value_parser = parse_xtc_threshold, allow_negative_numbers = true)]
    xtc_threshold: f32,
    /// Penalty for tokens among the last --repeat-last-n (1: off).
    #[arg(long = "repeat-penalty", default_value_t = 1.0, value_parser = parse_repeat_penalty, allow_negative_numbers = true)]
    repeat_penalty: f32,
    /// How many recent tokens the repeat, presence and frequency penalties see.
    #[arg(long = "repeat-last-n", default_value_t = 64)]
    repeat_last_n: usize,
    /// Subtracted once from tokens seen in the window (0: off).
    #[arg(long = "presence-penalty", default_value_t = 0.0, value_parser = parse_presence, allow_negative_numbers = true)]
    presence_penalty: f32,
    /// Subtracted per occurrence of tokens seen in the window (0: off).
    #[arg(long = "frequency-penalty", default_value_t = 0.0, value_parser = parse_frequency, allow_negative_numbers = true)]
    frequency_penalty: f32,
    /// DRY: penalty multiplier for tokens that extend a repeated sequence (0: off).
    #[arg(long = "dry-multiplier", default_value_t = 0.0, value_parser = parse_dry_multiplier, allow_negative_numbers = true)]
    dry_multiplier: f32,
    /// DRY: base of the penalty, which grows as base^(length - allowed length).
    #[arg(long = "dry-base", default_value_t = 1.75, value_parser = parse_dry_base, allow_negative_numbers = true)]
    dry_base: f32,
    /// DRY: repeats up to this many tokens long go unpunished.
    #[arg(long = "dry-allowed-length", default_value_t = 2)]
    dry_allowed_length: usize,
    /// DRY: how many recent tokens to scan (-1: all, 0: off).
    #[arg(long = "dry-penalty-last-n", default_value_t = -1, allow_negative_numbers = true)]
    dry_penalty_last_n: i32,
    /// DRY: a text that ends a repeat; repeatable, replaces the defaults
    /// ("\n", ":", "\"", "*"); "none" for no breakers.
    #[arg(long = "dry-sequence-breaker")]
    dry_sequence_breaker: Vec<String>,
    /// Mirostat: 0 off, 1 Mirostat, 2 Mirostat 2.0 (replaces the chain after the logit bias).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    mirostat: u8,
    /// Mirostat learning rate (eta).
    #[arg(long = "mirostat-lr", default_value_t = 0.1)]
    mirostat_lr: f32,
    /// Mirostat target entropy (tau).
    #[arg(long = "mirostat-ent", default_value_t = 5.0)]
    mirostat_ent: f32,
    /// Order of the sampler stages, ';'-separated names
    /// (penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)
    /// or letters (edskypmxt); stages left out do not run.
    #[arg(long, alias = "sampling-seq", value_parser = parse_samplers)]
    samplers: Option<Samplers>,
    /// Add a bias to one token's logit, as TOKEN_ID+BIAS or TOKEN_ID-BIAS; repeatable.
    #[arg(short = 'l', long = "logit-bias", value_parser = parse_logit_bias, allow_hyphen_values = true)]
    logit_bias: Vec<(u32, f32)>,
    /// Random seed of the sampler.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Constrain the output with a GBNF grammar (llama.cpp's format; start rule `root`).
    #[arg(long, group = "constraint")]
    grammar: Option<String>,
    /// Like --grammar, reading the grammar from a file.
    #[arg(long = "grammar-file", group = "constraint")]
    grammar_file: Option<std::path::PathBuf>,
    /// Constrain the output to a JSON schema: the schema itself, or @FILE.
    #[arg(short = 'j', long = "json-schema", group = "constraint")]
    json_schema: Option<String>,
    /// Constrain the output to any JSON object.
    #[arg(long, group = "constraint")]
    json: bool,
}

/// A parsed `--samplers` value (a newtype so clap keeps it whole).
#[derive(Clone, Debug)]
pub struct Samplers(Vec<Stage>);

impl SamplingArgs {
    /// The engine's generation settings these options describe.
    pub fn generate_config(&self) -> Result<GenerateConfig> {
        let defaults = SamplingParams::default();
        let breakers = match self.dry_sequence_breaker.as_slice() {
            [] => defaults.dry_sequence_breakers.clone(),
            [none] if none == "none" => Vec::new(),
            list => list.to_vec(),
        };
        let cfg = GenerateConfig {
            max_tokens: self.n_predict,
            stop: self.stop.clone(),
            sampler: SamplingParams {
                temp: self.temp,
                dynatemp_range: self.dynatemp_range,
                dynatemp_exponent: self.dynatemp_exp,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                typical_p: self.typical,
                top_n_sigma: self.top_nsigma,
                xtc_probability: self.xtc_probability,
                xtc_threshold: self.xtc_threshold,
                repeat_penalty: self.repeat_penalty,
                presence_penalty: self.presence_penalty,
                frequency_penalty: self.frequency_penalty,
                repeat_last_n: self.repeat_last_n,
                dry_multiplier: self.dry_multiplier,
                dry_base: self.dry_base,
                dry_allowed_length: self.dry_allowed_length,
                dry_penalty_last_n: self.dry_penalty_last_n,
                dry_sequence_breakers: breakers,
                mirostat: match self.mirostat {
                    1 => Mirostat::V1,
                    2 => Mirostat::V2,
                    _ => Mirostat::Off,
                },
                mirostat_tau: self.mirostat_ent,
                mirostat_eta: self.mirostat_lr,
                stages: self
                    .samplers
                    .as_ref()
                    .map_or(defaults.stages.clone(), |s| s.0.clone()),
                logit_bias: self.logit_bias.clone(),
                seed: self.seed,
                constraint: self.constraint()?,
                trigger: None,
            },
            logprobs: None,
        };
        cfg.sampler.validate()?;
        Ok(cfg)
    }

    /// The output constraint the flags ask for; a GBNF grammar is parsed
    /// here so that its syntax errors show before the model loads.
    fn constraint(&self) -> Result<Option<Constraint>> {
        let gbnf = match (&self.grammar, &self.grammar_file) {
            (Some(g), _) => Some(g.clone()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read grammar file {}", path.display()))?,
            ),
            (None, None) => None,
        };
        if let Some(g) = gbnf {
            Gbnf::parse(&g)?;
            return Ok(Some(Constraint::Gbnf(g)));
        }
        if let Some(schema) = &self.json_schema {
            let text = match schema.strip_prefix('@') {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read JSON schema file {path}"))?,
                None => schema.clone(),
            };
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                bail!("--json-schema is not valid JSON: {e}");
            }
            return Ok(Some(Constraint::JsonSchema(text)));
        }
        Ok(self.json.then_some(Constraint::JsonObject))
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

macro_rules! checked {
    ($($name:ident => $field:ident),* $(,)?) => {$(
        fn $name(s: &str) -> Result<f32, String> {
            sampler_value(s, |c, v| c.$field = v)
        }
    )*};
}

checked! {
    parse_temp => temp,
    parse_dynatemp_range => dynatemp_range,
    parse_top_p => top_p,
    parse_min_p => min_p,
    parse_typical => typical_p,
    parse_xtc_probability => xtc_probability,
    parse_xtc_threshold => xtc_threshold,
    parse_repeat_penalty => repeat_penalty,
    parse_presence => presence_penalty,
    parse_frequency => frequency_penalty,
    parse_dry_multiplier => dry_multiplier,
    parse_dry_base => dry_base,
}

fn parse_samplers(s: &str) -> Result<Samplers, String> {
    Stage::parse_order(s)
        .map(Samplers)
        .map_err(|e| e.to_string())
}

/// `TOKEN_ID+BIAS` or `TOKEN_ID-BIAS`, as llama.cpp writes it.
fn parse_logit_bias(s: &str) -> Result<(u32, f32), String> {
    let at = s
        .find(['+', '-'])
        .ok_or_else(|| format!("'{s}' is not TOKEN_ID+BIAS or TOKEN_ID-BIAS"))?;
    let id: u32 = s[..at]
        .trim()
        .parse()
        .map_err(|_| format!("'{}' is not a token id", &s[..at]))?;
    let bias: f32 = s[at..]
        .trim()
        .parse()
        .map_err(|_| format!("'{}' is not a bias", &s[at..]))?;
    let cfg = SamplingParams {
        logit_bias: vec![(id, bias)],
        ..SamplingParams::default()
    };
    cfg.validate().map_err(|e| e.to_string())?;
    Ok((id, bias))
}
