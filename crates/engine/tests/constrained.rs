//! Constrained output with the real models: for five JSON schemas and 20
//! seeds at temperature 1, every answer parses and validates (checked by
//! the `jsonschema` crate, independent of llguidance); GBNF grammars hold;
//! a seeded, constrained answer is the same alone and in a batch.

mod common;

use common::{cfg, loaded};
use minfer_engine::{
    Constraint, Event, GenId, GenerateConfig, PromptMode, SamplingParams, Scheduler, StopReason,
};

const SCHEMAS: [(&str, &str); 5] = [
    (
        "nested objects",
        r#"{"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 30},
            "address": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 30},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
              "required": ["city", "zip"], "additionalProperties": false}},
          "required": ["name", "address"], "additionalProperties": false}"#,
    ),
    (
        "array with min/max items",
        r#"{"type": "object", "properties": {
            "colors": {"type": "array", "items": {"type": "string", "maxLength": 12},
                       "minItems": 2, "maxItems": 4}},
          "required": ["colors"], "additionalProperties": false}"#,
    ),
    (
        "enums",
        r#"{"type": "object", "properties": {
            "language": {"enum": ["rust", "python", "c", "go"]},
            "level": {"enum": ["beginner", "expert"]}},
          "required": ["language", "level"], "additionalProperties": false}"#,
    ),
    (
        "numbers with ranges",
        r#"{"type": "object", "properties": {
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "score": {"type": "number", "minimum": 0, "maximum": 10},
            "year": {"type": "integer", "minimum": 1900, "maximum": 2100}},
          "required": ["age", "score", "year"], "additionalProperties": false}"#,
    ),
    (
        "required and optional fields",
        r#"{"type": "object", "properties": {
            "title": {"type": "string", "maxLength": 40},
            "done": {"type": "boolean"},
            "note": {"type": "string", "maxLength": 40},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5}},
          "required": ["title", "done"], "additionalProperties": false}"#,
    ),
];

const SEEDS: u64 = 20;

fn sampled(seed: u64, c: Constraint) -> GenerateConfig {
    GenerateConfig {
        max_tokens: 200,
        stop: Vec::new(),
        sampler: SamplingParams {
            temp: 1.0,
            seed,
            constraint: Some(c),
            ..SamplingParams::default()
        },
        logprobs: None,
    }
}

/// Runs every config on `prompt` together; returns text and stop reason.
fn run_all(
    s: &mut Scheduler,
    prompt: &[u32],
    cfgs: &[GenerateConfig],
) -> Vec<(String, StopReason)> {
    let ids: Vec<GenId> = cfgs.iter().map(|c| s.submit(prompt, c).unwrap()).collect();
    let mut out = vec![(Vec::new(), None); ids.len()];
    while out.iter().any(|o| o.1.is_none()) {
        s.step().unwrap();
        for (k, &id) in ids.iter().enumerate() {
            while let Some(ev) = s.next_event(id) {
                match ev {
                    Event::Text(b) => out[k].0.extend_from_slice(&b),
                    Event::Logprobs(_) | Event::PromptLogprobs(_) => {}
                    Event::Done(st) => out[k].1 = Some(st.stop_reason),
                }
            }
        }
    }
    out.into_iter()
        .map(|(t, r)| (String::from_utf8(t).expect("UTF-8"), r.unwrap()))
        .collect()
}

fn validity_table(file: &str) {
    let Some(m) = loaded(file) else { return };
    let mut s = m.scheduler(cfg(8192)).unwrap();
    let mut failures = Vec::new();
    for (name, schema) in SCHEMAS {
        let json: serde_json::Value = serde_json::from_str(schema).unwrap();
        let validator = jsonschema::validator_for(&json).expect("a valid schema");
        let user = format!("Reply with one JSON object matching this schema:\n{schema}");
        let prompt = m.prompt(None, &user, PromptMode::Chat, 8192).unwrap();
        let cfgs: Vec<GenerateConfig> = (0..SEEDS)
            .map(|seed| sampled(seed, Constraint::JsonSchema(schema.into())))
            .collect();
        let outs = run_all(&mut s, &prompt, &cfgs);
        let mut valid = 0;
        for (seed, (text, reason)) in outs.iter().enumerate() {
            let ok = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .is_some_and(|v| validator.is_valid(&v));
            if ok {
                valid += 1;
            } else {
                failures.push(format!("{name}, seed {seed} ({reason}): {text}"));
            }
        }
        println!("| {file} | {name} | {valid}/{SEEDS} | e.g. {}", outs[0].0);
    }
    assert!(
        failures.is_empty(),
        "{file}: invalid outputs:\n{}",
        failures.join("\n")
    );
}

