//! Speculative decoding gives exactly the answers of decoding without it:
//! greedy and seeded sampling, with a draft model and with prompt lookup,
//! at one and two threads, with the cells of rejected guesses poisoned so
//! that reading one would change the answer.

mod common;

use std::sync::Arc;

use minfer_engine::{
    DraftModel, EngineConfig, GenId, GenerateConfig, GenerationStats, LoadedModel, SamplingParams,
    SpecConfig, Speculation,
};

use common::drain;

fn cfg(threads: usize) -> EngineConfig {
    EngineConfig {
        n_ctx: 1024,
        n_threads: threads,
        ..EngineConfig::default()
    }
}

fn greedy(n: usize) -> GenerateConfig {
    common::greedy(n)
}

fn sampled(n: usize, seed: u64) -> GenerateConfig {
    GenerateConfig {
        max_tokens: n,
        stop: Vec::new(),
        sampler: SamplingParams {
            temp: 0.9,
            top_k: 40,
            top_p: 0.95,
            seed,
            ..SamplingParams::default()
        },
        logprobs: None,
    }
}

/// How to speculate in one run.
#[derive(Clone, Copy)]
enum How<'a> {
    Plain,
    Draft(&'a LoadedModel, SpecConfig),
    Lookup(SpecConfig),
}

fn speculation(target: &LoadedModel, how: How, threads: usize) -> Option<Speculation> {
    match how {
        How::Plain => None,
        How::Draft(d, c) => {
            let rt = d.runtime(cfg(threads)).unwrap();
            let draft = DraftModel::new(
                rt,
                d.tokenizer(),
                target.tokenizer(),
                target.model().n_vocab(),
            )
            .unwrap();
            Some(Speculation::new(c, Some(draft)).unwrap())
        }
        How::Lookup(c) => Some(Speculation::new(c, None).unwrap()),
    }
}

/// Runs `prompts` together on `target` with `cfgs`, speculating as `how`.
fn run(
    target: &LoadedModel,
    how: How,
    threads: usize,
    prompts: &[Vec<u32>],
    cfgs: &[GenerateConfig],
) -> Vec<(Vec<u8>, GenerationStats)> {
    let mut s = target.scheduler(cfg(threads)).unwrap();
    s.set_speculation(speculation(target, how, threads));
    s.set_poison_rejected(true);
    let ids: Vec<GenId> = prompts
        .iter()
        .zip(cfgs)
        .map(|(p, c)| s.submit(p, c).unwrap())
        .collect();
    drain(&mut s, &ids)
}

/// Every guess checked, as many as there are: the most rollbacks.
fn eager(draft_max: usize, lookup: usize) -> SpecConfig {
    SpecConfig {
        draft_max,
        lookup_max: lookup,
        adaptive: false,
        ..SpecConfig::default()
    }
}

/// Asserts that speculating as `how` gives the plain tokens for each
/// prompt and configuration at 1 and 2 threads; returns the summed
/// (drafted, accepted) counts.
fn assert_identical(
    target: &LoadedModel,
    how: How,
    prompts: &[Vec<u32>],
    cfgs: &[GenerateConfig],
) -> (u64, u64) {
    let mut counts = (0, 0);
    for threads in [1, 2] {
        let plain = run(target, How::Plain, threads, prompts, cfgs);
        let spec = run(target, how, threads, prompts, cfgs);
        for (k, ((pt, ps), (st, ss))) in plain.iter().zip(&spec).enumerate() {
            assert_eq!(
                ps.tokens, ss.tokens,
                "generation {k} at {threads} threads differs with speculation"
            );
            assert_eq!(pt, st);
            assert_eq!(ps.stop_reason, ss.stop_reason);
            assert_eq!(ps.spec.drafted, 0);
            assert!(ss.spec.accepted <= ss.spec.drafted);
            counts.0 += ss.spec.drafted;
            counts.1 += ss.spec.accepted;
        }
    }
    counts
}

fn chat(m: &LoadedModel, user: &str) -> Vec<u32> {
    m.prompt(None, user, minfer_engine::PromptMode::Chat, 1024)
        .unwrap()
}

const CODE: &str = "Complete this Python function:\n\ndef fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
const EDIT: &str = "Rename the variable `total` to `acc` in this code and show the whole result:\n\n```python\ndef sum_squares(values):\n    total = 0\n    for v in values:\n        total += v * v\n    return total\n\n\ndef mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n```";

const PROSE: &str =
    "Write a short story about a lighthouse keeper who finds a message in a bottle.";

#[test]
fn qwen_pair_greedy_and_seeded_are_identical_with_the_draft() {
    let (Some(target), Some(draft)) = (
        common::loaded(minfer_testutil::QWEN_1_5B),
        common::loaded(minfer_testutil::QWEN),
    ) else {
        return;
    };
    let prompts = [chat(&target, CODE), chat(&target, PROSE)];
    let (drafted, accepted) = assert_identical(
        &target,
        How::Draft(&draft, eager(4, 0)),
        &prompts,
        &[greedy(40), greedy(40)],
    );
    assert!(accepted > 0, "the draft never guessed right");
    assert!(
        drafted > accepted,
        "no guess was rejected: nothing rolled back"
    );
    let (drafted, _) = assert_identical(
        &target,
        How::Draft(&draft, eager(3, 0)),
        &prompts,
        &[sampled(32, 7), sampled(32, 8)],
    );
    assert!(drafted > 0);
}

