//! The sampling fields of an OpenAI request made into the engine's
//! [`GenerateConfig`]: every field checked, named in the 400 when it is
//! out of range or not supported.

use std::collections::HashMap;

use minfer_engine::{
    check_sampling, Constraint, GenerateConfig, Mirostat, SamplingParams, Stage, MAX_TOP_LOGPROBS,
};

use super::request::{Extra, Sampling, Stop};
use crate::config::RequestDefaults;
use crate::http::ApiError;
use crate::models::Served;

/// A seed for requests that do not give one: different for every request,
/// as OpenAI's sampling is.
fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64 of time and count: distinct seeds for back-to-back requests.
    let mut z = t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// OpenAI's `logit_bias` (token id as a decimal string → bias in
/// [-100, 100]) as the sampler's pairs, sorted by id so the order never
/// depends on the map's.
fn logit_bias(map: &HashMap<String, f32>) -> Result<Vec<(u32, f32)>, ApiError> {
    let mut out = Vec::with_capacity(map.len());
    for (key, &bias) in map {
        let id: u32 = key.trim().parse().map_err(|_| {
            ApiError::bad_param(
                "logit_bias",
                format!("logit_bias keys must be token ids, got `{key}`"),
            )
        })?;
        if !(-100.0..=100.0).contains(&bias) {
            return Err(ApiError::bad_param(
                "logit_bias",
                format!(
                    "logit_bias values must be between -100 and 100, got {bias} for token {id}"
                ),
            ));
        }
        out.push((id, bias));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    Ok(out)
}

/// Checks that every `logit_bias` id of `cfg` is a token of a vocabulary of
/// `n_vocab` tokens.
///
/// # Errors
/// A 400 naming `logit_bias`.
pub fn check_logit_bias(cfg: &GenerateConfig, n_vocab: usize) -> Result<(), ApiError> {
    cfg.sampler
        .validate_vocab(n_vocab)
        .map_err(|e| ApiError::bad_param("logit_bias", format!("logit_bias: {e}")))
}

/// Checks `cfg` against the served model: every `logit_bias` id is a token
/// of its vocabulary, and an output constraint compiles for it.
///
/// # Errors
/// A 400 naming `logit_bias`, or one with the grammar's error.
pub fn check_vocab(cfg: &GenerateConfig, served: &Served) -> Result<(), ApiError> {
    check_logit_bias(cfg, served.loaded.model().n_vocab())?;
    if cfg.sampler.constraint.is_some() {
        let vocab = served
            .loaded
            .sampler_vocab()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        check_sampling(cfg, &vocab).map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    Ok(())
}

impl Extra {
    /// Copies the fields that are set onto `p`.
    fn apply(&self, p: &mut SamplingParams) -> Result<(), ApiError> {
        macro_rules! set {
            ($($f:ident => $t:ident),* $(,)?) => {$(
                if let Some(v) = &self.$f {
                    p.$t = v.clone();
                }
            )*};
        }
        set! {
            top_k => top_k, min_p => min_p, typical_p => typical_p,
            top_n_sigma => top_n_sigma, repeat_penalty => repeat_penalty,
            repeat_last_n => repeat_last_n, dry_multiplier => dry_multiplier,
            dry_base => dry_base, dry_allowed_length => dry_allowed_length,
            dry_penalty_last_n => dry_penalty_last_n,
            dry_sequence_breakers => dry_sequence_breakers,
            xtc_probability => xtc_probability, xtc_threshold => xtc_threshold,
            dynatemp_range => dynatemp_range, dynatemp_exponent => dynatemp_exponent,
            mirostat_tau => mirostat_tau, mirostat_eta => mirostat_eta,
        }
        if let Some(m) = self.mirostat {
            p.mirostat = match m {
                0 => Mirostat::Off,
                1 => Mirostat::V1,
                2 => Mirostat::V2,
                _ => {
                    return Err(ApiError::bad_param(
                        "mirostat",
                        "mirostat must be 0, 1 or 2",
                    ))
                }
            };
        }
        if let Some(v) = &self.samplers {
            let spec = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(a) if a.iter().all(|x| x.is_string()) => a
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(";"),
                _ => {
                    return Err(ApiError::bad_param(
                        "samplers",
                        "samplers must be a string or a list of names",
                    ))
                }
            };
            p.stages = Stage::parse_order(&spec)
                .map_err(|e| ApiError::bad_param("samplers", e.to_string()))?;
        }
        Ok(())
    }
}

impl Sampling {
    /// The output constraint: `response_format`, or llama-server's
    /// `grammar` / `json_schema` fields (at most one of them).
    fn constraint(&self) -> Result<Option<Constraint>, ApiError> {
        let from_format = match &self.response_format {
            None => None,
            Some(f) => match f.kind.as_str() {
                "text" => None,
                "json_object" => Some(Constraint::JsonObject),
                "json_schema" => {
                    let schema = f
                        .json_schema
                        .as_ref()
                        .and_then(|j| j.schema.as_ref())
                        .ok_or_else(|| {
                            ApiError::bad_param(
                                "response_format",
                                "response_format json_schema needs json_schema.schema",
                            )
                        })?;
                    Some(Constraint::JsonSchema(schema.to_string()))
                }
                other => {
                    return Err(ApiError::bad_param(
                        "response_format",
                        format!("unknown response_format type `{other}`"),
                    ))
                }
            },
        };
        let mut all: Vec<(&str, Constraint)> = Vec::new();
        if let Some(c) = from_format {
            all.push(("response_format", c));
        }
        if let Some(g) = &self.extra.grammar {
            all.push(("grammar", Constraint::Gbnf(g.clone())));
        }
        if let Some(j) = &self.extra.json_schema {
            all.push(("json_schema", Constraint::JsonSchema(j.to_string())));
        }
        match all.len() {
            0 => Ok(None),
            1 => Ok(all.pop().map(|(_, c)| c)),
            _ => Err(ApiError::bad_param(
                all[1].0,
                format!("{} and {} cannot be combined", all[0].0, all[1].0),
            )),
        }
    }

    /// The number of choices, 1 to `limit` (the server's `-np`: every
    /// choice needs a sequence of its own).
    ///
    /// # Errors
    /// A 400 naming `n`.
    pub fn choices(&self, limit: usize) -> Result<usize, ApiError> {
        match self.n {
            None => Ok(1),
            Some(n) if n >= 1 && n as usize <= limit => Ok(n as usize),
            Some(n) => Err(ApiError::bad_param(
                "n",
                format!("n must be between 1 and {limit} (this server's -np), got {n}"),
            )),
        }
    }

    /// The configurations of `n` choices: choice `k` samples with seed
    /// `seed + k`, so each is the answer of the same request alone with
    /// that seed.
    pub fn per_choice(cfg: &GenerateConfig, n: usize) -> Vec<GenerateConfig> {
        (0..n as u64)
            .map(|k| {
                let mut c = cfg.clone();
                c.sampler.seed = cfg.sampler.seed.wrapping_add(k);
                c
            })
            .collect()
    }

    /// Whether the final streamed chunk carries usage.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }

    /// The request's temperature, else the server's; `None`: neither set.
    fn temperature(&self, unset: RequestDefaults) -> Result<Option<f32>, ApiError> {
        match self.temperature {
            Some(t) if !(0.0..=2.0).contains(&t) => Err(ApiError::bad_param(
                "temperature",
                format!("temperature must be between 0 and 2, got {t}"),
            )),
            t => Ok(t.or(unset.temp)),
        }
    }

    /// Checks the fields and builds the engine's configuration, with
    /// `unset` for the limit, temperature and seed the request leaves out.
    ///
    /// # Errors
    /// A 400 naming the first field that is out of range or not supported.
    pub fn to_config(&self, unset: RequestDefaults) -> Result<GenerateConfig, ApiError> {
        let logprobs = match &self.logprobs {
            None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => false,
            Some(serde_json::Value::Bool(true)) => true,
            Some(serde_json::Value::Number(n)) if n.as_u64() == Some(0) => false,
            Some(_) => {
                return Err(ApiError::bad_param(
                    "logprobs",
                    "logprobs must be true or false",
                ))
            }
        };
        let top = match self.top_logprobs {
            None => 0,
            Some(n) if n > u32::from(MAX_TOP_LOGPROBS) => {
                return Err(ApiError::bad_param(
                    "top_logprobs",
                    format!("top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {n}"),
                ))
            }
            Some(n) if n > 0 && !logprobs => {
                return Err(ApiError::bad_param(
                    "top_logprobs",
                    "top_logprobs needs logprobs: true",
                ))
            }
            // At most MAX_TOP_LOGPROBS, so it fits.
            Some(n) => n as u8,
        };
        let mut sampler = SamplingParams::default();
        if let Some(t) = self.temperature(unset)? {
            sampler.temp = t;
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(ApiError::bad_param(
                    "top_p",
                    format!("top_p must be in (0, 1], got {p}"),
                ));
            }
            sampler.top_p = p;
        }
        for (param, value, slot) in [
            (
                "presence_penalty",
                self.presence_penalty,
                &mut sampler.presence_penalty,
            ),
            (
                "frequency_penalty",
                self.frequency_penalty,
                &mut sampler.frequency_penalty,
            ),
        ] {
            if let Some(v) = value {
                if !(-2.0..=2.0).contains(&v) {
                    return Err(ApiError::bad_param(
                        param,
                        format!("{param} must be between -2 and 2, got {v}"),
                    ));
                }
                *slot = v;
            }
        }
        if let Some(bias) = &self.logit_bias {
            sampler.logit_bias = logit_bias(bias)?;
        }
        self.extra.apply(&mut sampler)?;
        sampler.constraint = self.constraint()?;
        sampler.seed = match (self.seed, unset.seed) {
            (Some(s), _) => s as u64,
            (None, Some(s)) => s,
            (None, None) => fresh_seed(),
        };
        sampler
            .validate()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let max = match (self.max_completion_tokens, self.max_tokens) {
            (Some(m), _) => Some(("max_completion_tokens", m)),
            (None, Some(m)) => Some(("max_tokens", m)),
            (None, None) => None,
        };
        let max_tokens = match max {
            Some((field, 0)) => {
                return Err(ApiError::bad_param(
                    field,
                    format!("{field} must be at least 1"),
                ))
            }
            Some((_, m)) => usize::try_from(m).unwrap_or(usize::MAX),
            None => unset.max_tokens,
        };
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => {
                if v.len() > 4 {
                    return Err(ApiError::bad_param(
                        "stop",
                        format!("at most 4 stop strings, got {}", v.len()),
                    ));
                }
                v.clone()
            }
        };
        Ok(GenerateConfig {
            max_tokens,
            stop,
            sampler,
            logprobs: logprobs.then_some(top),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse;
    use crate::openai::request::{message_text, ChatRequest};

    fn chat(json: &str) -> Result<GenerateConfig, ApiError> {
        let r: ChatRequest = parse(json.as_bytes())?;
        r.sampling.to_config(RequestDefaults::max(0))
    }

    /// `--n-predict`: a request without a limit gets the server's; one
    /// with its own keeps it.
    #[test]
    fn the_server_limit_applies_only_without_the_requests() {
        let parse_chat = |json: &str| -> ChatRequest { parse(json.as_bytes()).unwrap() };
        let none = parse_chat(r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(
            none.sampling
                .to_config(RequestDefaults::max(2048))
                .unwrap()
                .max_tokens,
            2048
        );
        assert_eq!(
            none.sampling
                .to_config(RequestDefaults::max(0))
                .unwrap()
                .max_tokens,
            0
        );
        let own = parse_chat(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}"#,
        );
        assert_eq!(
            own.sampling
                .to_config(RequestDefaults::max(2048))
                .unwrap()
                .max_tokens,
            5
        );
    }

    #[test]
    fn fields_map_to_the_engine_config() {
        let c = chat(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],
                "temperature":0,"top_p":0.5,"seed":7,"max_tokens":9,"stop":"x",
                "presence_penalty":0,"logit_bias":{},"logprobs":false,"n":1,
                "response_format":{"type":"text"},"user":"ignored"}"#,
        )
        .unwrap();
        assert_eq!(c.max_tokens, 9);
        assert_eq!(c.stop, vec!["x".to_string()]);
        assert_eq!(c.sampler.temp, 0.0);
        assert_eq!(c.sampler.top_p, 0.5);
        assert_eq!(c.sampler.seed, 7);
        let c = chat(
            r#"{"model":"m","messages":[],"max_tokens":9,"max_completion_tokens":3,"stop":["a","b"]}"#,
        )
        .unwrap();
        assert_eq!(c.max_tokens, 3);
        assert_eq!(c.stop.len(), 2);
    }

    #[test]
    fn unsupported_or_invalid_fields_are_refused_by_name() {
        for (body, param) in [
            (r#""logit_bias":{"x5":1.0}"#, "logit_bias"),
            (r#""logit_bias":{"-1":1.0}"#, "logit_bias"),
            (r#""logit_bias":{"5":101}"#, "logit_bias"),
            (r#""presence_penalty":2.5"#, "presence_penalty"),
            (r#""frequency_penalty":-2.01"#, "frequency_penalty"),
            (r#""logprobs":3"#, "logprobs"),
            (r#""top_logprobs":2"#, "top_logprobs"),
            (r#""logprobs":true,"top_logprobs":21"#, "top_logprobs"),
            (
                r#""response_format":{"type":"json_schema"}"#,
                "response_format",
            ),
            (r#""response_format":{"type":"xml"}"#, "response_format"),
            (
                r#""response_format":{"type":"json_object"},"grammar":"root ::= \"a\"""#,
                "grammar",
            ),
            (r#""samplers":5"#, "samplers"),
            (r#""samplers":"top_k;bogus""#, "samplers"),
            (r#""mirostat":3"#, "mirostat"),
            (r#""temperature":3"#, "temperature"),
            (r#""top_p":0"#, "top_p"),
            (r#""max_tokens":0"#, "max_tokens"),
            (r#""stop":["a","b","c","d","e"]"#, "stop"),
        ] {
            let e = chat(&format!(r#"{{"model":"m","messages":[],{body}}}"#)).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn penalties_and_logit_bias_map_to_the_sampler() {
        let c = chat(
            r#"{"model":"m","messages":[],"presence_penalty":-2,"frequency_penalty":1.5,
                "logit_bias":{"42":-100,"7":100,"0":0.5}}"#,
        )
        .unwrap();
        assert_eq!(c.sampler.presence_penalty, -2.0);
        assert_eq!(c.sampler.frequency_penalty, 1.5);
        assert_eq!(
            c.sampler.logit_bias,
            vec![(0, 0.5), (7, 100.0), (42, -100.0)]
        );
        c.sampler.validate().unwrap();
        check_logit_bias(&c, 43).unwrap();
        let e = check_logit_bias(&c, 42).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.param.as_deref(), Some("logit_bias"));
        assert!(e.message.contains("42"), "{}", e.message);

        let c = chat(r#"{"model":"m","messages":[]}"#).unwrap();
        assert_eq!(c.sampler.presence_penalty, 0.0);
        assert_eq!(c.sampler.frequency_penalty, 0.0);
        assert!(c.sampler.logit_bias.is_empty());
    }

    #[test]
    fn logprobs_map_to_the_engine() {
        let c = chat(r#"{"model":"m","messages":[],"logprobs":true,"top_logprobs":5}"#).unwrap();
        assert_eq!(c.logprobs, Some(5));
        let c = chat(r#"{"model":"m","messages":[],"logprobs":true}"#).unwrap();
        assert_eq!(c.logprobs, Some(0));
        let c = chat(r#"{"model":"m","messages":[],"logprobs":false,"top_logprobs":0}"#).unwrap();
        assert_eq!(c.logprobs, None);
    }

    #[test]
    fn malformed_bodies_are_400_naming_the_problem() {
        let e = chat("{not json").unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        let e = chat(r#"{"model":"m"}"#).unwrap_err();
        assert!(e.message.contains("messages"), "{}", e.message);
        let e = chat(r#"{"model":"m","messages":[],"temperature":"hot"}"#).unwrap_err();
        assert!(e.message.contains("schema"), "{}", e.message);
    }

    #[test]
    fn content_parts_concatenate_text() {
        let r: ChatRequest = parse(
            br#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}]}"#,
        )
        .unwrap();
        assert_eq!(message_text(&r.messages[0]).unwrap(), "ab");
        assert_eq!(message_text(&r.messages[1]).unwrap(), "");
    }

    #[test]
    fn missing_seed_differs_between_requests() {
        let a = chat(r#"{"model":"m","messages":[]}"#).unwrap();
        let b = chat(r#"{"model":"m","messages":[]}"#).unwrap();
        assert_ne!(a.sampler.seed, b.sampler.seed);
    }
}
