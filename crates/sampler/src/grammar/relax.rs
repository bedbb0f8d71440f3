//! Relaxing JSON schemas to what the grammar can enforce.
//!
//! Clients send schemas written for validators, not for constrained
//! decoding: `propertyNames`, `if`/`then`/`else`, formats nobody has heard
//! of, look-around in patterns, bounds like `±1.8e308`. Refusing the request
//! for a keyword the grammar cannot enforce helps nobody, since the model's
//! output is validated by the client anyway; so every schema is relaxed
//! before llguidance compiles it. The result may accept more than the
//! schema does, never less, and it is never refused for such a keyword.
//!
//! Two mechanisms share the work:
//!
//! * llguidance's own `lenient` option (set in the schema's `x-guidance`
//!   object) turns into warnings: keywords it knows but does not implement
//!   (`propertyNames`, `if`/`then`/`else`, `not`, `contains`,
//!   `dependentRequired`, `dependentSchemas`, `unevaluatedProperties`,
//!   `uniqueItems`, …), formats it does not know, `oneOf` (compiled as
//!   `anyOf`), and `minProperties`/`maxProperties` over optional keys.
//!   Keywords of no JSON Schema draft (`deprecated`, `x-…`) and annotations
//!   (`examples`, `readOnly`, `contentMediaType`, …) it ignores anyway.
//! * [`relax_schema`] rewrites what lenient mode still refuses: an unknown
//!   `$schema` URI, patterns its regex engine cannot express (look-around,
//!   back-references, `\b`), numeric bounds too extreme for its number
//!   regexes, `multipleOf` with too many decimals, lengths beyond what a
//!   regex repetition can count, keyword values of the wrong JSON type, and
//!   `$ref`s that resolve nowhere (there is no network access).
//!
//! A tool's parameters arrive wrapped in a call schema
//! (`{"name": …, "arguments": <parameters>}`), so their `#…` references
//! would resolve against the wrapper. A subschema carrying its own
//! `$schema` was a document root and gets an `$id` that makes it one
//! again; a `#/…` pointer that still misses is rebased onto the nearest
//! enclosing schema it resolves from, or dropped.
//!
//! `%json` inside a Lark grammar is compiled with llguidance's default
//! options and no hook to change them, so [`relax_lark`] finds each `%json`
//! value in the grammar text and relaxes it the same way.
//!
//! When the relaxed schema still fails to compile (overlapping
//! `patternProperties`, a recursive `$ref` with sibling keywords, …), the
//! caller retries at [`Depth::Structure`]: only the structural keywords
//! are kept.

use llguidance::derivre::{RegexAst, RegexBuilder};
use llguidance::regex_to_lark;
use serde_json::{Map, Value};

/// How far a schema is relaxed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// Only what llguidance refuses even in lenient mode; everything it can
    /// enforce is kept.
    Needed,
    /// Down to the structure (types, properties, required, items, enum,
    /// const, the applicators, `$ref`): the retry for a schema that still
    /// fails to compile after [`Depth::Needed`].
    Structure,
}

/// The largest `minLength`/`maxLength` kept: the string regex repeats one
/// character that many times, and llguidance's regex parser refuses
/// counts that do not fit in 32 bits.
const MAX_LENGTH: u64 = 1_000_000;

/// Numeric bounds past this magnitude are dropped: llguidance writes a
/// bound as a regex over its decimal digits and fails near `i64`'s range
/// (integers) or for `1e300`-like values (numbers). No real value lies
/// between `1e15` and such a bound, so nothing is lost but the failure.
const MAX_BOUND: f64 = 1e15;

/// Nonzero bounds smaller than this are dropped: each leading zero of a
/// tiny bound nests one more group in llguidance's regex, past its
/// parser's depth limit around `1e-100`.
const MIN_BOUND: f64 = 1e-30;

/// Keywords holding one subschema.
const ONE_SCHEMA: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
];

/// Keywords holding an array of subschemas.
const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords holding an object whose values are subschemas.
const SCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Counts that must be non-negative integers.
const COUNTS: &[&str] = &[
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// Numeric bounds.
const BOUNDS: &[&str] = &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/// What [`Depth::Structure`] keeps: the keywords that shape the output,
/// and the annotations and containers that carry no constraint.
const STRUCTURE: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "x-guidance",
];

