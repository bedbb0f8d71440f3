//! Qwen3-Coder's XML calls: `<function=NAME>` holding
//! `<parameter=P>VALUE</parameter>` entries. A value is text; it is read
//! as JSON (a number, a list, an object) unless the function's schema
//! declares the parameter a string.

use serde_json::{Map, Value};

use super::types::{Call, Catalog};

/// One newline at each end of a value belongs to the layout, not to it.
fn trim_layout(v: &str) -> &str {
    let v = v.strip_prefix('\n').unwrap_or(v);
    v.strip_suffix('\n').unwrap_or(v)
}

/// The calls of `body`: one or more `<function=…>…</function>` blocks and
/// nothing else but whitespace; `None` otherwise.
pub(super) fn parse(body: &str, known: &Catalog) -> Option<Vec<Call>> {
    let mut calls = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let after = rest.strip_prefix("<function=")?;
        let (name, after) = after.split_once('>')?;
        let name = name.trim();
        // A cut-off answer may lack the closing tag: the call ends there.
        let (inner, tail) = after.split_once("</function>").unwrap_or((after, ""));
        let mut args = Map::new();
        let mut params = inner.trim();
        while !params.is_empty() {
            let after = params.strip_prefix("<parameter=")?;
            let (p, after) = after.split_once('>')?;
            let (value, tail) = after.split_once("</parameter>").unwrap_or((after, ""));
            let text = trim_layout(value);
            let v = if known.is_string_param(name, p.trim()) {
                Value::String(text.to_string())
            } else {
                serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.into()))
            };
            args.insert(p.trim().to_string(), v);
            params = tail.trim();
        }
        calls.push(Call {
            name: name.to_string(),
            arguments: Value::Object(args).to_string(),
        });
        rest = tail.trim();
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_typed_by_the_schema() {
        let k = Catalog::new(vec![(
            "edit".into(),
            json!({"properties": {"text": {"type": "string"}}}),
        )]);
        let body = "<function=edit>\n<parameter=text>\nline one\nline two\n</parameter>\n<parameter=count>\n[1, 2]\n</parameter>\n<parameter=note>\nplain words\n</parameter>\n</function>\n<function=edit>\n</function>";
        let calls = parse(body, &k).unwrap();
        assert_eq!(calls.len(), 2);
        let a: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(
            a,
            json!({"text": "line one\nline two", "count": [1, 2], "note": "plain words"})
        );
        assert_eq!(calls[1].arguments, "{}");
        assert!(parse("<function=x>\nstray text</function>", &k).is_none());
        assert!(parse("hello", &k).is_none());
    }
}
