//! JSON text exactly as Python's `json.dumps` writes it.
//!
//! Chat templates call `tojson`, which Hugging Face defines as
//! `json.dumps(x, ensure_ascii=False, ...)`: `", "` and `": "` separators,
//! Python's float repr, no HTML escaping. Models are trained on that
//! output, so it has to match byte for byte.

use std::fmt::Write;

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// The options of `json.dumps` that templates use.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub ensure_ascii: bool,
    /// Spaces per level; `None` writes everything on one line.
    pub indent: Option<usize>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ensure_ascii: false,
            indent: None,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
            sort_keys: false,
        }
    }
}

/// Serializes `v` like `json.dumps(v, **opts)`.
pub(crate) fn dumps(v: &Value, opts: &Options) -> Result<String, Error> {
    let mut out = String::new();
    write_value(&mut out, v, opts, 0)?;
    Ok(out)
}

fn write_value(out: &mut String, v: &Value, o: &Options, depth: usize) -> Result<(), Error> {
    // Deeply nested input cannot come from a sane template; refuse it
    // instead of overflowing the stack.
    if depth > 512 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: value nested too deeply",
        ));
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, v),
        ValueKind::String => write_str(out, v.as_str().unwrap_or_default(), o.ensure_ascii),
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if o.sort_keys {
                keys.sort_by_key(key_string);
            }
            let items = keys
                .into_iter()
                .map(|k| {
                    let item = v.get_item(&k)?;
                    Ok((key_string(&k), item))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            write_container(out, o, depth, '{', '}', &items, |out, (k, item), o| {
                write_str(out, k, o.ensure_ascii);
                out.push_str(&o.key_sep);
                write_value(out, item, o, depth + 1)
            })?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            write_container(out, o, depth, '[', ']', &items, |out, item, o| {
                write_value(out, item, o, depth + 1)
            })?;
        }
        ValueKind::Bytes => {
            let items: Vec<Value> = v
                .as_bytes()
                .unwrap_or_default()
                .iter()
                .map(|&b| Value::from(b))
                .collect();
            write_container(out, o, depth, '[', ']', &items, |out, item, o| {
                write_value(out, item, o, depth + 1)
            })?;
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "tojson: a value of kind {} is not JSON serializable",
                    v.kind()
                ),
            ))
        }
    }
    Ok(())
}

fn write_container<T>(
    out: &mut String,
    o: &Options,
    depth: usize,
    open: char,
    close: char,
    items: &[T],
    mut write_item: impl FnMut(&mut String, &T, &Options) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = o.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&o.item_sep);
        }
        newline(out, depth + 1);
        write_item(out, item, o)?;
    }
    newline(out, depth);
    out.push(close);
    Ok(())
}

/// Python turns non-string keys into strings: `1` → `"1"`, `True` →
/// `"true"`, `None` → `"null"`.
fn key_string(k: &Value) -> String {
    match k.kind() {
        ValueKind::String => k.as_str().unwrap_or_default().to_string(),
        ValueKind::None | ValueKind::Undefined => "null".into(),
        ValueKind::Bool => (if k.is_true() { "true" } else { "false" }).into(),
        ValueKind::Number => {
            let mut s = String::new();
            write_number(&mut s, k);
            s
        }
        _ => k.to_string(),
    }
}

fn write_number(out: &mut String, v: &Value) {
    if v.is_integer() {
        // Integers keep their exact digits whatever their width.
        out.push_str(&v.to_string());
    } else {
        out.push_str(&float_repr(f64::try_from(v.clone()).unwrap_or(f64::NAN)));
    }
}

/// Python's `repr(float)` as `json.dumps` prints it.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // `{:e}` gives the shortest digits that round-trip, like Python's repr.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut s = String::from(sign);
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                s.push_str(&digits);
                s.extend(std::iter::repeat_n('0', int_len - digits.len()));
                s.push_str(".0");
            } else {
                s.push_str(&digits[..int_len]);
                s.push('.');
                s.push_str(&digits[int_len..]);
            }
        } else {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            s.push_str(&digits);
        }
    } else {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let _ = write!(s, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    s
}

fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7e) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(v: serde_json::Value) -> String {
        dumps(
            &Value::from(minijinja::value::Serde(&v)),
            &Options::default(),
        )
        .unwrap()
    }

    #[test]
    fn python_layout() {
        let v = serde_json::json!({"b": [1, 2.5, null, true], "a": {"x": "é\n\"q\""}, "e": []});
        assert_eq!(
            j(v),
            r#"{"b": [1, 2.5, null, true], "a": {"x": "é\n\"q\""}, "e": []}"#
        );
    }

    #[test]
    fn indent_and_sort() {
        let v = Value::from(minijinja::value::Serde(
            serde_json::json!({"b": 1, "a": [1]}),
        ));
        let o = Options {
            indent: Some(2),
            item_sep: ",".into(),
            sort_keys: true,
            ..Options::default()
        };
        assert_eq!(
            dumps(&v, &o).unwrap(),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": 1\n}"
        );
    }

    #[test]
    fn floats_like_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1e-9), "1e-09");
        assert_eq!(float_repr(1.5e-5), "1.5e-05");
        assert_eq!(float_repr(0.0001), "0.0001");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(123456789012345.6), "123456789012345.6");
        assert_eq!(float_repr(-2.5), "-2.5");
    }

    #[test]
    fn ensure_ascii() {
        let v = Value::from("é🚀");
        let o = Options {
            ensure_ascii: true,
            ..Options::default()
        };
        assert_eq!(dumps(&v, &o).unwrap(), r#""\u00e9\ud83d\ude80""#);
    }
}