#[test]
fn json_schema_outputs_validate_smollm2() {
    validity_table("smollm2-135m-instruct-q4_1.gguf");
}

#[test]
fn json_schema_outputs_validate_qwen() {
    validity_table("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
}

#[test]
fn gbnf_grammars_hold_with_a_real_model() {
    let Some(m) = loaded("smollm2-135m-instruct-q4_1.gguf") else {
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/grammars");
    let mut s = m.scheduler(cfg(8192)).unwrap();
    for (file, ask) in [
        ("arithmetic.gbnf", "Write two arithmetic equations."),
        ("list.gbnf", "List three fruits."),
        ("json.gbnf", "Give a JSON object describing a cat."),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let g = minfer_engine::Gbnf::parse(&text).unwrap();
        let prompt = m.prompt(None, ask, PromptMode::Chat, 8192).unwrap();
        let cfgs: Vec<GenerateConfig> = (0..4)
            .map(|seed| sampled(seed, Constraint::Gbnf(text.clone())))
            .collect();
        for (out, reason) in run_all(&mut s, &prompt, &cfgs) {
            if reason == StopReason::MaxTokens {
                // Cut short by the budget: only a prefix of the language.
                continue;
            }
            assert!(g.accepts(&out), "{file}: {out:?} ({reason})");
        }
    }
}

#[test]
fn a_seeded_constrained_answer_is_the_same_alone_in_a_batch_and_on_any_thread_count() {
    let Some(m) = loaded("smollm2-135m-instruct-q4_1.gguf") else {
        return;
    };
    let (_, schema) = SCHEMAS[4];
    let prompt = m
        .prompt(None, "A todo item as JSON.", PromptMode::Chat, 4096)
        .unwrap();
    let cfg_of = |seed| sampled(seed, Constraint::JsonSchema(schema.into()));
    // Alone on one thread, then among others on two.
    let one_thread = minfer_engine::EngineConfig {
        n_threads: 1,
        ..cfg(4096)
    };
    let mut alone = m.scheduler(one_thread).unwrap();
    let solo = run_all(&mut alone, &prompt, &[cfg_of(7)]);
    let mut crowd = m.scheduler(cfg(4096)).unwrap();
    let batch = run_all(
        &mut crowd,
        &prompt,
        &[cfg_of(1), cfg_of(7), cfg_of(2), cfg_of(3)],
    );
    assert_eq!(solo[0], batch[1]);
    assert_ne!(
        batch[0], batch[1],
        "different seeds should differ somewhere"
    );
}

#[test]
fn a_bad_schema_is_refused_before_any_token() {
    let Some(m) = loaded("smollm2-135m-instruct-q4_1.gguf") else {
        return;
    };
    let mut s: Scheduler = m.scheduler(cfg(512)).unwrap();
    let prompt = m.prompt(None, "hi", PromptMode::Chat, 512).unwrap();
    let e = s
        .submit(
            &prompt,
            // Lenient mode reads unknown keywords and odd types as "any";
            // a value that must be both a string and an integer is a
            // contradiction no relaxation can lift.
            &sampled(
                0,
                Constraint::JsonSchema(
                    r#"{"allOf": [{"type": "string"}, {"type": "integer"}]}"#.into(),
                ),
            ),
        )
        .unwrap_err();
    assert!(matches!(e, minfer_engine::EngineError::Grammar(_)), "{e}");
    let e = s
        .submit(&prompt, &sampled(0, Constraint::Gbnf("root ::= [".into())))
        .unwrap_err();
    assert!(e.to_string().contains("GBNF"), "{e}");
    assert_eq!(s.active(), 0);
}