/// Keywords that may stand beside `$ref` at [`Depth::Structure`]: a
/// recursive `$ref` with constraining siblings is one of the things
/// llguidance cannot compile.
const BESIDE_REF: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "x-guidance",
];

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// The most notes one compilation keeps; the rest are counted.
const MAX_NOTES: usize = 24;

/// The longest note kept, in bytes.
const MAX_NOTE: usize = 200;

/// What was relaxed, one short line each, for the caller to log.
#[derive(Debug, Default, Clone)]
pub(crate) struct Notes {
    lines: Vec<String>,
    more: usize,
}

impl Notes {
    pub(crate) fn push(&mut self, line: String) {
        if self.lines.contains(&line) {
            return;
        }
        if self.lines.len() >= MAX_NOTES {
            self.more += 1;
            return;
        }
        self.lines.push(clip(&line, MAX_NOTE));
    }

    pub(crate) fn into_lines(mut self) -> Vec<String> {
        if self.more > 0 {
            self.lines.push(format!("… and {} more", self.more));
        }
        self.lines
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when
/// cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Relaxes one schema in place (see the module docs) and sets llguidance's
/// lenient option in its `x-guidance` object. A schema whose `x-guidance`
/// says `"lenient": false` asked for strict compilation and is left as it
/// is.
pub(crate) fn relax_schema(schema: &mut Value, depth: Depth, notes: &mut Notes) {
    let Value::Object(root) = schema else {
        return;
    };
    let strict = root
        .get("x-guidance")
        .and_then(|g| g.get("lenient"))
        .is_some_and(|l| l == &Value::Bool(false));
    if strict {
        return;
    }
    let mut path = String::new();
    visit_mut(schema, &mut path, &mut |map, at| {
        clean(map, at, depth, notes)
    });
    let mut n = 0;
    let mut path = String::new();
    if let Value::Object(root) = schema {
        // The root is a resource already; only embedded documents need one.
        for_children_mut(root, &mut path, &mut |child, p| {
            visit_mut(child, p, &mut |map, _| embed(map, &mut n))
        });
    }
    fix_refs(schema, notes);
    if let Value::Object(root) = schema {
        let guidance = root
            .entry("x-guidance")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(g) = guidance {
            g.entry("lenient").or_insert(Value::Bool(true));
        }
    }
}

/// Relaxes every `%json` schema in a Lark grammar; the text is returned
/// unchanged when it has none or cannot be scanned.
pub(crate) fn relax_lark(text: &str, depth: Depth, notes: &mut Notes) -> String {
    let Some(spans) = json_spans(text) else {
        return text.to_string();
    };
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut last = 0;
    for (start, end) in spans {
        let Ok(mut schema) = serde_json::from_str::<Value>(&text[start..end]) else {
            return text.to_string();
        };
        relax_schema(&mut schema, depth, notes);
        out.push_str(&text[last..start]);
        out.push(' ');
        out.push_str(&schema.to_string());
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// The byte ranges of the JSON values after each `%json` in a Lark
/// grammar, found the way llguidance's Lark lexer finds them: outside
/// strings, regexes, special tokens and comments, and skipping the JSON of
/// `%regex` and `%llguidance`. `None` when a value does not parse.
fn json_spans(text: &str) -> Option<Vec<(usize, usize)>> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    let skip_to_newline = |mut j: usize| {
        while j < b.len() && b[j] != b'\n' {
            j += 1;
        }
        j
    };
    // A quoted string or a /regex/: up to the closing delimiter, with
    // backslash escapes, and never past a line end.
    let skip_quoted = |mut j: usize, close: u8| {
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'\n' => return j,
                c if c == close => return j + 1,
                _ => j += 1,
            }
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_quoted(i + 1, b'"'),
            b'/' if b.get(i + 1) == Some(&b'/') => i = skip_to_newline(i),
            b'/' => i = skip_quoted(i + 1, b'/'),
            b'#' => i = skip_to_newline(i),
            b'<' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'<' && b[j] != b'>' && !b[j].is_ascii_whitespace() {
                    j += 1;
                }
                i = if j > i + 1 && b.get(j) == Some(&b'>') {
                    j + 1
                } else {
                    i + 1
                };
            }
            b'%' => {
                let rest = &text[i..];
                let kw = ["%json", "%regex", "%llguidance"]
                    .into_iter()
                    .find(|k| rest.starts_with(k));
                let Some(kw) = kw else {
                    i += 1;
                    continue;
                };
                let start = i + kw.len();
                let mut stream =
                    serde_json::Deserializer::from_slice(&b[start..]).into_iter::<Value>();
                match stream.next() {
                    Some(Ok(_)) => {}
                    _ => return None,
                }
                let end = start + stream.byte_offset();
                if kw == "%json" {
                    spans.push((start, end));
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    Some(spans)
}

/// Calls `f` on every schema object under `node` (itself included), before
/// descending into its subschemas, so that what `f` removes is not
/// visited. `path` is the JSON pointer of the node.
fn visit_mut(
    node: &mut Value,
    path: &mut String,
    f: &mut dyn FnMut(&mut Map<String, Value>, &str),
) {
    let Value::Object(map) = node else {
        return;
    };
    f(map, path);
    for_children_mut(map, path, &mut |child, p| visit_mut(child, p, f));
}

/// Calls `f` on each subschema of a schema object with its JSON pointer.
/// Values of `const`, `enum`, `default`, `examples` and unknown keys are
/// data, not schemas, and are never entered.
fn for_children_mut(
    map: &mut Map<String, Value>,
    path: &mut String,
    f: &mut dyn FnMut(&mut Value, &mut String),
) {
    let len = path.len();
    for (k, v) in map.iter_mut() {
        let k = k.as_str();
        let list = SCHEMA_LIST.contains(&k) || (k == "items" && v.is_array());
        if ONE_SCHEMA.contains(&k) || k == "items" && !list {
            push_segment(path, k);
            f(v, path);
        } else if list {
            if let Value::Array(a) = v {
                for (i, s) in a.iter_mut().enumerate() {
                    push_segment(path, k);
                    push_segment(path, &i.to_string());
                    f(s, path);
                    path.truncate(len);
                }
            }
        } else if SCHEMA_MAP.contains(&k) || k == "dependencies" {
            if let Value::Object(m) = v {
                for (name, s) in m.iter_mut() {
                    push_segment(path, k);
                    push_segment(path, name);
                    f(s, path);
                    path.truncate(len);
                }
            }
        }
        path.truncate(len);
    }
}

/// The same walk as [`for_children_mut`], reading; segments unescaped.
fn for_children<'a>(map: &'a Map<String, Value>, f: &mut dyn FnMut(&'a Value, Vec<String>)) {
    for (k, v) in map {
        let k = k.as_str();
        let list = SCHEMA_LIST.contains(&k) || (k == "items" && v.is_array());
        if ONE_SCHEMA.contains(&k) || k == "items" && !list {
            f(v, vec![k.to_string()]);
        } else if list {
            if let Value::Array(a) = v {
                for (i, s) in a.iter().enumerate() {
                    f(s, vec![k.to_string(), i.to_string()]);
                }
            }
        } else if SCHEMA_MAP.contains(&k) || k == "dependencies" {
            if let Value::Object(m) = v {
                for (name, s) in m {
                    f(s, vec![k.to_string(), name.clone()]);
                }
            }
        }
    }
}

fn push_segment(path: &mut String, seg: &str) {
    path.push('/');
    path.push_str(&seg.replace('~', "~0").replace('/', "~1"));
}

fn is_schema(v: &Value) -> bool {
    v.is_object() || v.is_boolean()
}

/// `where` for a note: the keyword and, below the root, its path.
fn at(key: &str, path: &str) -> String {
    if path.is_empty() {
        format!("`{key}`")
    } else {
        format!("`{key}` at {path}")
    }
}

/// Whether llguidance's regex engine can express `pattern`, tried the way
/// its JSON compiler builds a pattern.
fn regex_ok(pattern: &str) -> bool {
    let ast = RegexAst::SearchRegex(regex_to_lark(pattern, "dw"));
    RegexBuilder::new().mk(&ast).is_ok()
}

/// Whether `multipleOf` is a value llguidance can turn into its decimal
/// form (a 32-bit coefficient times a power of ten), checked the way it
/// converts one.
fn multiple_ok(v: &Value) -> bool {
    let Some(mut x) = v.as_f64() else {
        return false;
    };
    if !(x.is_finite() && x > 0.0) {
        return false;
    }
    // Multiplying by ten reaches an integer within ~330 steps for any
    // finite double; the cap only guards the loop.
    for _ in 0..400 {
        if x.fract() == 0.0 {
            return x <= f64::from(u32::MAX);
        }
        x *= 10.0;
    }
    false
}

fn bound_ok(x: f64) -> bool {
    x == 0.0 || (MIN_BOUND..=MAX_BOUND).contains(&x.abs())
}

const DRAFT_04: &str = "http://json-schema.org/draft-04/schema#";

/// The canonical form of a `$schema` URI llguidance knows, or `None`.
fn canonical_draft(uri: &str) -> Option<&'static str> {
    let u = uri.trim_end_matches('#').to_ascii_lowercase();
    let known = [
        ("2020-12", "https://json-schema.org/draft/2020-12/schema"),
        ("2019-09", "https://json-schema.org/draft/2019-09/schema"),
        ("draft-07", "http://json-schema.org/draft-07/schema#"),
        ("draft-06", "http://json-schema.org/draft-06/schema#"),
        ("draft-04", DRAFT_04),
    ];
    if !u.contains("json-schema.org") {
        return None;
    }
    known
        .into_iter()
        .find(|(tag, _)| u.contains(tag))
        .map(|(_, c)| c)
}

/// Removes `key`, noting why.
fn drop_key(map: &mut Map<String, Value>, key: &str, why: &str, path: &str, notes: &mut Notes) {
    if map.remove(key).is_some() {
        notes.push(format!("dropped {} ({why})", at(key, path)));
    }
}

/// One schema object's rewrite at `depth`: each keyword checked, in this
/// order, by the helpers below.
fn clean(map: &mut Map<String, Value>, path: &str, depth: Depth, notes: &mut Notes) {
    clean_draft(map, path, notes);
    clean_numbers(map, path, notes);
    clean_strings(map, path, notes);
    clean_shape(map, path, notes);
    replace_non_schemas(map, path, notes);
    if depth == Depth::Structure {
        keep_structure(map, path, notes);
    }
}

/// `$schema`: a known draft in its canonical spelling, else dropped.
fn clean_draft(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    if let Some(v) = map.get("$schema") {
        match v.as_str().and_then(canonical_draft) {
            Some(c) if v.as_str() == Some(c) => {}
            Some(c) => {
                map.insert("$schema".into(), Value::from(c));
            }
            None => drop_key(
                map,
                "$schema",
                "not a JSON Schema version llguidance knows",
                path,
                notes,
            ),
        }
    }
}

/// Counts, bounds and `multipleOf`: what the grammar's number and length
/// handling can take.
fn clean_numbers(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    for &k in COUNTS {
        let Some(v) = map.get(k) else { continue };
        let n = v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|x| x.fract() == 0.0 && (0.0..9.0e15).contains(x))
                .map(|x| x as u64)
        });
        match n {
            None => drop_key(map, k, "not a non-negative integer", path, notes),
            Some(n) if k.ends_with("Length") && n > MAX_LENGTH => {
                drop_key(map, k, "too large for the grammar", path, notes)
            }
            Some(n) if v.as_u64().is_none() => {
                map.insert(k.into(), Value::from(n));
            }
            Some(_) => {}
        }
    }

