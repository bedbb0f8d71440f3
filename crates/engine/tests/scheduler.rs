//! Pulled generations on the real SmolLM2 model: several generations
//! stepped together give each the tokens it gets alone, a prompt that
//! shares a cached prefix computes only the rest and answers the same, and
//! cancelling frees a generation's cells at once.

mod common;

use minfer_engine::generate::generate;
use minfer_engine::{Engine, Event, GenerateConfig, GenerationStats, LoadedModel, StopReason};

use common::{cfg, drain, greedy};

fn loaded() -> Option<LoadedModel> {
    common::loaded(minfer_testutil::SMOLLM)
}

/// The closed loop on a single-sequence engine: the reference.
fn alone(m: &LoadedModel, prompt: &[u32], n: usize) -> (Vec<u8>, GenerationStats) {
    let mut e: Engine = m.engine(cfg(512)).unwrap();
    let mut out = Vec::new();
    let stats = generate(&mut e, m.tokenizer(), prompt, &greedy(n), |b| {
        out.extend_from_slice(b);
        true
    })
    .unwrap();
    (out, stats)
}

fn prompt(m: &LoadedModel, user: &str) -> Vec<u32> {
    m.prompt(None, user, minfer_engine::PromptMode::Chat, 512)
        .unwrap()
}

#[test]
fn generations_together_match_each_alone() {
    let Some(m) = loaded() else { return };
    let prompts = [
        prompt(&m, "Name three colours."),
        prompt(
            &m,
            "Write a haiku about the sea, then explain it in one sentence.",
        ),
        prompt(&m, "What is 2+2?"),
    ];
    let mut s = m.scheduler(cfg(1024)).unwrap();
    // Small chunks so that prefill chunks and decode rows share steps.
    s.set_chunk(8);
    let a = s.submit(&prompts[0], &greedy(24)).unwrap();
    s.step().unwrap();
    s.step().unwrap();
    let b = s.submit(&prompts[1], &greedy(24)).unwrap();
    s.step().unwrap();
    let c = s.submit(&prompts[2], &greedy(24)).unwrap();
    let got = drain(&mut s, &[a, b, c]);
    for (i, p) in prompts.iter().enumerate() {
        let (text, stats) = alone(&m, p, 24);
        assert_eq!(got[i].1.tokens, stats.tokens, "generation {i}: tokens");
        assert_eq!(got[i].0, text, "generation {i}: text");
        assert_eq!(got[i].1.stop_reason, stats.stop_reason);
    }
    assert_eq!(s.active(), 0);
    // Finished generations leave their sequences idle for prefix reuse.
    let u = s.runtime().usage();
    assert_eq!((u.live, u.idle), (0, 3));
}

#[test]
fn shared_prefix_is_reused_and_answers_the_same() {
    let Some(m) = loaded() else { return };
    let system = "You are a terse assistant. Answer in one line. ".repeat(6);
    let first = m
        .prompt(
            Some(&system),
            "Name a fruit.",
            minfer_engine::PromptMode::Chat,
            1024,
        )
        .unwrap();
    let second = m
        .prompt(
            Some(&system),
            "Name a tree.",
            minfer_engine::PromptMode::Chat,
            1024,
        )
        .unwrap();
    let common = first
        .iter()
        .zip(&second)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(common > 50, "the prompts share the system message");

    let mut s = m.scheduler(cfg(1024)).unwrap();
    let a = s.submit(&first, &greedy(8)).unwrap();
    drain(&mut s, &[a]);
    let b = s.submit(&second, &greedy(8)).unwrap();
    assert_eq!(s.times(b).map(|t| t.reused_tokens), None, "no token yet");
    s.step().unwrap();
    let t = s.times(b).unwrap();
    assert_eq!(t.reused_tokens, common);
    let got = drain(&mut s, &[b]).remove(0);
    let (text, stats) = alone(&m, &second, 8);
    assert_eq!(got.1.tokens, stats.tokens);
    assert_eq!(got.0, text);
}

#[test]
fn cancel_frees_cells_at_once_and_others_go_on() {
    let Some(m) = loaded() else { return };
    let p1 = prompt(&m, "Count from one to fifty in words.");
    let p2 = prompt(&m, "Say hello.");
    let mut s = m.scheduler(cfg(512)).unwrap();
    let a = s.submit(&p1, &greedy(200)).unwrap();
    let b = s.submit(&p2, &greedy(12)).unwrap();
    for _ in 0..5 {
        s.step().unwrap();
    }
    s.cancel(a);
    let evs: Vec<Event> = std::iter::from_fn(|| s.next_event(a)).collect();
    match evs.last() {
        Some(Event::Done(st)) => assert_eq!(st.stop_reason, StopReason::Cancelled),
        other => panic!("no Done after cancel: {other:?}"),
    }
    // The cancelled sequence is idle (evictable) at once.
    assert_eq!(s.runtime().usage().live, 1);
    let got = drain(&mut s, &[b]).remove(0);
    let (text, stats) = alone(&m, &p2, 12);
    assert_eq!(got.1.tokens, stats.tokens);
    assert_eq!(got.0, text);
}

