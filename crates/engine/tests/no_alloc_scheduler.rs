//! Steady decode steps of [`Scheduler::step`], the path `minfer run`,
//! `minfer chat` and the server take, allocate nothing once warm, greedy
//! or sampled with a seed, when the caller hands every text event back
//! ([`Scheduler::recycle`], as `run` and `chat` do); under a JSON schema
//! only llguidance allocates, inside its mask computation, which cannot be
//! avoided from outside it: the count is only bounded (see
//! [`GRAMMAR_ALLOCS_PER_STEP`]). Its own test binary,
//! with one test, because the counter sees every thread of the process
//! (see `minfer_testutil::counting`).

mod common;

use minfer_engine::{
    Constraint, Event, GenId, GenerateConfig, PromptMode, SamplingParams, Scheduler,
};
use minfer_testutil::counting::{count, Counting};
use minfer_testutil::SMOLLM;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Steps counted per case, after the warm-up.
const COUNTED: usize = 24;

/// The average allocations per step allowed under a JSON schema (about
/// 32 here, a few hundred in a step that meets a new lexer state): mostly
/// llguidance's, which allocates every mask it computes and grows its
/// lexer's states as the text goes on.
const GRAMMAR_ALLOCS_PER_STEP: usize = 64;

/// Steps `s` `n` times, pulling the events of `id` after each step
/// (outside the count) and handing them back; returns the allocations
/// inside `step` itself.
fn steps(s: &mut Scheduler, id: GenId, n: usize) -> usize {
    let mut allocs = 0;
    for _ in 0..n {
        let (more, a) = count(|| s.step().unwrap());
        assert!(more, "the generation ended early");
        allocs += a;
        while let Some(ev) = s.next_event(id) {
            assert!(!matches!(ev, Event::Done(_)), "the generation ended early");
            s.recycle(ev);
        }
    }
    allocs
}

#[test]
fn steady_scheduler_steps_do_not_allocate() {
    let Some(m) = common::loaded(SMOLLM) else {
        return;
    };
    let mut s = m.scheduler(common::cfg(1024)).unwrap();
    let prompt = m
        .prompt(
            None,
            "Write a long story about a dragon.",
            PromptMode::Chat,
            1024,
        )
        .unwrap();
    let cases = [
        ("greedy", common::greedy(400)),
        (
            "sampled",
            GenerateConfig {
                max_tokens: 400,
                sampler: SamplingParams {
                    temp: 0.8,
                    seed: 42,
                    ..SamplingParams::default()
                },
                ..GenerateConfig::default()
            },
        ),
        (
            "json schema",
            GenerateConfig {
                max_tokens: 400,
                sampler: SamplingParams {
                    temp: 0.8,
                    seed: 42,
                    // A title, then the story: two strings, so that the
                    // sampled object outlasts the counted steps (with the
                    // story alone, this draw closed it within them).
                    constraint: Some(Constraint::JsonSchema(
                        r#"{"type": "object", "properties": {"title": {"type": "string"}, "story": {"type": "string"}}, "required": ["title", "story"]}"#.into(),
                    )),
                    ..SamplingParams::default()
                },
                ..GenerateConfig::default()
            },
        ),
    ];
    for (name, cfg) in cases {
        let constrained = cfg.sampler.constraint.is_some();
        let id = s.submit(&prompt, &cfg).unwrap();
        // The prefill, the first decode steps (graph builds, buffers
        // growing to their size, the grammar helper starting).
        steps(&mut s, id, 8);
        let allocs = steps(&mut s, id, COUNTED);
        eprintln!("{name}: {allocs} allocations in {COUNTED} steps");
        if constrained {
            assert!(
                allocs <= GRAMMAR_ALLOCS_PER_STEP * COUNTED,
                "{name}: {allocs} allocations in {COUNTED} steps"
            );
        } else {
            assert_eq!(allocs, 0, "{name}: allocations in {COUNTED} steps");
        }
        s.cancel(id);
        while s.next_event(id).is_some() {}
    }
}
