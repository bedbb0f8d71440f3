//! Tests of the generation loop: a scripted fake model, a real one, and
//! the log-probability helper.

use std::sync::Arc;

use minfer_sampler::{SamplingParams, TokenVocab};

use super::*;
use crate::error::EngineError;

/// Greedy decoding of at most `max_tokens` tokens (0: no limit), ending
/// at any of `stop`.
fn greedy(max_tokens: usize, stop: &[&str]) -> GenerateConfig {
    GenerateConfig {
        max_tokens,
        stop: stop.iter().map(|s| s.to_string()).collect(),
        sampler: SamplingParams::greedy(),
        logprobs: None,
    }
}

mod scripted {
    use super::*;

    /// A fake model over a tiny vocabulary: after the prompt and `i`
    /// generated tokens its logits favour `script[i]` (the EOG token once
    /// the script runs out), so greedy decoding replays `script`.
    struct Scripted {
        script: Vec<u32>,
        n_vocab: usize,
        n_ctx: u32,
        history: Vec<u32>,
        prompt_len: usize,
        logits: Vec<f32>,
        evals: usize,
    }

    impl Scripted {
        fn new(script: &[u32], n_ctx: u32) -> Self {
            Scripted {
                script: script.to_vec(),
                n_vocab: VOCAB.len(),
                n_ctx,
                history: Vec::new(),
                prompt_len: 0,
                logits: Vec::new(),
                evals: 0,
            }
        }
    }

    impl LogitSource for Scripted {
        fn eval_last(&mut self, tokens: &[u32]) -> Result<&[f32]> {
            if tokens.is_empty() {
                return Err(EngineError::EmptyBatch);
            }
            if self.history.len() + tokens.len() > self.n_ctx as usize {
                return Err(EngineError::ContextFull { n_ctx: self.n_ctx });
            }
            if self.evals == 0 {
                self.prompt_len = tokens.len();
            }
            self.evals += 1;
            self.history.extend_from_slice(tokens);
            let step = self.history.len() - self.prompt_len;
            let next = self.script.get(step).copied().unwrap_or(EOG);
            self.logits.clear();
            self.logits.resize(self.n_vocab, 0.0);
            self.logits[next as usize] = 10.0;
            // A clear runner-up, so a penalty on `next` has a visible effect.
            let runner_up = (next as usize + 1) % self.n_vocab;
            self.logits[runner_up] = 5.0;
            Ok(&self.logits)
        }
        fn n_ctx(&self) -> u32 {
            self.n_ctx
        }
        fn history(&self) -> &[u32] {
            &self.history
        }
        fn graph_builds(&self) -> u64 {
            // Prefill and decode graphs, like the engine on a fresh cache.
            self.evals.min(2) as u64
        }
    }

    const VOCAB: [&[u8]; 7] = [
        b"<eos>",
        b"Hello",
        b",",
        b" wor",
        b"ld",
        b"\xe4\xb8",
        b"\xad",
    ];
    const EOG: u32 = 0;

    struct Toy;

    impl Vocab for Toy {
        fn is_eog(&self, id: u32) -> bool {
            id == EOG
        }
        fn token_bytes(&self, id: u32) -> &[u8] {
            VOCAB.get(id as usize).copied().unwrap_or(b"")
        }
        fn sampler_vocab(&self) -> Result<Arc<TokenVocab>> {
            let pieces: Vec<Vec<u8>> = VOCAB.iter().map(|p| p.to_vec()).collect();
            let special = (0..VOCAB.len()).map(|i| i as u32 == EOG).collect();
            let tokenize = Box::new(|_: &str| Vec::new());
            Ok(Arc::new(
                TokenVocab::new(pieces, special, vec![EOG], tokenize).expect("toy vocab"),
            ))
        }
    }

    /// Runs the loop and returns (emitted bytes, stats, model).
    fn run_toy(
        script: &[u32],
        n_ctx: u32,
        cfg: &GenerateConfig,
    ) -> (Vec<u8>, GenerationStats, Scripted) {
        let mut m = Scripted::new(script, n_ctx);
        let mut out = Vec::new();
        let stats = run(&mut m, &Toy, &[1, 2], cfg, |b| {
            out.extend_from_slice(b);
            true
        })
        .unwrap();
        (out, stats, m)
    }

