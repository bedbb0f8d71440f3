//! What the prompt-reuse examples share: synthetic prompts and a timed
//! request that reports its time to first token.

use std::time::Instant;

use minfer_engine::{Event, GenerateConfig, SamplingParams, Scheduler, SyntheticTokens};

/// `n` deterministic pseudo-random tokens below `n_vocab` from `seed`: the
/// same prompt on every run, so timings compare.
pub fn tokens(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    SyntheticTokens::new(seed, n_vocab).take(n).collect()
}

/// Submits `prompt` for four greedy tokens, steps until its first token
/// and then to the end; returns the seconds to the first token, the prompt
/// tokens taken from a cache, and the generated tokens.
pub fn timed_request(s: &mut Scheduler, prompt: &[u32]) -> (f64, usize, Vec<u32>) {
    let cfg = GenerateConfig {
        max_tokens: 4,
        stop: Vec::new(),
        sampler: SamplingParams::greedy(),
        logprobs: None,
    };
    let t = Instant::now();
    let id = s.submit(prompt, &cfg).expect("submit");
    let (secs, reused) = loop {
        s.step().expect("step");
        if let Some(times) = s.times(id) {
            break (t.elapsed().as_secs_f64(), times.reused_tokens);
        }
    };
    loop {
        while let Some(ev) = s.next_event(id) {
            if let Event::Done(stats) = ev {
                return (secs, reused, stats.tokens);
            }
        }
        s.step().expect("step");
    }
}
