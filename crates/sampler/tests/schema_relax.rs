//! JSON schemas with keywords the grammar cannot enforce compile, relaxed,
//! instead of failing the request; what the grammar can enforce still is.
//!
//! Each schema is tried both as a plain JSON-schema constraint and as a
//! tool's parameters inside the Lark grammar the server builds for a call
//! (`%json` of `{"name": …, "arguments": <parameters>}` between the call
//! tags). A string is checked against the compiled constraint by driving a
//! greedy sampler over a byte vocabulary towards it, byte by byte: the
//! grammar accepts the string when every byte and then the end are let
//! through.

mod common;

use common::{constrained, whole_distribution};
use minfer_sampler::{Constraint, Sampler, SamplerError, TokenVocab};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// Every byte, then the end token.
fn vocab() -> (TokenVocab, u32) {
    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let eos = pieces.len() as u32;
    pieces.push(b"<eos>".to_vec());
    let mut special = vec![false; pieces.len()];
    special[eos as usize] = true;
    let tokenize = Box::new(|t: &str| t.bytes().map(u32::from).collect());
    (
        TokenVocab::new(pieces, special, vec![eos], tokenize).unwrap(),
        eos,
    )
}

fn sampler(v: &TokenVocab, c: &Constraint, temp: f32, seed: u64) -> Sampler {
    Sampler::with_vocab(whole_distribution(c, temp, seed), v).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether the grammar lets `s` through, and then the end.
fn accepts(v: &TokenVocab, eos: u32, c: &Constraint, s: &str) -> bool {
    let mut smp = sampler(v, c, 0.0, 0);
    let mut want = |t: u32| {
        let mut logits = vec![0.0; v.len()];
        logits[t as usize] = 10.0;
        smp.sample(&logits, &[]).unwrap() == t
    };
    s.bytes().all(|b| want(u32::from(b))) && want(eos)
}

/// The grammar the server builds for a call of the tool `name` (the
/// shape of `tools::constraint` for a named tool, tags as strings).
fn tool_grammar(name: &str, params: &Value) -> Constraint {
    let mut schema = json!({
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": false,
    });
    schema["x-guidance"] =
        json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "});
    Constraint::Lark(format!(
        "start: call \ncall: \"<tool_call>\" \"\\n\" args \"\\n\" \"</tool_call>\"\nargs: %json {schema}\n"
    ))
}

fn call_text(name: &str, args: &str) -> String {
    format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>")
}

/// One schema: JSON texts (in the enforced layout: one line, `", "` and
/// `": "`) it must accept and reject, and a word the relaxation notes must
/// contain (`None`: nothing noted, for keywords that are mere annotations).
struct Case {
    schema: Value,
    good: &'static [&'static str],
    bad: &'static [&'static str],
    noted: Option<&'static str>,
}

fn check(v: &TokenVocab, eos: u32, case: &Case) {
    let plain = Constraint::JsonSchema(case.schema.to_string());
    let tool = tool_grammar("f", &case.schema);
    for (label, c) in [("schema", &plain), ("tool", &tool)] {
        let relaxed = sampler(v, c, 0.0, 0).relaxed().to_vec();
        match case.noted {
            Some(word) => assert!(
                relaxed.iter().any(|n| n.contains(word)),
                "{label} {}: {word:?} not in {relaxed:?}",
                case.schema
            ),
            None => assert!(relaxed.is_empty(), "{label} {}: {relaxed:?}", case.schema),
        }
        let wrap = |s: &str| match label {
            "schema" => s.to_string(),
            _ => call_text("f", s),
        };
        for s in case.good {
            assert!(
                accepts(v, eos, c, &wrap(s)),
                "{label} {} refuses {s}",
                case.schema
            );
        }
        for s in case.bad {
            assert!(
                !accepts(v, eos, c, &wrap(s)),
                "{label} {} accepts {s}",
                case.schema
            );
        }
    }
}