    /// [`run_toy`], checked for the text, the stop reason and the count of
    /// generated tokens that every stop test expects.
    fn run_toy_stops(
        script: &[u32],
        n_ctx: u32,
        cfg: &GenerateConfig,
        (text, reason, generated): (&[u8], StopReason, usize),
    ) -> (GenerationStats, Scripted) {
        let (out, stats, m) = run_toy(script, n_ctx, cfg);
        assert_eq!(out, text);
        assert_eq!(stats.stop_reason, reason);
        assert_eq!(stats.generated_tokens, generated);
        (stats, m)
    }

    #[test]
    fn eog_stops_without_emitting_or_evaluating_it() {
        // Greedy replays the script from the first sampled token on.
        let want = (&b"Hello world"[..], StopReason::Eog, 3);
        let (stats, m) = run_toy_stops(&[1, 3, 4, EOG, 2], 64, &greedy(0, &[]), want);
        assert_eq!(stats.tokens, vec![1, 3, 4]);
        assert_eq!(stats.prompt_tokens, 2);
        // Prompt plus the three generated tokens; the EOG never ran.
        assert_eq!(m.history, vec![1, 2, 1, 3, 4]);
        assert_eq!(stats.graph_builds, 2);
    }

    #[test]
    fn max_tokens_stops_after_n_without_a_wasted_forward() {
        let want = (&b"Hello, wor"[..], StopReason::MaxTokens, 3);
        let (_, m) = run_toy_stops(&[1, 2, 3, 4, 1, 2], 64, &greedy(3, &[]), want);
        // Prefill plus two decode steps: the third token is never evaluated.
        assert_eq!(m.evals, 3);
    }

    #[test]
    fn stop_string_across_tokens_is_not_emitted() {
        let want = (&b"Hello, "[..], StopReason::StopString, 4);
        let (_, m) = run_toy_stops(&[1, 2, 3, 4, 2, 1], 64, &greedy(0, &["world"]), want);
        // No forward after the stop.
        assert_eq!(m.evals, 4);
    }

    #[test]
    fn held_back_prefix_is_flushed_when_generation_ends_otherwise() {
        let (out, stats, _) = run_toy(&[1, 3, EOG], 64, &greedy(0, &[" world!"]));
        assert_eq!(out, b"Hello wor");
        assert_eq!(stats.stop_reason, StopReason::Eog);
    }

    #[test]
    fn full_context_stops_cleanly() {
        // Prompt of 2 in a context of 5: tokens at positions 2, 3, 4 are
        // evaluated, the fourth generated token has no room.
        let want = (&b"Hello, world"[..], StopReason::ContextFull, 4);
        let (_, m) = run_toy_stops(&[1, 2, 3, 4, 1, 2], 5, &greedy(0, &[]), want);
        assert_eq!(m.history.len(), 5);
    }

    #[test]
    fn prompt_that_does_not_fit_is_an_error() {
        let mut m = Scripted::new(&[1], 1);
        let r = run(&mut m, &Toy, &[1, 2], &greedy(0, &[]), |_| true);
        assert!(matches!(r, Err(EngineError::ContextFull { n_ctx: 1 })));
        let r = run(&mut m, &Toy, &[], &greedy(0, &[]), |_| true);
        assert!(matches!(r, Err(EngineError::EmptyBatch)));
    }

    #[test]
    fn callback_can_cancel() {
        let mut m = Scripted::new(&[1, 2, 3, 4], 64);
        let mut calls = 0;
        let stats = run(&mut m, &Toy, &[1], &greedy(0, &[]), |_| {
            calls += 1;
            calls < 2
        })
        .unwrap();
        assert_eq!(stats.stop_reason, StopReason::Cancelled);
        assert_eq!(stats.generated_tokens, 2);
        assert_eq!(calls, 2);
    }

