//! Calls written as JSON: `{"name": …, "arguments": …}` (Hermes, Mistral,
//! the generic form), `{"name": …, "parameters": …}` (Llama 3.x), the
//! wrappers some models add (`{"tool_call": {…}}`, `{"tool_calls": […]}`,
//! OpenAI's `{"function": {…}}`), one or several, in lists, in a code fence.

use serde_json::Value;

use super::types::{Call, Catalog};

/// One call object. With `known`, the name must be one of its functions
/// and the arguments an object (text outside the markers is only a call
/// when nothing else could be meant).
fn call(v: &Value, known: Option<&Catalog>) -> Option<Call> {
    let o = v.as_object()?;
    if let Some(inner) = o.get("tool_call").or_else(|| o.get("function")) {
        if inner.is_object() && o.len() <= 3 {
            return call(inner, known);
        }
    }
    let name = o.get("name")?.as_str()?;
    if known.is_some_and(|k| !k.has(name)) {
        return None;
    }
    let arguments = match o.get("arguments").or_else(|| o.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(a) if a.is_object() => a.to_string(),
            _ if known.is_none() => s.clone(),
            _ => return None,
        },
        Some(a) if a.is_object() || known.is_none() => a.to_string(),
        Some(_) => return None,
    };
    Some(Call {
        name: name.to_string(),
        arguments,
    })
}

/// The text inside a code fence (```` ```json … ``` ````), or the text.
pub(super) fn unfence(text: &str) -> Option<&str> {
    let body = text.trim();
    let Some(rest) = body.strip_prefix("```") else {
        return Some(body);
    };
    let (_lang, inner) = rest.split_once('\n')?;
    let inner = inner.trim_end();
    Some(inner.strip_suffix("```").unwrap_or(inner).trim())
}

/// `text` as calls: one or more call objects (or lists of them, or a
/// `tool_calls` wrapper), in an optional code fence; `None` if anything
/// else is in it.
pub(super) fn parse_any(text: &str, known: Option<&Catalog>) -> Option<Vec<Call>> {
    let body = unfence(text)?;
    let mut calls = Vec::new();
    for v in serde_json::Deserializer::from_str(body).into_iter::<Value>() {
        calls.extend(value_calls(&v.ok()?, known)?);
    }
    (!calls.is_empty()).then_some(calls)
}

/// One JSON value as calls: a call object, a list of them, or a
/// `tool_calls` wrapper; `None` if it is anything else.
pub(super) fn value_calls(v: &Value, known: Option<&Catalog>) -> Option<Vec<Call>> {
    match v {
        Value::Array(list) => list.iter().map(|item| call(item, known)).collect(),
        Value::Object(o) if o.get("tool_calls").is_some_and(Value::is_array) => o["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| call(item, known))
            .collect(),
        one => Some(vec![call(one, known)?]),
    }
}

/// What follows Mistral's `[TOOL_CALLS]`: a JSON list of calls, or
/// `NAME[ARGS]{…}` (the newer templates), possibly several joined by more
/// `[TOOL_CALLS]` markers.
pub(super) fn parse_mistral(body: &str) -> Option<Vec<Call>> {
    let mut calls = Vec::new();
    for part in body.split("[TOOL_CALLS]").filter(|p| !p.trim().is_empty()) {
        match part.split_once("[ARGS]") {
            Some((name, args)) => {
                let args: Value = serde_json::from_str(args.trim()).ok()?;
                calls.push(Call {
                    name: name.trim().to_string(),
                    arguments: args.to_string(),
                });
            }
            None => calls.extend(parse_any(part, None)?),
        }
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known() -> Catalog {
        Catalog::new(vec![("now".into(), json!({})), ("f".into(), json!({}))])
    }

    #[test]
    fn objects_strings_and_wrappers() {
        let one = |t: &str| parse_any(t, None).map(|c| c[0].clone());
        assert_eq!(
            one(r#" {"name": "f", "arguments": {"a": 1}} "#).unwrap(),
            Call {
                name: "f".into(),
                arguments: r#"{"a":1}"#.into()
            }
        );
        assert_eq!(
            one(r#"{"name": "f", "arguments": "{\"a\": 1}"}"#)
                .unwrap()
                .arguments,
            r#"{"a":1}"#
        );
        assert_eq!(one(r#"{"name": "f"}"#).unwrap().arguments, "{}");
        assert_eq!(
            one(r#"{"tool_call": {"name": "f", "arguments": {}}}"#)
                .unwrap()
                .name,
            "f"
        );
        assert_eq!(
            one(r#"{"type": "function", "function": {"name": "f", "parameters": {"x": 2}}}"#)
                .unwrap()
                .arguments,
            r#"{"x":2}"#
        );
        let many = parse_any(
            r#"{"tool_calls": [{"name": "f"}, {"name": "now", "arguments": {}}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(one("not json"), None);
    }

    #[test]
    fn outside_markers_only_known_names_with_object_arguments() {
        let k = known();
        assert!(parse_any(r#"{"name": "f", "arguments": {}}"#, Some(&k)).is_some());
        assert!(parse_any(r#"{"name": "g", "arguments": {}}"#, Some(&k)).is_none());
        assert!(parse_any(r#"{"name": "f", "arguments": 3}"#, Some(&k)).is_none());
        assert!(parse_any(r#"{"name": "f", "arguments": "x"}"#, Some(&k)).is_none());
        assert!(parse_any("```json\n{\"name\": \"now\"}\n```", Some(&k)).is_some());
    }
}