    for &k in BOUNDS {
        let Some(v) = map.get(k) else { continue };
        if v.is_boolean() && k.starts_with("exclusive") {
            continue;
        }
        match v.as_f64() {
            Some(x) if bound_ok(x) => {}
            Some(_) => drop_key(
                map,
                k,
                "too extreme for the grammar's number regex",
                path,
                notes,
            ),
            None => drop_key(map, k, "not a number", path, notes),
        }
    }

    if map.get("multipleOf").is_some_and(|v| !multiple_ok(v)) {
        drop_key(
            map,
            "multipleOf",
            "not a decimal the grammar can express",
            path,
            notes,
        );
    }
}

/// `pattern`, `format` and `patternProperties`: regexes the grammar can
/// express, formats given as strings.
fn clean_strings(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    if map
        .get("pattern")
        .is_some_and(|v| !v.as_str().is_some_and(regex_ok))
    {
        drop_key(
            map,
            "pattern",
            "a regex the grammar cannot express",
            path,
            notes,
        );
    }
    if map.get("format").is_some_and(|v| !v.is_string()) {
        drop_key(map, "format", "not a string", path, notes);
    }

    let mut lost_patterns = false;
    if let Some(Value::Object(pp)) = map.get_mut("patternProperties") {
        let before = pp.len();
        pp.retain(|k, _| regex_ok(k));
        lost_patterns = pp.len() < before;
    }
    if lost_patterns {
        notes.push(format!(
            "dropped entries of {} (a regex the grammar cannot express)",
            at("patternProperties", path)
        ));
        // Keys those patterns matched would fall to additionalProperties,
        // which may forbid them.
        if !matches!(
            map.get("additionalProperties"),
            None | Some(Value::Bool(true))
        ) {
            drop_key(
                map,
                "additionalProperties",
                "the patternProperties beside it were dropped",
                path,
                notes,
            );
        }
    }
}

