//! Time to first token with and without a cached prefix: a first request
//! with a `N`-token prompt runs to completion, then a second request whose
//! prompt shares its first `SHARED` tokens starts; its time to first token
//! is compared with the same prompt on a cold runtime.
//!
//! ```sh
//! cargo run --release -p minfer-engine --example prefix_reuse -- MODEL.gguf [N] [SHARED] [THREADS]
//! ```

use std::time::Instant;

use minfer_engine::{EngineConfig, Event, GenerateConfig, LoadedModel, SamplingParams, Scheduler};

fn tokens(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n_vocab as u64) as u32
        })
        .collect()
}

/// Submits `prompt` and steps until its first token; returns the seconds
/// that took and the prompt tokens taken from the cache. Then finishes the
/// generation.
fn first_token(s: &mut Scheduler, prompt: &[u32]) -> (f64, usize) {
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
        s.step().expect("step");
        let mut done = false;
        while let Some(ev) = s.next_event(id) {
            done |= matches!(ev, Event::Done(_));
        }
        if done {
            break;
        }
    }
    (secs, reused)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: prefix_reuse MODEL.gguf [N] [SHARED] [THREADS]");
    let n: usize = args.get(2).map_or(1000, |a| a.parse().expect("N"));
    let shared: usize = args.get(3).map_or(900, |a| a.parse().expect("SHARED"));
    let threads: usize = args.get(4).map_or(2, |a| a.parse().expect("THREADS"));
    let m = LoadedModel::open(std::path::Path::new(path)).expect("model");
    let cfg = EngineConfig {
        n_ctx: 4096,
        n_threads: threads,
        ..EngineConfig::default()
    };
    let v = m.model().n_vocab();
    let first = tokens(1, n, v);
    let mut second = first[..shared].to_vec();
    second.extend(tokens(2, n - shared, v));

    let mut cold = m.scheduler(cfg).expect("scheduler");
    let (t_cold, r_cold) = first_token(&mut cold, &second);
    let mut warm = m.scheduler(cfg).expect("scheduler");
    first_token(&mut warm, &first);
    let (t_warm, r_warm) = first_token(&mut warm, &second);
    println!(
        "{n}-token prompt sharing {shared} tokens with a finished request, {threads} threads:\n\
         cold: first token after {t_cold:.3} s ({r_cold} tokens reused)\n\
         warm: first token after {t_warm:.3} s ({r_warm} tokens reused)\n\
         speed-up: {:.1}x",
        t_cold / t_warm
    );
}
