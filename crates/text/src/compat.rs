//! Places where Jinja2 as transformers configures it and minijinja differ,
//! bridged so that templates render the same.

use std::borrow::Cow;

use minijinja::value::{Value, ValueKind};

/// transformers registers a `{% generation %}…{% endgeneration %}` block
/// (used to mark assistant text for training masks) that renders its body
/// unchanged. minijinja has no custom tags, so the pair is rewritten into
/// an always-true `if` block, which is also a block tag and therefore gets
/// the same `trim_blocks`/`lstrip_blocks` treatment. Whitespace-control
/// markers (`-`, `+`) are kept.
pub(crate) fn rewrite_generation_tags(src: &str) -> Cow<'_, str> {
    if !src.contains("generation") {
        return Cow::Borrowed(src);
    }
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        match parse_tag(tag) {
            Some((len, left, name, right)) => {
                let body = if name == "generation" {
                    "if true"
                } else {
                    "endif"
                };
                out.push_str("{%");
                out.push_str(left);
                out.push(' ');
                out.push_str(body);
                out.push(' ');
                out.push_str(right);
                out.push_str("%}");
                rest = &tag[len..];
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Recognises `{%[-+]? (end)?generation [-+]?%}` at the start of `s`;
/// returns (length, left marker, tag name, right marker).
fn parse_tag(s: &str) -> Option<(usize, &str, &str, &str)> {
    let inner = s.strip_prefix("{%")?;
    let end = inner.find("%}")?;
    let body = &inner[..end];
    let (left, body) = match body.chars().next() {
        Some(c @ ('-' | '+')) => (&body[..c.len_utf8()], &body[1..]),
        _ => ("", body),
    };
    let (right, body) = match body.chars().last() {
        Some('-' | '+') => (&body[body.len() - 1..], &body[..body.len() - 1]),
        _ => ("", body),
    };
    let name = body.trim();
    if name != "generation" && name != "endgeneration" {
        return None;
    }
    Some((2 + end + 2, left, name, right))
}

/// Python's notion of iterable: `None`, booleans and numbers are not
/// (minijinja iterates `none` as an empty sequence), which templates rely
/// on in `tools is iterable and tools | length > 0`. Jinja2's undefined
/// value is iterable.
pub(crate) fn is_iterable(v: &Value) -> bool {
    match v.kind() {
        ValueKind::None | ValueKind::Bool | ValueKind::Number => false,
        ValueKind::Undefined => true,
        _ => v.try_iter().is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_become_if_blocks() {
        let src = "a{% generation %}b{%- endgeneration -%}c{% if x %}{% endif %}";
        assert_eq!(
            rewrite_generation_tags(src),
            "a{% if true %}b{%- endif -%}c{% if x %}{% endif %}"
        );
        assert!(matches!(
            rewrite_generation_tags("{% if x %}"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            rewrite_generation_tags("{% generations %}"),
            "{% generations %}"
        );
        assert_eq!(rewrite_generation_tags("x {% y"), "x {% y");
    }
}
