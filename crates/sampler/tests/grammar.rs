//! Constrained sampling over a toy vocabulary (every byte, some multi-byte
//! tokens, an end token) driven by random logits: everything a grammar lets
//! through must be in its language, checked by an independent recognizer
//! (GBNF) or parser and schema check (JSON).

mod common;

use std::path::PathBuf;

use common::{constrained, whole_distribution};
use minfer_sampler::{Constraint, Gbnf, Sampler, SamplerError, SamplingParams, TokenVocab};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const WORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "\": ",
    ", \"",
    "\"",
    "{\"",
    "}",
    "[",
    "]",
    "  ",
    "\n",
    "the",
    " the",
    "ing",
    "123",
    "e+",
    "0.",
    "if (",
    "int ",
    "return ",
    ";\n",
    "()",
    "1. ",
    "- ",
    "こんにちは",
    "é",
];

fn toy_vocab() -> (TokenVocab, u32) {
    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    pieces.extend(WORDS.iter().map(|w| w.as_bytes().to_vec()));
    let eos = pieces.len() as u32;
    pieces.push(b"<eos>".to_vec());
    let mut special = vec![false; pieces.len()];
    special[eos as usize] = true;
    // Greedy longest-match tokenization is all DRY needs here.
    let words: Vec<Vec<u8>> = pieces.clone();
    let tokenize = Box::new(move |text: &str| {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let (id, len) = words
                .iter()
                .enumerate()
                .take(eos as usize)
                .filter(|(_, w)| !w.is_empty() && b[i..].starts_with(w))
                .map(|(id, w)| (id as u32, w.len()))
                .max_by_key(|&(_, l)| l)
                .unwrap_or((u32::from(b[i]), 1));
            out.push(id);
            i += len;
        }
        out
    });
    (
        TokenVocab::new(pieces, special, vec![eos], tokenize).unwrap(),
        eos,
    )
}

/// Samples up to `max` tokens under `c` from random logits that favour the
/// end token (so outputs finish); `None` when the budget ran out first.
fn generate(vocab: &TokenVocab, eos: u32, c: &Constraint, seed: u64, max: usize) -> Option<String> {
    let mut s = Sampler::with_vocab(whole_distribution(c, 1.0, seed), vocab).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut out = Vec::new();
    let mut history = Vec::new();
    for _ in 0..max {
        let mut logits: Vec<f32> = (0..vocab.len()).map(|_| rng.gen_range(-2.0..2.0)).collect();
        logits[eos as usize] = 6.0;
        let t = s.sample(&logits, &history).unwrap();
        if t == eos || s.grammar_finished() {
            return Some(String::from_utf8(out).expect("grammar output is UTF-8"));
        }
        out.extend_from_slice(vocab.piece(t));
        history.push(t);
    }
    None
}

/// A JSON object per RFC 8259, written independently of llguidance.
const JSON_OBJECT_RFC: &str = r#"
root   ::= ws object ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
"#;

fn grammars_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/grammars")
}

#[test]
fn every_llama_cpp_example_grammar_yields_only_accepted_strings() {
    let (vocab, eos) = toy_vocab();
    let mut names: Vec<PathBuf> = std::fs::read_dir(grammars_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gbnf"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 8,
        "the example grammars are missing: {names:?}"
    );
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let g = Gbnf::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let c = Constraint::Gbnf(text);
        let mut finished = 0;
        for seed in 0..12 {
            if let Some(s) = generate(&vocab, eos, &c, seed, 400) {
                finished += 1;
                assert!(
                    g.accepts(&s),
                    "{}: seed {seed} produced {s:?}",
                    path.display()
                );
            }
        }
        assert!(
            finished >= 6,
            "{}: only {finished} of 12 outputs finished",
            path.display()
        );
    }
}

#[test]
fn json_schema_output_parses_and_obeys_the_schema() {
    let (vocab, eos) = toy_vocab();
    let schema = r#"{"type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": -5, "maximum": 5},
            "tag": {"enum": ["red", "green"]},
            "xs": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}
        },
        "required": ["n", "xs"], "additionalProperties": false}"#;
    let c = Constraint::JsonSchema(schema.into());
    let mut finished = 0;
    for seed in 0..20 {
        let Some(s) = generate(&vocab, eos, &c, seed, 300) else {
            continue;
        };
        finished += 1;
        let v: serde_json::Value =
            serde_json::from_str(&s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        // serde_json reads "-0" as a float; it is still the integer 0.
        let n = v["n"].as_f64().unwrap_or_else(|| panic!("{s}"));
        assert!(n.fract() == 0.0 && (-5.0..=5.0).contains(&n), "{s}");
        let xs = v["xs"].as_array().unwrap();
        assert!(
            (1..=3).contains(&xs.len()) && xs.iter().all(|x| x.is_boolean()),
            "{s}"
        );
        if let Some(t) = v.get("tag") {
            assert!(t == "red" || t == "green", "{s}");
        }
        let keys = v.as_object().unwrap().len();
        assert!(keys <= 3, "{s}");
    }
    assert!(finished >= 15, "only {finished} of 20 finished");

    // Any object: random logits write numbers like 1e+1235 that serde_json
    // refuses, so the check is RFC 8259's grammar itself.
    let rfc = Gbnf::parse(JSON_OBJECT_RFC).unwrap();
    let c = Constraint::JsonObject;
    let mut finished = 0;
    for seed in 0..10 {
        if let Some(s) = generate(&vocab, eos, &c, seed, 300) {
            finished += 1;
            assert!(rfc.accepts(&s), "{s:?}");
        }
    }
    assert!(finished >= 5, "only {finished} of 10 finished");
}