    #[test]
    fn invalid_sampler_config_is_an_error() {
        let mut m = Scripted::new(&[1], 64);
        let mut cfg = greedy(0, &[]);
        cfg.sampler.top_p = 2.0;
        let r = run(&mut m, &Toy, &[1], &cfg, |_| true);
        assert!(matches!(r, Err(EngineError::InvalidArgument(_))));
        assert_eq!(m.evals, 0, "nothing runs with a bad config");
    }

    #[test]
    fn split_utf8_reassembles_through_utf8_stream() {
        let (out, _, _) = run_toy(&[1, 5, 6, EOG], 64, &greedy(0, &[]));
        let mut u = Utf8Stream::new();
        let mut text = String::new();
        // Feed token by token as the callback would have seen it.
        for chunk in [&out[..5], &out[5..7], &out[7..]] {
            text.push_str(u.push(chunk));
        }
        text.push_str(u.finish());
        assert_eq!(text, "Hello中");
    }

    #[test]
    fn penalty_window_covers_the_prompt() {
        // The script wants "Hello" (1) first, but 1 is in the prompt and the
        // penalty divides its logit by 1000, so the runner-up "," (2) wins.
        // Then the EOG token (not in the history) wins over the penalised 1.
        let mut m = Scripted::new(&[1, EOG], 64);
        let mut cfg = greedy(0, &[]);
        cfg.sampler.repeat_penalty = 1000.0;
        let mut out = Vec::new();
        let stats = run(&mut m, &Toy, &[1], &cfg, |b| {
            out.extend_from_slice(b);
            true
        })
        .unwrap();
        assert_eq!(out, b",");
        assert_eq!(stats.tokens, vec![2]);
        assert_eq!(stats.stop_reason, StopReason::Eog);
    }
}

/// Generation with the real Qwen2.5-Coder 0.5B model against llama.cpp's
/// greedy output.
#[cfg(test)]
mod real_model {
    use std::sync::Mutex;

    use minfer_models::Model;

    use super::*;
    use crate::EngineConfig;