/// `required`, `type`, `enum`, `$ref` and the subschema keywords: values
/// of the kind each keyword takes.
fn clean_shape(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    match map.get_mut("required") {
        Some(Value::Array(a)) => a.retain(Value::is_string),
        Some(_) => drop_key(map, "required", "not an array", path, notes),
        None => {}
    }

    match map.get_mut("type") {
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {}
        Some(Value::Array(a)) => {
            a.retain(|t| t.as_str().is_some_and(|t| TYPES.contains(&t)));
            if a.is_empty() {
                drop_key(map, "type", "no type name the grammar knows", path, notes);
            }
        }
        Some(_) => drop_key(
            map,
            "type",
            "not a type name the grammar knows",
            path,
            notes,
        ),
        None => {}
    }

    if map.get("enum").is_some_and(|v| !v.is_array()) {
        drop_key(map, "enum", "not an array", path, notes);
    }
    if map.get("$ref").is_some_and(|v| !v.is_string()) {
        drop_key(map, "$ref", "not a string", path, notes);
    }
    for &k in ONE_SCHEMA {
        if map.get(k).is_some_and(|v| !is_schema(v)) {
            drop_key(map, k, "not a schema", path, notes);
        }
    }
    if map
        .get("items")
        .is_some_and(|v| !is_schema(v) && !v.is_array())
    {
        drop_key(map, "items", "not a schema", path, notes);
    }
    for &k in SCHEMA_LIST {
        match map.get(k) {
            Some(Value::Array(a)) if a.is_empty() && (k == "anyOf" || k == "oneOf") => {
                drop_key(map, k, "no alternatives", path, notes)
            }
            Some(Value::Array(_)) | None => {}
            Some(_) => drop_key(map, k, "not an array", path, notes),
        }
    }
    for &k in SCHEMA_MAP {
        if map.get(k).is_some_and(|v| !v.is_object()) {
            drop_key(map, k, "not an object", path, notes);
        }
    }
}