#[test]
fn full_cache_ends_one_generation_not_the_others() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Count from one to fifty in words.");
    let short = prompt(&m, "Say hi.");
    // Room for both prompts and a few tokens, not for two long answers.
    let n_ctx = (p.len() + short.len() + 20) as u32;
    let mut s = m.scheduler(cfg(n_ctx)).unwrap();
    let a = s.submit(&p, &greedy(0)).unwrap();
    let b = s.submit(&short, &greedy(0)).unwrap();
    let got = drain(&mut s, &[a, b]);
    let reasons: Vec<StopReason> = got.iter().map(|g| g.1.stop_reason).collect();
    assert!(
        reasons.contains(&StopReason::CacheFull) || reasons.iter().all(|r| *r == StopReason::Eog),
        "{reasons:?}"
    );
    // Whatever ended first, every generated token up to its end matches
    // its solo run.
    for (g, prompt) in got.iter().zip([&p, &short]) {
        let (_, stats) = alone(&m, prompt, g.1.tokens.len().max(1));
        assert_eq!(g.1.tokens[..], stats.tokens[..g.1.tokens.len()]);
    }
}

#[test]
fn logprobs_report_every_generated_token_before_its_text() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Name three colours.");
    let mut s = m.scheduler(cfg(1024)).unwrap();
    let with = GenerateConfig {
        logprobs: Some(3),
        ..greedy(12)
    };
    let id = s.submit(&p, &with).unwrap();
    let mut reports = Vec::new();
    let mut text = Vec::new();
    let stats = 'run: loop {
        s.step().unwrap();
        while let Some(ev) = s.next_event(id) {
            match ev {
                Event::Text(b) => {
                    // Every byte shown belongs to a token already reported.
                    assert!(!reports.is_empty());
                    text.extend_from_slice(&b);
                }
                Event::Logprobs(lp) => reports.push(lp),
                Event::PromptLogprobs(_) => panic!("not asked for"),
                Event::Done(st) => break 'run st,
            }
        }
    };
    assert_eq!(
        reports.iter().map(|r| r.token).collect::<Vec<_>>(),
        stats.tokens
    );
    for r in &reports {
        assert!(r.logprob <= 0.0 && r.logprob.is_finite(), "{r:?}");
        assert_eq!(r.top.len(), 3);
        assert!(r.top.windows(2).all(|w| w[0].1 >= w[1].1), "{r:?}");
        // Greedy on the raw logits: the chosen token is the top one.
        assert_eq!(r.top[0], (r.token, r.logprob), "{r:?}");
    }
    // Reporting changes nothing else.
    let (plain_text, plain) = alone(&m, &p, 12);
    assert_eq!(stats.tokens, plain.tokens);
    assert_eq!(text, plain_text);

    let too_many = GenerateConfig {
        logprobs: Some(21),
        ..greedy(4)
    };
    assert!(s.submit(&p, &too_many).is_err());
}

/// Sampled (not greedy) generation of `n` tokens with `seed`.
fn sampled(n: usize, seed: u64) -> GenerateConfig {
    GenerateConfig {
        max_tokens: n,
        stop: Vec::new(),
        sampler: minfer_engine::SamplingParams {
            temp: 0.9,
            seed,
            ..Default::default()
        },
        logprobs: None,
    }
}

#[test]
fn n_choices_prefill_once_and_each_matches_its_request_alone() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Write one sentence about a cat.");
    let cfgs: Vec<GenerateConfig> = (0..3).map(|i| sampled(16, 40 + i)).collect();
    let mut s = m.scheduler(cfg(1024)).unwrap();
    let ids = s.submit_n(&p, &cfgs).unwrap();
    s.step().unwrap();
    // One prefill: the prompt's cells are shared by the three branches.
    assert_eq!(s.runtime().usage().used, p.len());
    assert_eq!(s.times(ids[1]).unwrap().reused_tokens, p.len());
    let got = drain(&mut s, &ids);
    let mut distinct = std::collections::HashSet::new();
    for (i, c) in cfgs.iter().enumerate() {
        let mut solo = m.scheduler(cfg(1024)).unwrap();
        let id = solo.submit(&p, c).unwrap();
        let want = drain(&mut solo, &[id]).remove(0);
        assert_eq!(got[i].1.tokens, want.1.tokens, "choice {i}");
        assert_eq!(got[i].0, want.0, "choice {i}");
        assert_eq!(got[i].1.prompt_tokens, p.len());
        distinct.insert(got[i].1.tokens.clone());
    }
    assert!(distinct.len() > 1, "different seeds give different answers");
}