#[test]
fn lookup_greedy_and_seeded_are_identical_on_an_edit() {
    let Some(m) = common::loaded(minfer_testutil::QWEN) else {
        return;
    };
    let prompts = [chat(&m, EDIT), chat(&m, CODE)];
    let (drafted, accepted) = assert_identical(
        &m,
        How::Lookup(eager(8, 3)),
        &prompts,
        &[greedy(64), greedy(24)],
    );
    assert!(accepted > 0 && drafted > accepted, "{drafted} {accepted}");
    assert_identical(
        &m,
        How::Lookup(eager(8, 3)),
        &prompts,
        &[sampled(48, 3), sampled(24, 11)],
    );
    // The adaptive rule changes how many guesses are checked, never the
    // tokens.
    assert_identical(
        &m,
        How::Lookup(SpecConfig {
            lookup_max: 3,
            ..SpecConfig::default()
        }),
        &prompts,
        &[greedy(64), sampled(24, 5)],
    );
}

#[test]
fn tiny_fixture_drafting_for_itself_and_lookup_are_identical() {
    let path = minfer_testutil::repo_model("qwen3-tiny-q8_0.gguf");
    let m = LoadedModel::open(&path).expect("the tiny fixture loads");
    let d = LoadedModel::open(&path).expect("the tiny fixture loads");
    let prompts: Vec<Vec<u32>> = vec![
        m.tokenize("The quick brown fox"),
        m.tokenize("1 2 3 1 2 3 1 2"),
    ];
    let cfgs = [greedy(48), sampled(48, 9)];
    let (drafted, accepted) = assert_identical(&m, How::Draft(&d, eager(5, 0)), &prompts, &cfgs);
    // Greedy drafts of the model itself are right; sampled ones often not.
    assert!(accepted > 0 && drafted > accepted, "{drafted} {accepted}");
    assert_identical(&m, How::Lookup(eager(6, 2)), &prompts, &cfgs);
    assert_identical(
        &m,
        How::Draft(
            &d,
            SpecConfig {
                lookup_max: 2,
                ..eager(4, 0)
            },
        ),
        &prompts,
        &cfgs,
    );
}

#[test]
fn a_draft_with_another_vocabulary_is_refused() {
    let (Some(target), Some(other)) = (
        common::loaded(minfer_testutil::QWEN),
        common::loaded(minfer_testutil::SMOLLM),
    ) else {
        return;
    };
    let rt = other.runtime(cfg(1)).unwrap();
    let err = DraftModel::new(
        rt,
        other.tokenizer(),
        target.tokenizer(),
        target.model().n_vocab(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot draft for this model"), "{err}");
    let _ = Arc::clone(target.model());
}

/// Three turns of a chat (a caller-owned sequence that goes on from what
/// the last answer left in the cache), speculating as `how`: the answers
/// and the cached tokens after each turn.
fn chat_turns(m: &LoadedModel, how: How, threads: usize) -> Vec<(String, Vec<u32>)> {
    let mut s = m.scheduler(cfg(threads)).unwrap();
    s.set_speculation(speculation(m, how, threads));
    s.set_poison_rejected(true);
    let mut chat = minfer_engine::ChatSession::new(m, &mut s, None, greedy(40)).unwrap();
    let mut out = Vec::new();
    for user in [
        "List the numbers from one to ten in words.",
        "Now repeat that list backwards.",
        "And once more, forwards.",
    ] {
        chat.send(m, &mut s, user).unwrap();
        let mut text = Vec::new();
        chat.complete(
            m,
            &mut s,
            |b| {
                text.extend_from_slice(b);
                true
            },
            || true,
        )
        .unwrap();
        let cached = s.runtime().history(chat.sequence()).unwrap().to_vec();
        out.push((String::from_utf8_lossy(&text).into_owned(), cached));
    }
    out
}

#[test]
fn chat_turns_leave_the_same_answers_and_cache_with_speculation() {
    let Some(m) = common::loaded(minfer_testutil::SMOLLM) else {
        return;
    };
    let d = common::loaded(minfer_testutil::SMOLLM).unwrap();
    let plain = chat_turns(&m, How::Plain, 2);
    for how in [How::Lookup(eager(6, 3)), How::Draft(&d, eager(4, 2))] {
        let spec = chat_turns(&m, how, 2);
        for (k, (a, b)) in plain.iter().zip(&spec).enumerate() {
            assert_eq!(a.0, b.0, "turn {k}'s answer");
            assert_eq!(a.1, b.1, "the cache after turn {k}");
        }
    }
}

#[test]
fn constrained_answers_are_identical_with_speculation() {
    let Some(m) = common::loaded(minfer_testutil::QWEN) else {
        return;
    };
    let schema = r#"{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string","enum":["red","green","blue"]}}},"required":["name","tags"]}"#;
    let with = |mut c: GenerateConfig| {
        c.sampler.constraint = Some(minfer_engine::Constraint::JsonSchema(schema.into()));
        c
    };
    let prompts = [chat(
        &m,
        "Describe a parrot as JSON with a name and colour tags: red, green, blue, red, green.",
    )];
    for cfg in [with(greedy(48)), with(sampled(48, 4))] {
        let (drafted, _) = assert_identical(
            &m,
            How::Lookup(eager(6, 2)),
            &prompts,
            std::slice::from_ref(&cfg),
        );
        assert!(drafted > 0);
    }
}