/// A subschema that is not a schema at all accepts anything instead.
fn replace_non_schemas(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    for (k, v) in map.iter_mut() {
        let entries: Vec<&mut Value> = match v {
            Value::Array(a) if SCHEMA_LIST.contains(&k.as_str()) || k == "items" => {
                a.iter_mut().collect()
            }
            Value::Object(m) if SCHEMA_MAP.contains(&k.as_str()) => m.values_mut().collect(),
            _ => continue,
        };
        let mut replaced = false;
        for e in entries.into_iter().filter(|e| !is_schema(e)) {
            *e = Value::Bool(true);
            replaced = true;
        }
        if replaced {
            notes.push(format!(
                "replaced a non-schema in {} by `true`",
                at(k, path)
            ));
        }
    }
}

/// At [`Depth::Structure`]: only the keywords that give the structure
/// stay.
fn keep_structure(map: &mut Map<String, Value>, path: &str, notes: &mut Notes) {
    let keep = if map.contains_key("$ref") {
        BESIDE_REF
    } else {
        STRUCTURE
    };
    if map.contains_key("patternProperties") {
        map.remove("additionalProperties");
    }
    let mut gone = Vec::new();
    map.retain(|k, _| {
        let kept = keep.contains(&k.as_str());
        if !kept {
            gone.push(format!("`{k}`"));
        }
        kept
    });
    if !gone.is_empty() {
        let place = if path.is_empty() { "the root" } else { path };
        notes.push(format!(
            "kept only the structure at {place}: dropped {}",
            gone.join(", ")
        ));
    }
}