    /// The tests share two cores; one at a time keeps each one's timings
    /// meaningful.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn load(n_ctx: u32) -> Option<(Engine, Tokenizer)> {
        let path = minfer_testutil::require_model(minfer_testutil::QWEN)?;
        let model = Model::open(&path).expect("the model loads");
        let tok = Tokenizer::from_gguf(model.file().metadata()).expect("the tokenizer loads");
        let cfg = EngineConfig {
            n_ctx,
            ..EngineConfig::default()
        };
        let engine = Engine::new(Arc::new(model), cfg).expect("the engine starts");
        Some((engine, tok))
    }

    /// `prompt_ids` and `greedy_ids` of the `raw-fib` golden case.
    fn raw_fib() -> (Vec<u32>, Vec<u32>) {
        let path = minfer_testutil::golden_dir().join("greedy-qwen2.5.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let json: serde_json::Value = serde_json::from_str(&text).expect("golden file is JSON");
        let case = json["cases"]
            .as_array()
            .and_then(|cases| cases.iter().find(|c| c["name"] == "raw-fib"))
            .expect("the raw-fib case exists");
        let ids = |key: &str| -> Vec<u32> {
            case[key]
                .as_array()
                .expect("an id array")
                .iter()
                .map(|v| v.as_u64().expect("an id") as u32)
                .collect()
        };
        (ids("prompt_ids"), ids("greedy_ids"))
    }

    /// What [`run_fib`] gives: the emitted bytes, the stats, the tokenizer
    /// and llama.cpp's greedy ids.
    type FibRun = (Vec<u8>, GenerationStats, Tokenizer, Vec<u32>);

    /// Generates from the raw-fib prompt on a fresh engine and checks that
    /// the run ended by `stop`.
    fn run_fib(n_ctx: u32, cfg: &GenerateConfig, stop: StopReason) -> Option<FibRun> {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (mut engine, tok) = load(n_ctx)?;
        let (prompt, golden) = raw_fib();
        let mut out = Vec::new();
        let stats = generate(&mut engine, &tok, &prompt, cfg, |b| {
            out.extend_from_slice(b);
            true
        })
        .expect("generation runs");
        assert_eq!(stats.stop_reason, stop);
        Some((out, stats, tok, golden))
    }

    /// Greedy decoding with `max_tokens` = `n` stops after `n` tokens,
    /// llama.cpp's, and emits their text.
    fn check_greedy_prefix(n: usize) {
        let Some((out, stats, tok, golden)) = run_fib(512, &greedy(n, &[]), StopReason::MaxTokens)
        else {
            return;
        };
        assert_eq!(stats.generated_tokens, n);
        assert_eq!(stats.tokens, golden[..n]);
        assert_eq!(stats.prompt_tokens, raw_fib().0.len());
        assert_eq!(out, tok.decode(&golden[..n], true));
    }

    #[test]
    fn greedy_16_tokens_match_llama_cpp() {
        check_greedy_prefix(16);
    }

    #[test]
    fn stop_string_ends_generation_and_is_not_emitted() {
        let stop = StopReason::StopString;
        let Some((out, stats, tok, golden)) = run_fib(512, &greedy(64, &["return"]), stop) else {
            return;
        };
        let full = tok.decode(&golden, true);
        let cut = full
            .windows(6)
            .position(|w| w == b"return")
            .expect("the golden text contains the stop string");
        assert_eq!(out, full[..cut]);
        assert_eq!(stats.tokens, golden[..stats.generated_tokens]);
    }

    #[test]
    fn max_tokens_stops_at_n() {
        check_greedy_prefix(5);
    }

    #[test]
    fn full_context_stops_cleanly() {
        // A 4-token prompt in 8 cells: 4 generated tokens are evaluated, the
        // fifth is emitted but has no cell, and the run ends without error.
        let Some((_, stats, _, golden)) = run_fib(8, &greedy(0, &[]), StopReason::ContextFull)
        else {
            return;
        };
        assert_eq!(stats.tokens, golden[..5]);
    }

    #[test]
    fn decode_reuses_one_graph_for_128_tokens() {
        let Some((_, stats, ..)) = run_fib(512, &greedy(128, &[]), StopReason::MaxTokens) else {
            return;
        };
        println!(
            "generated {} tokens ({:?}): prefill {:.3} s, decode {:.3} s ({:.1} tok/s), {} graph builds",
            stats.generated_tokens,
            stats.stop_reason,
            stats.prefill_secs,
            stats.decode_secs,
            stats.decode_tokens_per_sec(),
            stats.graph_builds,
        );
        assert_eq!(
            stats.generated_tokens, 128,
            "stopped by {:?}",
            stats.stop_reason
        );
        assert_eq!(stats.graph_builds, 2);
    }
}

#[cfg(test)]
mod logprob_tests {
    use super::logprobs_of;

    #[test]
    fn log_softmax_and_the_best_n() {
        let logits = [1.0f32, 3.0, f32::NAN, 3.0, 0.0];
        let mut top = Vec::new();
        let lp = logprobs_of(&logits, 4, 3, &mut top);
        let z: f64 = [1.0f64, 3.0, 3.0, 0.0].iter().map(|l| l.exp()).sum();
        let want = |l: f64| (l - z.ln()) as f32;
        assert!((lp - want(0.0)).abs() < 1e-6, "{lp}");
        // Ties by lowest id; NaN never makes the list.
        assert_eq!(top.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 3, 0]);
        assert!((top[0].1 - want(3.0)).abs() < 1e-6);
        assert_eq!(top[0].1, top[1].1);
        assert!((top[2].1 - want(1.0)).abs() < 1e-6);
        let total: f32 = [0usize, 1, 3, 4]
            .iter()
            .map(|&i| logprobs_of(&logits, i as u32, 0, &mut top).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-5, "{total}");
        assert!(top.is_empty());
        assert_eq!(logprobs_of(&logits, 2, 0, &mut top), f32::NEG_INFINITY);
        // More alternatives than tokens: all of them.
        logprobs_of(&[0.5, 0.25], 0, 20, &mut top);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].0, 0);
    }
}