#[test]
fn bad_grammars_and_schemas_are_errors_before_any_token() {
    let (vocab, _) = toy_vocab();
    let with = |c: Constraint| constrained(c, &vocab).unwrap_err();
    assert!(matches!(
        with(Constraint::Gbnf("root ::= (".into())),
        SamplerError::Grammar(_)
    ));
    assert!(
        matches!(with(Constraint::Gbnf("root ::= undefined-rule".into())), SamplerError::Grammar(m) if m.contains("undefined-rule"))
    );
    assert!(
        matches!(with(Constraint::JsonSchema("{not json".into())), SamplerError::Grammar(m) if m.contains("not valid JSON"))
    );
    assert!(matches!(
        with(Constraint::JsonSchema("[1, 2]".into())),
        SamplerError::Grammar(_)
    ));
    // A keyword the grammar cannot enforce is relaxed and named, not
    // refused (tests/schema_relax.rs has the rest).
    let s = constrained(
        Constraint::JsonSchema(r#"{"type": "string", "format": "no-such-format"}"#.into()),
        &vocab,
    )
    .unwrap();
    assert!(
        s.relaxed().iter().any(|n| n.contains("no-such-format")),
        "{:?}",
        s.relaxed()
    );
    // An unsatisfiable schema is still an error.
    let e = with(Constraint::JsonSchema(
        r#"{"type": "integer", "minimum": 3, "maximum": 2}"#.into(),
    ));
    assert!(matches!(e, SamplerError::Grammar(_)), "{e}");
    assert!(matches!(
        with(Constraint::Lark("start: ???".into())),
        SamplerError::Grammar(_)
    ));
    // Without a vocabulary there is nothing to mask.
    let e = Sampler::new(SamplingParams {
        constraint: Some(Constraint::JsonObject),
        ..SamplingParams::default()
    })
    .unwrap_err();
    assert!(matches!(e, SamplerError::NeedsVocab(_)));
}

#[test]
fn a_grammar_that_only_accepts_the_end_finishes() {
    let (vocab, eos) = toy_vocab();
    let c = Constraint::Gbnf(r#"root ::= "yes" | "no""#.into());
    for seed in 0..10 {
        let s = generate(&vocab, eos, &c, seed, 20).expect("finishes");
        assert!(s == "yes" || s == "no", "{s}");
    }
}

#[test]
fn a_vocabulary_llguidance_cannot_use_is_one_clear_error() {
    let pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let n = pieces.len();
    // No end-of-generation token: a grammar could never finish.
    let v = TokenVocab::new(
        pieces.clone(),
        vec![false; n],
        vec![],
        Box::new(|_| Vec::new()),
    )
    .unwrap();
    let e = constrained(Constraint::JsonObject, &v).unwrap_err();
    assert!(
        matches!(&e, SamplerError::GrammarVocab(m) if m.contains("end-of-generation")),
        "{e}"
    );
    // Inconsistent lists are refused when the vocabulary is built.
    assert!(TokenVocab::new(
        pieces.clone(),
        vec![false; 3],
        vec![0],
        Box::new(|_| Vec::new())
    )
    .is_err());
    assert!(TokenVocab::new(pieces, vec![false; n], vec![999], Box::new(|_| Vec::new())).is_err());
}

/// A grammar lent to another thread for its mask and given back samples
/// exactly as one that never left; while it is away, sampling is refused
/// rather than unconstrained.
#[test]
fn a_lent_grammar_refuses_sampling_and_comes_back_unchanged() {
    let (vocab, eos) = toy_vocab();
    let c = Constraint::Gbnf(JSON_OBJECT_RFC.into());
    let params = SamplingParams {
        temp: 1.0,
        seed: 7,
        constraint: Some(c),
        ..SamplingParams::default()
    };
    let mut kept = Sampler::with_vocab(params.clone(), &vocab).unwrap();
    let mut lent = Sampler::with_vocab(params, &vocab).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut history = Vec::new();
    for _ in 0..40 {
        let mut logits: Vec<f32> = (0..vocab.len()).map(|_| rng.gen_range(-2.0..2.0)).collect();
        logits[eos as usize] = -10.0;
        let mut loan = lent.lend_grammar().expect("a grammar to lend");
        assert!(lent.has_grammar() && lent.lend_grammar().is_none());
        assert_eq!(
            lent.sample(&logits, &history),
            Err(SamplerError::GrammarLent)
        );
        loan = std::thread::spawn(move || {
            loan.prepare().unwrap();
            loan
        })
        .join()
        .unwrap();
        lent.restore_grammar(loan);
        let t = kept.sample(&logits, &history).unwrap();
        assert_eq!(lent.sample(&logits, &history).unwrap(), t);
        if kept.grammar_finished() {
            break;
        }
        history.push(t);
    }
}
