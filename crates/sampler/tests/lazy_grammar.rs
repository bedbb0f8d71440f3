//! Lazy constraints: free output until the trigger shows, then the grammar
//! governs, starting with the trigger (a tool call's tag) or just after it
//! (the answer after a thinking block), even when the trigger ends inside
//! a token.

use minfer_sampler::{Constraint, Sampler, SamplingParams, TokenVocab, Trigger};

const WORDS: &[&str] = &[
    "hello", " world", "</", "th>{", "th>", "{", "}", "\"a\"", ": 1",
];

/// Every byte, the words above, a special `<tc>` token and an end token.
fn vocab() -> (TokenVocab, u32, u32) {
    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    pieces.extend(WORDS.iter().map(|w| w.as_bytes().to_vec()));
    let tc = pieces.len() as u32;
    pieces.push(b"<tc>".to_vec());
    let eos = pieces.len() as u32;
    pieces.push(b"<eos>".to_vec());
    let mut special = vec![false; pieces.len()];
    special[tc as usize] = true;
    special[eos as usize] = true;
    let tokenize = Box::new(|t: &str| t.bytes().map(u32::from).collect());
    let v = TokenVocab::new(pieces, special, vec![eos], tokenize).unwrap();
    (v, tc, eos)
}

fn id(word: &str) -> u32 {
    256 + WORDS.iter().position(|w| *w == word).unwrap() as u32
}

/// Logits that make `token` the greedy choice.
fn want(n: usize, token: u32) -> Vec<f32> {
    let mut l = vec![0.0; n];
    l[token as usize] = 10.0;
    l
}

fn sampler(v: &TokenVocab, grammar: &str, trigger: &str, include: bool) -> Sampler {
    let cfg = SamplingParams {
        temp: 0.0,
        constraint: Some(Constraint::Lark(grammar.into())),
        trigger: Some(Trigger {
            text: trigger.into(),
            include,
        }),
        ..SamplingParams::greedy()
    };
    Sampler::with_vocab(cfg, v).unwrap()
}

/// Samples with logits that ask for "hello" until the end token (at most
/// 16 tokens) and returns the text: once the grammar governs, whatever it
/// lets through instead.
fn text_asking_for_hello(s: &mut Sampler, v: &TokenVocab, eos: u32) -> String {
    let mut out = Vec::new();
    for _ in 0..16 {
        let t = s.sample(&want(v.len(), id("hello")), &[]).unwrap();
        if t == eos {
            break;
        }
        out.extend_from_slice(v.piece(t));
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn free_until_a_special_token_trigger_then_constrained_from_it() {
    let (v, tc, eos) = vocab();
    let n = v.len();
    let mut s = sampler(&v, r#"start: <tc> "{" "\"a\"" ": 1" "}""#, "<tc>", true);
    // Before the trigger nothing is masked: the grammar would refuse these.
    assert_eq!(s.sample(&want(n, id("hello")), &[]).unwrap(), id("hello"));
    assert_eq!(s.sample(&want(n, id(" world")), &[]).unwrap(), id(" world"));
    assert_eq!(s.sample(&want(n, eos), &[]).unwrap(), eos);
    assert_eq!(s.sample(&want(n, tc), &[]).unwrap(), tc);
    // Now the grammar governs: asked for "hello" or the end, it gives
    // what the grammar allows.
    assert_eq!(text_asking_for_hello(&mut s, &v, eos), "{\"a\": 1}");
    assert!(s.grammar_finished());
}

#[test]
fn a_trigger_split_across_tokens_replays_the_tail_into_the_grammar() {
    let (v, _, eos) = vocab();
    let n = v.len();
    // The grammar starts after "</th>"; the token that ends the trigger
    // also carries the grammar's first byte.
    let mut s = sampler(&v, r#"start: "{" "\"a\"" "}""#, "</th>", false);
    assert_eq!(s.sample(&want(n, id("</")), &[]).unwrap(), id("</"));
    assert_eq!(s.sample(&want(n, id("th>{")), &[]).unwrap(), id("th>{"));
    // The `{` of the split token was consumed: what follows completes it.
    assert_eq!(text_asking_for_hello(&mut s, &v, eos), "\"a\"}");
}

#[test]
fn without_the_trigger_the_output_is_never_constrained() {
    let (v, _, eos) = vocab();
    let n = v.len();
    let mut s = sampler(&v, r#"start: "{" "}""#, "</th>", false);
    for w in ["hello", "th>", " world", "</"] {
        assert_eq!(s.sample(&want(n, id(w)), &[]).unwrap(), id(w));
    }
    assert_eq!(s.sample(&want(n, eos), &[]).unwrap(), eos);
    assert!(!s.grammar_finished());
}
