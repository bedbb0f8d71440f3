//! Ollama's `options`: the sampler fields minfer honours, read with
//! Ollama's types and defaults, onto the OpenAI side's sampling fields.

use minfer_engine::GenerateConfig;
use serde_json::Value;

use crate::http::ApiError;
use crate::openai::request::Sampling;

/// Ollama's sampling defaults where they differ from minfer's
/// (`api.DefaultOptions`): its clients expect them.
const TOP_P: f32 = 0.9;
const MIN_P: f32 = 0.0;

/// The `options` minfer honours. Runner options (`num_ctx`, `num_gpu`,
/// `num_thread`, …) are the server's to set and are ignored, as are
/// unknown ones, as Ollama ignores them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    min_p: Option<f64>,
    typical_p: Option<f64>,
    seed: Option<i64>,
    num_predict: Option<i64>,
    stop: Option<Vec<String>>,
    repeat_penalty: Option<f64>,
    repeat_last_n: Option<i64>,
    presence_penalty: Option<f64>,
    frequency_penalty: Option<f64>,
    mirostat: Option<i64>,
    mirostat_tau: Option<f64>,
    mirostat_eta: Option<f64>,
}

fn option_error(key: &str, kind: &str) -> ApiError {
    ApiError::bad_param(
        &format!("options.{key}"),
        format!("option \"{key}\" must be of type {kind}"),
    )
}

impl Options {
    /// Reads `options` (an object, or null); a known option of the wrong
    /// type is a 400 as in Ollama.
    ///
    /// # Errors
    /// A 400 naming the option.
    pub fn parse(v: Option<&Value>) -> Result<Options, ApiError> {
        let map = match v {
            None | Some(Value::Null) => return Ok(Options::default()),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(ApiError::bad_param("options", "options must be an object")),
        };
        let float = |k: &str| -> Result<Option<f64>, ApiError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| option_error(k, "float")),
            }
        };
        // Ollama takes a float for an integer option and truncates it.
        let int = |k: &str| -> Result<Option<i64>, ApiError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_i64()
                    .or_else(|| v.as_f64().map(|f| f as i64))
                    .map(Some)
                    .ok_or_else(|| option_error(k, "integer")),
            }
        };
        let stop = match map.get("stop") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(vec![s.clone()]),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|s| s.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| option_error("stop", "array of strings"))?,
            ),
            Some(_) => return Err(option_error("stop", "array of strings")),
        };
        Ok(Options {
            temperature: float("temperature")?,
            top_p: float("top_p")?,
            top_k: int("top_k")?,
            min_p: float("min_p")?,
            typical_p: float("typical_p")?,
            seed: int("seed")?,
            num_predict: int("num_predict")?,
            stop,
            repeat_penalty: float("repeat_penalty")?,
            repeat_last_n: int("repeat_last_n")?,
            presence_penalty: float("presence_penalty")?,
            frequency_penalty: float("frequency_penalty")?,
            mirostat: int("mirostat")?,
            mirostat_tau: float("mirostat_tau")?,
            mirostat_eta: float("mirostat_eta")?,
        })
    }

    /// The OpenAI-side sampling fields, with Ollama's defaults for what is
    /// not set; `n_ctx` stands for Ollama's `repeat_last_n: -1`.
    pub fn sampling(&self, model: &str, n_ctx: u32) -> Sampling {
        let f = |v: Option<f64>| v.map(|x| x as f32);
        let mut s = Sampling {
            model: model.to_string(),
            temperature: f(self.temperature),
            top_p: f(self.top_p).or(Some(TOP_P)),
            // A negative seed is Ollama's "random".
            seed: self.seed.filter(|&s| s >= 0),
            presence_penalty: f(self.presence_penalty),
            frequency_penalty: f(self.frequency_penalty),
            ..Sampling::default()
        };
        let e = &mut s.extra;
        e.top_k = self.top_k.map(|k| k.max(0) as usize);
        e.min_p = f(self.min_p).or(Some(MIN_P));
        e.typical_p = f(self.typical_p);
        e.repeat_penalty = f(self.repeat_penalty);
        e.repeat_last_n = self.repeat_last_n.map(|n| match n {
            n if n < 0 => n_ctx as usize,
            n => n as usize,
        });
        e.mirostat = self.mirostat.map(|m| m.clamp(0, u8::MAX.into()) as u8);
        e.mirostat_tau = f(self.mirostat_tau);
        e.mirostat_eta = f(self.mirostat_eta);
        s
    }

    /// Sets what the OpenAI side limits differently: `num_predict` (≤ 0 is
    /// no limit) and any number of stop strings.
    pub fn finish(&self, cfg: &mut GenerateConfig) {
        cfg.max_tokens = self
            .num_predict
            .filter(|&n| n > 0)
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        if let Some(stop) = &self.stop {
            cfg.stop = stop.iter().filter(|s| !s.is_empty()).cloned().collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn options_parse_as_ollama_types_them() {
        let o = Options::parse(Some(&json!({
            "temperature": 0, "top_k": 20.7, "seed": 42, "num_predict": 5,
            "stop": ["a", "b", "c", "d", "e"], "num_ctx": 4096, "num_gpu": 1,
            "no_such_option": "ignored", "repeat_last_n": -1, "min_p": null
        })))
        .unwrap();
        assert_eq!(o.temperature, Some(0.0));
        assert_eq!(o.top_k, Some(20));
        assert_eq!(o.min_p, None);
        let s = o.sampling("m", 2048);
        assert_eq!(s.temperature, Some(0.0));
        assert_eq!(s.top_p, Some(TOP_P));
        assert_eq!(s.extra.min_p, Some(MIN_P));
        assert_eq!(s.extra.repeat_last_n, Some(2048));
        assert_eq!(s.seed, Some(42));
        let mut cfg = s.to_config(crate::config::RequestDefaults::max(0)).unwrap();
        o.finish(&mut cfg);
        assert_eq!(cfg.max_tokens, 5);
        assert_eq!(cfg.stop.len(), 5);
        assert_eq!(cfg.sampler.top_k, 20);

        for (body, param) in [
            (json!({"temperature": "hot"}), "options.temperature"),
            (json!({"top_k": true}), "options.top_k"),
            (json!({"stop": [1]}), "options.stop"),
        ] {
            let e = Options::parse(Some(&body)).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param));
        }
        assert!(Options::parse(Some(&json!([1]))).is_err());
        assert_eq!(Options::parse(None).unwrap(), Options::default());
    }

    #[test]
    fn no_limit_and_random_seed_by_default() {
        let o = Options::parse(Some(&json!({"num_predict": -1, "seed": -1}))).unwrap();
        let s = o.sampling("m", 512);
        assert_eq!(s.seed, None);
        let mut cfg = s
            .to_config(crate::config::RequestDefaults::max(16))
            .unwrap();
        o.finish(&mut cfg);
        assert_eq!(cfg.max_tokens, 0);
    }
}