/// Gives a schema embedded below the root that carries its own `$schema`
/// an `$id`, making it a resource again: it was a document root (a tool's
/// parameters wrapped into a call schema), and its `#…` references were
/// written against it, not against the wrapper.
///
/// Up to draft 7 an `$id` beside `$ref` does not count, so a `$ref` there
/// moves into `allOf` (llguidance intersects `$ref` with its siblings
/// either way); draft 4 spells the keyword `id`.
fn embed(map: &mut Map<String, Value>, n: &mut usize) {
    if !map.contains_key("$schema") || map.contains_key("$id") {
        return;
    }
    *n += 1;
    let id = Value::from(format!("minfer-embedded-{n}"));
    if map.get("$schema").and_then(Value::as_str) == Some(DRAFT_04) {
        map.entry("id").or_insert_with(|| id.clone());
    }
    map.insert("$id".into(), id);
    if let Some(r) = map.remove("$ref") {
        let all = map
            .entry("allOf")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = all {
            a.push(serde_json::json!({ "$ref": r }));
        }
    }
}

/// One `$ref` found by [`fix_refs`]: where it is, the length of the path
/// of the resource it resolves in, and its value.
struct RefSite {
    site: Vec<String>,
    resource: usize,
    /// The path lengths of the schemas enclosing the site, outermost
    /// first, the site's own included.
    schemas: Vec<usize>,
    target: String,
}

/// Resolves every `$ref` the way llguidance will (within the nearest
/// enclosing resource) and drops the ones that resolve nowhere: there is
/// no network to fetch a remote schema from. A `#/…` pointer that misses
/// its resource but resolves from an enclosing schema (a tool's parameters
/// wrapped in a call schema without a `$schema` to mark them) is rewritten
/// to that target.
fn fix_refs(root: &mut Value, notes: &mut Notes) {
    let mut sites = Vec::new();
    let mut anchors = Vec::new();
    let mut client_ids = false;
    collect_refs(
        root,
        Vec::new(),
        (0, &[]),
        &mut sites,
        &mut anchors,
        &mut client_ids,
    );
    let mut edits = Vec::new();
    for r in sites {
        let fix = resolve(root, &r, &anchors, client_ids);
        if fix.is_none() {
            notes.push(format!(
                "dropped `$ref` {:?} at {} (resolves nowhere)",
                clip(&r.target, 80),
                pointer_of(&r.site)
            ));
        }
        if fix.as_deref() != Some(r.target.as_str()) {
            edits.push((r.site, fix));
        }
    }
    for (site, fix) in edits {
        if let Some(Value::Object(map)) = get_mut(root, &site) {
            match fix {
                Some(t) => map.insert("$ref".into(), Value::from(t)),
                None => map.remove("$ref"),
            };
        }
    }
}

/// Finds the `$ref`s under `node` at `path`; `within` is the path length
/// of the enclosing resource and those of the enclosing schemas.
fn collect_refs(
    node: &Value,
    path: Vec<String>,
    within: (usize, &[usize]),
    sites: &mut Vec<RefSite>,
    anchors: &mut Vec<String>,
    client_ids: &mut bool,
) {
    let Value::Object(map) = node else { return };
    let (mut resource, outer) = within;
    let mut schemas = outer.to_vec();
    schemas.push(path.len());
    if let Some(Value::String(id)) = map.get("$id") {
        if let Some(anchor) = id.strip_prefix('#') {
            anchors.push(anchor.to_string());
        } else {
            if !path.is_empty() {
                resource = path.len();
            }
            if !id.starts_with("minfer-embedded-") {
                *client_ids = true;
            }
        }
    }
    if let Some(Value::String(a)) = map.get("$anchor") {
        anchors.push(a.clone());
    }
    if let Some(Value::String(t)) = map.get("$ref") {
        sites.push(RefSite {
            site: path.clone(),
            resource,
            schemas: schemas.clone(),
            target: t.clone(),
        });
    }
    for_children(map, &mut |child, segs| {
        let mut p = path.clone();
        p.extend(segs);
        collect_refs(child, p, (resource, &schemas), sites, anchors, client_ids);
    });
}