fn task_create() -> Value {
    json!({"type":"object","properties":{"subject":{"type":"string"},"description":{"type":"string"},"activeForm":{"type":"string"},"metadata":{"type":"object","propertyNames":{"type":"string"},"additionalProperties":{}}},"required":["subject","description"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"})
}

#[test]
fn claude_codes_task_create_compiles_and_keeps_its_properties() {
    let (v, eos) = vocab();
    check(
        &v,
        eos,
        &Case {
            schema: task_create(),
            good: &[
                r#"{"subject": "a", "description": "b"}"#,
                r#"{"subject": "a", "description": "b", "activeForm": "c", "metadata": {"k": [1, null]}}"#,
            ],
            bad: &[
                r#"{"subject": "a"}"#,
                r#"{"subject": 1, "description": "b"}"#,
                r#"{"subject": "a", "description": "b", "extra": 1}"#,
                r#"{"subject": "a", "description": "b", "metadata": []}"#,
            ],
            noted: Some("propertyNames"),
        },
    );
}

/// Random draws under the TaskCreate call grammar are calls with the
/// required string arguments and nothing else.
#[test]
fn sampled_task_create_calls_follow_what_was_kept() {
    let (v, eos) = vocab();
    let c = tool_grammar("TaskCreate", &task_create());
    let mut finished = 0;
    for seed in 0..12 {
        let mut s = sampler(&v, &c, 1.0, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        for _ in 0..600 {
            let mut logits: Vec<f32> = (0..v.len()).map(|_| rng.gen_range(-2.0..2.0)).collect();
            // Strings end and objects close often enough to finish.
            logits[usize::from(b'"')] = 3.0;
            logits[usize::from(b'}')] = 3.0;
            logits[eos as usize] = 6.0;
            let t = s.sample(&logits, &[]).unwrap();
            if t == eos {
                break;
            }
            out.push(t as u8);
        }
        let Ok(text) = String::from_utf8(out) else {
            continue;
        };
        let Some(body) = text
            .strip_prefix("<tool_call>\n")
            .and_then(|b| b.strip_suffix("\n</tool_call>"))
        else {
            continue;
        };
        finished += 1;
        let call: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(call["name"], "TaskCreate", "{body}");
        let args = call["arguments"].as_object().unwrap();
        assert!(
            args["subject"].is_string() && args["description"].is_string(),
            "{body}"
        );
        for (k, val) in args {
            match k.as_str() {
                "subject" | "description" | "activeForm" => assert!(val.is_string(), "{body}"),
                "metadata" => assert!(val.is_object(), "{body}"),
                _ => panic!("unexpected argument {k}: {body}"),
            }
        }
    }
    assert!(finished >= 8, "only {finished} of 12 finished");
}

#[test]
fn keywords_the_grammar_cannot_enforce_are_relaxed() {
    let (v, eos) = vocab();
    for case in keyword_cases().iter().chain(&value_cases()) {
        check(&v, eos, case);
    }
}

/// Keywords dropped, or a schema reduced to its structure, and
/// annotations left alone.
fn keyword_cases() -> Vec<Case> {
    vec![
        // Overlapping patternProperties: llguidance needs them disjoint, so
        // the schema is retried reduced to its structure.
        Case {
            schema: json!({"type": "object", "properties": {"id": {"type": "integer"}},
                "required": ["id"], "additionalProperties": false,
                "patternProperties": {"^x": {"type": "string"}, "^xy": {"type": "integer"}}}),
            good: &[r#"{"id": 1}"#, r#"{"id": 1, "xa": "s"}"#],
            bad: &[r#"{"id": "1"}"#, r#"{"xa": "s"}"#],
            noted: Some("structure"),
        },
        // An unknown `$schema` URI would make llguidance fetch it.
        Case {
            schema: json!({"$schema": "https://example.com/my-meta-schema", "type": "object",
                "properties": {"a": {"type": "boolean"}}, "required": ["a"]}),
            good: &[r#"{"a": true}"#],
            bad: &[r#"{"a": 1}"#, "{}"],
            noted: Some("$schema"),
        },
        Case {
            schema: json!({"type": "object", "properties": {
                "u": {"type": "string", "format": "uri-reference"},
                "r": {"type": "string", "format": "regex"},
                "n": {"type": "integer", "format": "int32"}}, "required": ["u", "n"]}),
            good: &[
                r#"{"u": "../a b", "n": -4}"#,
                r#"{"u": "x", "r": "(", "n": 0}"#,
            ],
            bad: &[r#"{"u": 5, "n": 1}"#, r#"{"u": "x", "n": 1.5}"#],
            noted: Some("uri-reference"),
        },
        Case {
            schema: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a"],
                "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}, "else": {}}),
            good: &[r#"{"a": 1}"#, r#"{"a": 2, "b": "x"}"#],
            bad: &[r#"{"b": "x"}"#],
            noted: Some("if"),
        },
        Case {
            schema: json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "dependentRequired": {"a": ["b"]},
                "dependentSchemas": {"b": {"required": ["a"]}},
                "unevaluatedProperties": false}),
            good: &[r#"{"a": "x"}"#, r#"{"a": "x", "b": "y", "c": 1}"#],
            bad: &[r#"{"a": 1}"#],
            noted: Some("dependentRequired"),
        },
        Case {
            schema: json!({"type": "object", "properties": {
                "xs": {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}, "minContains": 2},
                "s": {"type": "string", "not": {"const": "no"}}}, "required": ["xs"]}),
            good: &[r#"{"xs": []}"#, r#"{"xs": [1, 2], "s": "no"}"#],
            bad: &[r#"{"xs": ["a"]}"#, r#"{"xs": [], "s": 1}"#],
            noted: Some("contains"),
        },
        // Annotations carry no constraint: nothing to relax, nothing noted.
        Case {
            schema: json!({"type": "object", "properties": {"a": {"type": "string",
                "contentMediaType": "application/json", "examples": ["{}"], "deprecated": true,
                "readOnly": true}}, "required": ["a"]}),
            good: &[r#"{"a": "x"}"#],
            bad: &[r#"{"a": 1}"#, "{}"],
            noted: None,
        },
    ]
}

/// Values the grammar takes as they are or within its limits: `const`,
/// `multipleOf`, lengths and bounds, patterns, alternatives.
fn value_cases() -> Vec<Case> {
    vec![
        // `const` with an object is enforced as it is.
        Case {
            schema: json!({"type": "object", "properties": {"c": {"const": {"a": [1, {"b": null}]}}},
                "required": ["c"]}),
            good: &[r#"{"c": {"a": [1, {"b": null}]}}"#],
            bad: &[r#"{"c": {"a": [2, {"b": null}]}}"#, r#"{"c": {}}"#],
            noted: None,
        },
        // multipleOf on a float: kept where llguidance can express it.
        Case {
            schema: json!({"type": "object", "properties": {
                "p": {"type": "number", "multipleOf": 0.01},
                "q": {"type": "number", "multipleOf": 0.1234567890123}}, "required": ["p"]}),
            good: &[r#"{"p": 0.25}"#, r#"{"p": 1, "q": 0.5}"#],
            bad: &[r#"{"p": 0.255}"#, r#"{"p": 1, "q": "x"}"#],
            noted: Some("multipleOf"),
        },
        Case {
            schema: json!({"type": "object", "properties": {
                "s": {"type": "string", "minLength": 10_000_000_000u64},
                "t": {"type": "string", "maxLength": 4_294_967_296u64},
                "xs": {"type": "array", "maxItems": 1_000_000_000_000u64, "items": {"type": "boolean"}},
                "n": {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 5}},
                "required": ["xs"]}),
            good: &[r#"{"s": "", "t": "t", "xs": [true], "n": -123456.5}"#],
            bad: &[r#"{"xs": [1]}"#, r#"{"xs": [], "n": 6}"#],
            noted: Some("minLength"),
        },
        Case {
            schema: json!({"type": "object", "properties": {
                "id": {"type": "string", "pattern": "^(?!tmp)[a-z]+$"},
                "w": {"type": "string", "pattern": "^[a-z]+$"}}, "required": ["id"]}),
            good: &[r#"{"id": "tmpx"}"#, r#"{"id": "1", "w": "ab"}"#],
            bad: &[r#"{"id": 1}"#, r#"{"id": "a", "w": "A"}"#],
            noted: Some("pattern"),
        },
        Case {
            schema: json!({"type": "object", "properties": {"v": {"oneOf": [
                    {"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]}},
                "required": ["v"]}),
            good: &[r#"{"v": "xy"}"#, r#"{"v": "abcdef"}"#, r#"{"v": "a"}"#],
            bad: &[r#"{"v": 2}"#, r#"{"v": "xyzw"}"#],
            noted: Some("oneOf"),
        },
        // Disjoint patternProperties are enforced.
        Case {
            schema: json!({"type": "object", "patternProperties": {"^n_": {"type": "integer"}},
                "additionalProperties": false}),
            good: &[r#"{"n_a": 1}"#, "{}"],
            bad: &[r#"{"n_a": "x"}"#, r#"{"b": 1}"#],
            noted: None,
        },
    ]
}

#[test]
fn references_are_resolved_within_the_tools_own_schema() {
    let (v, eos) = vocab();
    let cases = [
        // Zod's shape: `$schema` at the top, `#/definitions/…` references.
        Case {
            schema: json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"at": {"$ref": "#/definitions/pos"}}, "required": ["at"],
                "additionalProperties": false,
                "definitions": {"pos": {"type": "integer", "minimum": 1}}}),
            good: &[r#"{"at": 3}"#],
            bad: &[r#"{"at": 0}"#, r#"{"at": "3"}"#],
            noted: None,
        },
        // Zod's shape for a named schema: the top is a `$ref`.
        Case {
            schema: json!({"$schema": "http://json-schema.org/draft-07/schema#",
                "$ref": "#/definitions/Args",
                "definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}},
                    "required": ["q"], "additionalProperties": false}}}),
            good: &[r#"{"q": "x"}"#],
            bad: &[r#"{"q": 1}"#, "{}"],
            noted: None,
        },
        // Draft 4: `id`, boolean `exclusiveMinimum`.
        Case {
            schema: json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                "properties": {"n": {"$ref": "#/definitions/n"}}, "required": ["n"],
                "definitions": {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}}}),
            good: &[r#"{"n": 1}"#],
            bad: &[r#"{"n": 0}"#],
            noted: None,
        },
        // `$defs` and no `$schema`.
        Case {
            schema: json!({"type": "object", "$defs": {"tag": {"enum": ["a", "b"]}},
                "properties": {"tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}},
                "required": ["tags"]}),
            good: &[r#"{"tags": ["a", "b"]}"#],
            bad: &[r#"{"tags": ["c"]}"#],
            noted: None,
        },
        // Recursive: `#` is the tool's own schema, not the call around it.
        Case {
            schema: json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#"}}},
                "required": ["name"], "additionalProperties": false}),
            good: &[
                r#"{"name": "a"}"#,
                r#"{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}"#,
            ],
            bad: &[
                r#"{"name": "a", "children": [{"x": 1}]}"#,
                r#"{"name": "a", "children": [{"name": "f", "arguments": {"name": "b"}}]}"#,
            ],
            noted: None,
        },
        // Recursion through a `$ref` with a constraining sibling: reduced
        // to the structure.
        Case {
            schema: json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"n": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#", "minProperties": 1}}},
                "required": ["n"]}),
            good: &[r#"{"n": 1, "kids": [{"n": 2}]}"#],
            bad: &[r#"{"n": "1"}"#, r#"{"n": 1, "kids": [{"m": 2}]}"#],
            noted: Some("structure"),
        },
        // References that resolve nowhere (no network) are dropped.
        Case {
            schema: json!({"type": "object", "properties": {
                "a": {"$ref": "#/definitions/missing"},
                "b": {"$ref": "https://example.com/schemas/b.json", "type": "string"}},
                "required": ["b"]}),
            good: &[r#"{"a": [1], "b": "x"}"#],
            bad: &[r#"{"b": 1}"#],
            noted: Some("$ref"),
        },
    ];
    for case in &cases {
        check(&v, eos, case);
    }
}

/// Several tools in one grammar, as for `tool_choice: auto`: each keeps
/// its own arguments.
#[test]
fn several_tools_each_keep_their_arguments() {
    let (v, eos) = vocab();
    let call = |name: &str, params: Value| {
        json!({"type": "object", "properties": {"name": {"const": name}, "arguments": params},
            "required": ["name", "arguments"], "additionalProperties": false})
    };
    let tree = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"v": {"type": "integer"}, "sub": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["v"], "additionalProperties": false});
    let mut schema = json!({"anyOf": [call("TaskCreate", task_create()), call("Tree", tree)]});
    schema["x-guidance"] =
        json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "});
    let c = Constraint::Lark(format!(
        "start: call (\"\\n\" call)*\ncall: \"<tool_call>\" \"\\n\" args \"\\n\" \"</tool_call>\"\nargs: %json {schema}\n"
    ));
    let good = [
        call_text("TaskCreate", r#"{"subject": "a", "description": "b"}"#),
        call_text("Tree", r#"{"v": 1, "sub": [{"v": 2}]}"#),
    ];
    assert!(accepts(&v, eos, &c, &good.join("\n")));
    for bad in [
        call_text("TaskCreate", r#"{"v": 1}"#),
        call_text(
            "Tree",
            r#"{"v": 1, "sub": [{"subject": "a", "description": "b"}]}"#,
        ),
        call_text("Other", "{}"),
    ] {
        assert!(!accepts(&v, eos, &c, &bad), "{bad}");
    }
}

/// A schema that cannot be satisfied is still an error, and the message
/// says what is wrong without quoting the grammar: a tool-call grammar is
/// one line holding every schema, tens of kilobytes.
#[test]
fn an_error_is_short_and_quotes_no_grammar() {
    let (v, _) = vocab();
    let mut props = serde_json::Map::new();
    for i in 0..200 {
        props.insert(
            format!("field_{i}"),
            json!({"type": "string", "description": format!("the {i}th field, described at some length")}),
        );
    }
    props.insert("never".into(), json!(false));
    let params = json!({"type": "object", "properties": props, "required": ["never"]});
    let tool = tool_grammar("Big", &params);
    let Constraint::Lark(text) = &tool else {
        unreachable!()
    };
    assert!(text.len() > 10_000);
    let with = |c: Constraint| constrained(c, &v).unwrap_err();
    for c in [tool.clone(), Constraint::JsonSchema(params.to_string())] {
        let e = with(c).to_string();
        assert!(e.len() <= 500, "{} bytes: {e}", e.len());
        assert!(e.contains("nsatisfiable"), "{e}");
        for quoted in ["start:", "<tool_call>", "field_1", "described", "%json"] {
            assert!(!e.contains(quoted), "{quoted} in {e}");
        }
    }
    // A Lark syntax error after the schema: the position, not the text.
    let broken = format!("{text}oops: (\n");
    let e = with(Constraint::Lark(broken));
    assert!(matches!(&e, SamplerError::Grammar(_)), "{e}");
    let e = e.to_string();
    assert!(
        e.len() <= 500 && !e.contains("field_1") && !e.contains("%json"),
        "{e}"
    );
}

/// A schema that asks for strict compilation (`"lenient": false` in its
/// `x-guidance`) gets it: nothing is relaxed, the unknown key is an error.
#[test]
fn an_explicitly_strict_schema_is_not_relaxed() {
    let (v, _) = vocab();
    let schema = json!({"type": "object", "propertyNames": {"type": "string"},
        "x-guidance": {"lenient": false}});
    let e = constrained(Constraint::JsonSchema(schema.to_string()), &v).unwrap_err();
    assert!(
        matches!(&e, SamplerError::Grammar(m) if m.contains("propertyNames")),
        "{e}"
    );
}