#[test]
fn cancelling_the_prefilling_choice_ends_the_waiting_ones() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Write one sentence about a dog.");
    let mut s = m.scheduler(cfg(1024)).unwrap();
    s.set_chunk(4);
    let ids = s.submit_n(&p, &[greedy(8), greedy(8)]).unwrap();
    s.step().unwrap();
    s.cancel(ids[0]);
    let got = drain(&mut s, &ids);
    assert!(got.iter().all(|g| g.1.stop_reason == StopReason::Cancelled));
    assert_eq!(s.active(), 0);
    assert_eq!(s.runtime().usage().live, 0);
}

#[test]
fn scored_prompts_report_each_tokens_logprob_and_answer_the_same() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Name three colours.");
    let mut s = m.scheduler(cfg(1024)).unwrap();
    s.set_chunk(7);
    let ids = s.submit_scored(&p, &[greedy(6)], 3).unwrap();
    let mut scores = None;
    let mut tokens = Vec::new();
    'run: loop {
        s.step().unwrap();
        while let Some(ev) = s.next_event(ids[0]) {
            match ev {
                Event::PromptLogprobs(v) => {
                    assert!(tokens.is_empty(), "the prompt's scores come first");
                    scores = Some(v);
                }
                Event::Done(st) => {
                    tokens = st.tokens;
                    break 'run;
                }
                _ => {}
            }
        }
    }
    let scores = scores.expect("the prompt was scored");
    assert_eq!(scores.len(), p.len() - 1);
    // The reference: every row's logits from one evaluation of the prompt.
    let mut e: Engine = m.engine(cfg(1024)).unwrap();
    let all = e.eval(&p, true).unwrap().to_vec();
    let n_vocab = all.len() / p.len();
    for (i, sc) in scores.iter().enumerate() {
        assert_eq!(sc.token, p[i + 1]);
        let row = &all[i * n_vocab..(i + 1) * n_vocab];
        let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let z: f64 = row.iter().map(|&l| f64::from(l - max).exp()).sum();
        let want = f64::from(row[p[i + 1] as usize] - max) - z.ln();
        assert!(
            (f64::from(sc.logprob) - want).abs() < 1e-4,
            "{i}: {} vs {want}",
            sc.logprob
        );
        assert_eq!(sc.top.len(), 3);
    }
    let (_, plain) = alone(&m, &p, 6);
    assert_eq!(tokens, plain.tokens);
}

#[test]
fn progress_follows_the_prompt_chunk_by_chunk_then_the_tokens() {
    let Some(m) = loaded() else { return };
    let p = prompt(&m, "Write a haiku about the sea, then explain it.");
    let mut s = m.scheduler(cfg(1024)).unwrap();
    s.set_chunk(8);
    let id = s.submit(&p, &greedy(5)).unwrap();
    let first = s.progress(id).unwrap();
    assert_eq!(first.prompt_tokens, p.len());
    assert_eq!((first.evaluated_tokens, first.generated_tokens), (0, 0));
    assert_eq!(first.decode_secs, 0.0);
    let mut seen = vec![first.evaluated_tokens];
    let mut last_generated = None;
    let mut done = None;
    while done.is_none() {
        s.step().unwrap();
        let now = s.progress(id).unwrap();
        if now.evaluated_tokens < p.len() {
            seen.push(now.evaluated_tokens);
            assert_eq!(now.generated_tokens, 0);
        } else {
            // One token a step, counted once.
            let before = last_generated.replace(now.generated_tokens);
            assert_eq!(now.generated_tokens, before.map_or(1, |b| b + 1), "{now:?}");
            assert!(now.prefill_secs > 0.0);
        }
        while let Some(ev) = s.next_event(id) {
            if let Event::Done(st) = ev {
                done = Some(st);
            }
        }
    }
    // Every step of the prompt adds one chunk.
    let expected: Vec<usize> = (0..p.len()).step_by(8).collect();
    assert_eq!(seen, expected);
    assert_eq!(done.unwrap().generated_tokens, 5);
    assert!(s.progress(id).is_none(), "gone once Done is read");
}