/// What `r` should become: itself when it resolves, a rebased pointer,
/// or `None` to drop it.
fn resolve(root: &Value, r: &RefSite, anchors: &[String], client_ids: bool) -> Option<String> {
    let Some(frag) = r.target.strip_prefix('#') else {
        // A URI: only a client's own `$id` could name it.
        return client_ids.then(|| r.target.clone());
    };
    if frag.is_empty() {
        return Some(r.target.clone());
    }
    if !frag.starts_with('/') {
        return anchors.iter().any(|a| a == frag).then(|| r.target.clone());
    }
    let Some(ptr) = percent_decode(frag) else {
        return Some(r.target.clone());
    };
    let base = get(root, &r.site[..r.resource])?;
    if base.pointer(&ptr).is_some() {
        return Some(r.target.clone());
    }
    // The nearest enclosing schema the pointer resolves from.
    for &k in r.schemas.iter().rev().filter(|&&k| k > r.resource) {
        let anc = get(root, &r.site[..k])?;
        if anc.pointer(&ptr).is_some() {
            let prefix = pointer_of(&r.site[r.resource..k]);
            return Some(format!("#{}", fragment_escape(&format!("{prefix}{ptr}"))));
        }
    }
    None
}

fn get<'a>(root: &'a Value, segs: &[String]) -> Option<&'a Value> {
    segs.iter().try_fold(root, |v, s| match v {
        Value::Object(m) => m.get(s),
        Value::Array(a) => a.get(s.parse::<usize>().ok()?),
        _ => None,
    })
}

fn get_mut<'a>(root: &'a mut Value, segs: &[String]) -> Option<&'a mut Value> {
    segs.iter().try_fold(root, |v, s| match v {
        Value::Object(m) => m.get_mut(s),
        Value::Array(a) => a.get_mut(s.parse::<usize>().ok()?),
        _ => None,
    })
}

