//! `keep_alive`: how long a model stays loaded after a request, in
//! Ollama's terms: a number of seconds or a Go duration (`"5m"`,
//! `"1h30m"`, `"10s"`, `"250ms"`); 0 unloads the model once the request
//! is answered; a negative value keeps it loaded for ever.

use std::time::Duration;

use serde_json::Value;

use crate::http::ApiError;

/// A request's `keep_alive`: none when absent; `Some(None)` for ever;
/// `Some(Some(d))` for `d` after the request (0: unload at once).
///
/// # Errors
/// A 400 naming `keep_alive` for a value that is no duration.
pub fn parse(v: Option<&Value>) -> Result<Option<Option<Duration>>, ApiError> {
    let bad = || {
        ApiError::bad_param(
            "keep_alive",
            "keep_alive must be a number of seconds or a duration such as \"5m\"",
        )
    };
    let secs: f64 = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64().ok_or_else(bad)?,
        Some(Value::String(s)) => go_duration(s.trim()).ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    if !secs.is_finite() {
        return Err(bad());
    }
    Ok(Some(
        (secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9))),
    ))
}

/// Seconds of a Go duration (`"-1"`, `"90"`, `"1h2m3.5s"`, `"300ms"`); a
/// bare number is seconds, as Ollama reads it.
fn go_duration(s: &str) -> Option<f64> {
    if let Ok(n) = s.parse::<f64>() {
        return Some(n);
    }
    let (sign, mut rest) = match s.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    let mut total = 0.0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Some(sign * total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secs(v: Value) -> Option<Option<f64>> {
        parse(Some(&v)).unwrap().map(|d| d.map(|d| d.as_secs_f64()))
    }

    #[test]
    fn ollama_forms() {
        assert_eq!(secs(json!("5m")), Some(Some(300.0)));
        assert_eq!(secs(json!("1h30m")), Some(Some(5400.0)));
        assert_eq!(secs(json!("250ms")), Some(Some(0.25)));
        assert_eq!(secs(json!(0)), Some(Some(0.0)));
        assert_eq!(secs(json!("0")), Some(Some(0.0)));
        assert_eq!(secs(json!(-1)), Some(None));
        assert_eq!(secs(json!("-1m")), Some(None));
        assert_eq!(secs(json!(90)), Some(Some(90.0)));
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(&Value::Null)).unwrap(), None);
        for bad in [json!("soon"), json!("5x"), json!(true), json!("")] {
            assert!(parse(Some(&bad)).is_err(), "{bad}");
        }
    }
}