fn pointer_of(segs: &[String]) -> String {
    let mut p = String::new();
    for s in segs {
        push_segment(&mut p, s);
    }
    p
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A JSON pointer made safe as a URI fragment.
fn fragment_escape(ptr: &str) -> String {
    let mut out = String::with_capacity(ptr.len());
    for &c in ptr.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&c) {
            out.push(char::from(c));
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn relaxed(mut v: Value, depth: Depth) -> (Value, Vec<String>) {
        let mut notes = Notes::default();
        relax_schema(&mut v, depth, &mut notes);
        if let Value::Object(m) = &mut v {
            m.remove("x-guidance");
        }
        (v, notes.into_lines())
    }

    #[test]
    fn what_the_grammar_can_enforce_is_kept() {
        let s = json!({"type": "object",
            "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 9},
                           "n": {"type": "integer", "minimum": -5, "maximum": 5, "multipleOf": 0.5}},
            "required": ["a"], "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"});
        let (out, notes) = relaxed(s.clone(), Depth::Needed);
        assert_eq!(out, s);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn what_llguidance_refuses_even_when_lenient_is_dropped() {
        let s = json!({"type": "object", "$schema": "https://json-schema.org/draft-07/schema",
            "properties": {
                "a": {"type": "string", "pattern": "^(?!x).*$", "minLength": 5.0},
                "b": {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 10,
                      "multipleOf": 1e-12},
                "c": {"type": "string", "maxLength": 4294967296u64},
                "d": {"$ref": "https://example.com/x.json", "type": "integer"},
                "e": 5
            },
            "required": ["a", 7]});
        let (out, notes) = relaxed(s, Depth::Needed);
        assert_eq!(
            out,
            json!({"type": "object", "$schema": "http://json-schema.org/draft-07/schema#",
                "properties": {
                    "a": {"type": "string", "minLength": 5},
                    "b": {"type": "number", "maximum": 10},
                    "c": {"type": "string"},
                    "d": {"type": "integer"},
                    "e": true
                },
                "required": ["a"]})
        );
        for k in ["pattern", "minimum", "multipleOf", "maxLength", "$ref"] {
            assert!(notes.iter().any(|n| n.contains(k)), "{k}: {notes:?}");
        }
    }

    #[test]
    fn an_unknown_schema_version_is_dropped_and_a_known_one_normalised() {
        let (out, _) = relaxed(
            json!({"$schema": "http://json-schema.org/schema#"}),
            Depth::Needed,
        );
        assert_eq!(out, json!({}));
        let (out, _) = relaxed(
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema#"}),
            Depth::Needed,
        );
        assert_eq!(
            out,
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})
        );
    }

    #[test]
    fn data_is_never_taken_for_a_schema() {
        let s = json!({"const": {"pattern": "(?!x)", "minimum": 1e300},
                       "enum": [{"format": 5}], "default": {"$ref": "#/nowhere"}});
        let (out, notes) = relaxed(s.clone(), Depth::Needed);
        assert_eq!(out, s);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn references_resolve_in_their_own_document() {
        // A tool's parameters, wrapped as the server wraps them.
        let params = json!({"$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object", "definitions": {"n": {"type": "integer"}},
            "properties": {"x": {"$ref": "#/definitions/n"}, "kids": {"type": "array", "items": {"$ref": "#"}}}});
        let s =
            json!({"type": "object", "properties": {"name": {"const": "f"}, "arguments": params}});
        let (out, notes) = relaxed(s, Depth::Needed);
        let args = &out["properties"]["arguments"];
        assert_eq!(args["$id"], "minfer-embedded-1");
        assert_eq!(args["properties"]["x"]["$ref"], "#/definitions/n");
        assert_eq!(args["properties"]["kids"]["items"]["$ref"], "#");
        assert!(notes.is_empty(), "{notes:?}");

        // Without a `$schema` to mark the document, a pointer that misses
        // the root is rebased onto the schema it resolves from.
        let params = json!({"type": "object", "$defs": {"n": {"type": "integer"}},
            "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"$ref": "#/$defs/missing"}}});
        let s = json!({"type": "object", "properties": {"arguments": params}});
        let (out, notes) = relaxed(s, Depth::Needed);
        let props = &out["properties"]["arguments"]["properties"];
        assert_eq!(props["x"]["$ref"], "#/properties/arguments/$defs/n");
        assert_eq!(props["y"], json!({}));
        assert!(notes.iter().any(|n| n.contains("missing")), "{notes:?}");
    }

    #[test]
    fn the_structure_depth_keeps_only_the_shape() {
        let s = json!({"type": "object",
            "properties": {"a": {"type": "string", "pattern": "^a", "format": "email"},
                           "r": {"$ref": "#", "minItems": 1, "description": "d"}},
            "patternProperties": {"^a": {}, "^ab": {}}, "additionalProperties": false,
            "required": ["a"]});
        let (out, notes) = relaxed(s, Depth::Structure);
        assert_eq!(
            out,
            json!({"type": "object",
                "properties": {"a": {"type": "string"}, "r": {"$ref": "#", "description": "d"}},
                "required": ["a"]})
        );
        assert!(!notes.is_empty());
    }

    #[test]
    fn lark_json_values_are_found_outside_strings_regexes_and_comments() {
        let g = concat!(
            "start: call // %json {\"x\": 1}\n",
            "# %json {\"y\": 2}\n",
            "call: \"<tool_call>\" \"%json {\" /a\\/%json/ <|im_end|> args \"\\n\" \"</tool_call>\"\n",
            "args: %json {\"type\": \"string\", \"pattern\": \"(?!a)\"}\n",
            "more: %regex {\"substring_words\": \"%json {}\"} %json\n  true\n",
        );
        let mut notes = Notes::default();
        let out = relax_lark(g, Depth::Needed, &mut notes);
        let spans = json_spans(g).unwrap();
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert!(
            out.contains("args: %json {\"type\":\"string\",\"x-guidance\":{\"lenient\":true}}\n"),
            "{out}"
        );
        assert!(out.ends_with("%json true\n"), "{out}");
        assert!(out.starts_with("start: call // %json {\"x\": 1}\n# %json {\"y\": 2}\n"));
        assert_eq!(notes.into_lines().len(), 1);
    }

    #[test]
    fn errors_and_notes_are_clipped_on_a_character_boundary() {
        assert_eq!(clip("abc", 5), "abc");
        let c = clip(&"é".repeat(100), 11);
        assert!(c.len() <= 11 && c.ends_with('…'), "{c}");
    }
}
