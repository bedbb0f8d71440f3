//! Conversations on the real SmolLM2 model: delta prefill leaves the cache
//! bit-identical to a fresh prefill of the whole conversation, session
//! files round-trip (and refuse corrupted files, other models and other
//! caches, and survive an interrupted write), and a small context shifts
//! old exchanges out without ever failing.

mod common;

use std::path::Path;

use minfer_engine::chat::file;
use minfer_engine::{
    BatchEntry, ChatSession, EngineConfig, EngineError, GenerateConfig, KvFormat, LoadedModel,
    SamplingParams, Scheduler, TurnStats,
};

use common::{cfg, greedy, loaded as load};

const SYSTEM: &str = "You are a terse assistant.";

fn turn(
    m: &LoadedModel,
    s: &mut Scheduler,
    chat: &mut ChatSession,
    user: &str,
) -> (String, TurnStats) {
    chat.send(m, s, user).expect("the turn starts");
    let mut text = Vec::new();
    let stats = chat
        .complete(
            m,
            s,
            |b| {
                text.extend_from_slice(b);
                true
            },
            || true,
        )
        .expect("the turn completes");
    (String::from_utf8_lossy(&text).into_owned(), stats)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Logits of the last token of `seq`'s history, computed from the cells the
/// sequence already holds (a fork re-evaluates only that token).
fn cached_logits(s: &mut Scheduler, chat: &ChatSession) -> Vec<f32> {
    let rt = s.runtime_mut();
    let fork = rt.fork(chat.sequence()).unwrap();
    let h = rt.history(fork).unwrap().to_vec();
    rt.rollback(fork, h.len() as u32 - 1).unwrap();
    let out = rt
        .step(&[BatchEntry::last(fork, &h[h.len() - 1..])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    rt.remove(fork).unwrap();
    out
}

/// Logits of the last token of `tokens` on a fresh runtime that prefills
/// them all at once.
fn fresh_logits(m: &LoadedModel, tokens: &[u32]) -> Vec<f32> {
    let mut rt = m.runtime(cfg(2048)).unwrap();
    let seq = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::last(seq, tokens)])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec()
}

#[test]
fn delta_prefill_matches_a_fresh_full_prefill_bit_for_bit() {
    let Some(m) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let mut s = m.scheduler(cfg(2048)).unwrap();
    // A budget every answer ends within, so each turn writes its end token;
    // questions whose greedy answers tokenize back to the same tokens, so
    // that the cache can equal the rendered template.
    let mut chat = ChatSession::new(&m, &mut s, Some(SYSTEM), greedy(128)).unwrap();
    let questions = [
        "What is the capital of France?",
        "And of Italy?",
        "Name a famous dish from Italy.",
    ];
    let mut prev_len = 0;
    for (i, q) in questions.iter().enumerate() {
        let (_, t) = turn(&m, &mut s, &mut chat, q);
        let h = s.runtime().history(chat.sequence()).unwrap().to_vec();
        // Only the new text was evaluated: the cache kept everything before.
        assert_eq!(t.start.mismatch_at, None, "turn {i}");
        assert_eq!(t.start.kept_tokens, prev_len, "turn {i}");
        if i > 0 {
            assert!(
                t.start.prefill_tokens < 60,
                "turn {i} prefilled {}",
                t.start.prefill_tokens
            );
        }
        // The cache holds exactly what the template renders, end token
        // included.
        let rendered = m.tokenize(&m.render_chat(chat.messages(), false).unwrap());
        assert!(t.eog_written, "turn {i}: the end token was not written");
        assert_eq!(rendered[..h.len()], h[..], "turn {i}");
        assert_eq!(
            bits(&cached_logits(&mut s, &chat)),
            bits(&fresh_logits(&m, &h)),
            "turn {i}: logits differ from a fresh prefill"
        );
        prev_len = h.len();
    }
    // /regen: back to the start of the last answer; nothing is evaluated
    // before the new answer (the logits that followed the prompt were
    // kept), and greedy decoding answers the same.
    let last = chat.messages().last().unwrap().content.clone();
    let builds = s.runtime().graph_builds() + s.runtime().graph_reuses();
    let start = chat.regen(&m, &mut s).unwrap();
    assert_eq!(start.prefill_tokens, 0);
    let t = chat.complete(&m, &mut s, |_| true, || true).unwrap();
    assert_eq!(t.start.prefill_tokens, 0);
    assert_eq!(chat.messages().last().unwrap().content, last);
    let answer_steps = t.generated_tokens as u64 + u64::from(t.eog_written);
    assert!(
        s.runtime().graph_builds() + s.runtime().graph_reuses() <= builds + answer_steps,
        "the regenerated answer ran a prefill step"
    );
    // /undo and /clear roll the cache back; the system prompt's cells stay.
    assert!(chat.undo(&m, &mut s).unwrap());
    assert_eq!(chat.messages().len(), 5);
    chat.clear(&m, &mut s).unwrap();
    assert_eq!(chat.messages().len(), 1);
    let sys = m.tokenize(&m.render_chat(chat.messages(), false).unwrap());
    let h = s.runtime().history(chat.sequence()).unwrap();
    assert!(
        !h.is_empty() && sys.starts_with(h),
        "the system prompt's cells were dropped"
    );
}

#[test]
fn a_cache_that_differs_is_re_prefilled_from_the_first_difference() {
    let Some(m) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let mut s = m.scheduler(cfg(1024)).unwrap();
    let mut chat = ChatSession::new(&m, &mut s, Some(SYSTEM), greedy(16)).unwrap();
    turn(&m, &mut s, &mut chat, "Say hello.");
    // Make the cache hold something the conversation does not render from
    // position 5 on (as a template that rewrites earlier text would).
    let seq = chat.sequence();
    let rt = s.runtime_mut();
    let n = rt.n_past(seq).unwrap() as usize;
    let mut other = rt.history(seq).unwrap()[5..].to_vec();
    other[0] = if other[0] == 42 { 43 } else { 42 };
    rt.rollback(seq, 5).unwrap();
    rt.step(&[BatchEntry::none(seq, &other)]).unwrap();
    assert_eq!(rt.n_past(seq).unwrap() as usize, n);

    let (_, t) = turn(&m, &mut s, &mut chat, "Again.");
    assert_eq!(t.start.mismatch_at, Some(5));
    assert_eq!(t.start.kept_tokens, 5);
    let h = s.runtime().history(chat.sequence()).unwrap().to_vec();
    let rendered = m.tokenize(&m.render_chat(chat.messages(), false).unwrap());
    assert_eq!(rendered[..h.len()], h[..]);
    assert_eq!(
        bits(&cached_logits(&mut s, &chat)),
        bits(&fresh_logits(&m, &h))
    );
}

#[test]
fn a_session_file_resumes_with_zero_prefill_and_the_same_answer() {
    let Some(m) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chat.session");
    let mut s = m.scheduler(cfg(1024)).unwrap();
    let mut chat = ChatSession::new(&m, &mut s, Some(SYSTEM), greedy(24)).unwrap();
    turn(&m, &mut s, &mut chat, "Say hello.");
    turn(&m, &mut s, &mut chat, "Count to five.");
    chat.save(&m, &s, &path).unwrap();
    let (a, ta) = turn(&m, &mut s, &mut chat, "Now count backwards.");

    let mut s2 = m.scheduler(cfg(1024)).unwrap();
    let mut resumed = ChatSession::new(&m, &mut s2, None, greedy(24)).unwrap();
    resumed.load(&m, &mut s2, &path).unwrap();
    assert_eq!(resumed.messages().len(), 5);
    let (b, tb) = turn(&m, &mut s2, &mut resumed, "Now count backwards.");
    assert_eq!(a, b, "a resumed session answers differently");
    assert_eq!(tb.start.prefill_tokens, ta.start.prefill_tokens);
    assert_eq!(tb.start.kept_tokens, ta.start.kept_tokens);
    assert_eq!(tb.start.mismatch_at, None);

    // With sampling on, each answer has its own seed (the count of answers
    // is saved too), so a resumed session also draws the same answer.
    let sampled = GenerateConfig {
        max_tokens: 16,
        stop: Vec::new(),
        sampler: SamplingParams {
            temp: 0.9,
            seed: 7,
            ..SamplingParams::default()
        },
        logprobs: None,
    };
    let mut s = m.scheduler(cfg(1024)).unwrap();
    let mut chat = ChatSession::new(&m, &mut s, None, sampled.clone()).unwrap();
    turn(&m, &mut s, &mut chat, "Name a colour.");
    chat.save(&m, &s, &path).unwrap();
    let (a, _) = turn(&m, &mut s, &mut chat, "Name another.");
    let mut s2 = m.scheduler(cfg(1024)).unwrap();
    let mut resumed = ChatSession::new(&m, &mut s2, None, sampled).unwrap();
    resumed.load(&m, &mut s2, &path).unwrap();
    let (b, _) = turn(&m, &mut s2, &mut resumed, "Name another.");
    assert_eq!(a, b, "a resumed sampled session answers differently");
}

/// The error of loading `path` into a fresh SmolLM session, checking that
/// the session it was loaded into is left as it was.
fn refused(m: &LoadedModel, rt_cfg: EngineConfig, path: &Path) -> EngineError {
    let mut s = m.scheduler(rt_cfg).unwrap();
    let mut chat = ChatSession::new(m, &mut s, Some("other"), greedy(4)).unwrap();
    turn(m, &mut s, &mut chat, "Hi");
    let (msgs, hist) = (
        chat.messages().to_vec(),
        s.runtime().history(chat.sequence()).unwrap().to_vec(),
    );
    let e = chat
        .load(m, &mut s, path)
        .expect_err("the file was accepted");
    assert_eq!(chat.messages(), &msgs[..]);
    assert_eq!(s.runtime().history(chat.sequence()).unwrap(), &hist[..]);
    e
}

#[test]
fn session_files_refuse_corruption_other_caches_and_survive_interrupted_writes() {
    let Some(m) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chat.session");
    let mut s = m.scheduler(cfg(512)).unwrap();
    let mut chat = ChatSession::new(&m, &mut s, Some(SYSTEM), greedy(8)).unwrap();
    turn(&m, &mut s, &mut chat, "Say hello.");
    chat.save(&m, &s, &path).unwrap();
    let good = std::fs::read(&path).unwrap();

    // A flipped byte anywhere is refused.
    let data = chat.snapshot(&m, &s).unwrap();
    let layout = s.runtime().kv_layout();
    let step = (good.len() / 97).max(1);
    for at in (0..good.len()).step_by(step).chain([good.len() - 1, 9, 13]) {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        assert!(
            file::decode(&bad, &path, &data.model, &layout).is_err(),
            "a flip at byte {at} of {} was accepted",
            good.len()
        );
    }
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 1;
    let corrupt = dir.path().join("corrupt.session");
    std::fs::write(&corrupt, &bad).unwrap();
    let e = refused(&m, cfg(512), &corrupt);
    assert!(e.to_string().contains("corrupted"), "{e}");
    let truncated = dir.path().join("short.session");
    std::fs::write(&truncated, &good[..good.len() / 3]).unwrap();
    refused(&m, cfg(512), &truncated);

    // Another context size or KV format is refused.
    let e = refused(&m, cfg(1024), &path);
    assert!(e.to_string().contains("n_ctx 512"), "{e}");
    let q8 = EngineConfig {
        kv_format: KvFormat::Q8_0,
        ..cfg(512)
    };
    let e = refused(&m, q8, &path);
    assert!(e.to_string().contains("q8_0"), "{e}");

    // An interrupted write leaves the old file as it was, and no litter.
    turn(&m, &mut s, &mut chat, "Again.");
    let newer = chat.snapshot(&m, &s).unwrap();
    assert!(file::write_interrupted_for_test(&path, &newer).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), good);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    file::write(&path, &newer).unwrap();
    assert_ne!(std::fs::read(&path).unwrap(), good);
}

#[test]
fn a_session_of_another_model_is_refused() {
    let (Some(smol), Some(qwen)) = (load(minfer_testutil::SMOLLM), load(minfer_testutil::QWEN))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smol.session");
    let mut s = smol.scheduler(cfg(256)).unwrap();
    let mut chat = ChatSession::new(&smol, &mut s, None, greedy(4)).unwrap();
    turn(&smol, &mut s, &mut chat, "Hi");
    chat.save(&smol, &s, &path).unwrap();

    let mut q = qwen.scheduler(cfg(256)).unwrap();
    let mut other = ChatSession::new(&qwen, &mut q, None, greedy(4)).unwrap();
    let e = other.load(&qwen, &mut q, &path).expect_err("accepted");
    assert!(e.to_string().contains("was made with model"), "{e}");
    assert!(other.messages().is_empty());
    assert_eq!(q.runtime().n_past(other.sequence()).unwrap(), 0);
}

#[test]
fn a_small_context_shifts_out_old_exchanges_and_never_fails() {
    let Some(m) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let mut s = m.scheduler(cfg(256)).unwrap();
    let mut chat = ChatSession::new(&m, &mut s, Some(SYSTEM), greedy(24)).unwrap();
    let sys = m.tokenize(&m.render_chat(&chat.messages()[..1], false).unwrap());
    let mut dropped = 0;
    for i in 0..20 {
        let (_, t) = turn(
            &m,
            &mut s,
            &mut chat,
            &format!("Tell me a fact about the number {i}."),
        );
        dropped += t.start.dropped_exchanges;
        assert_eq!(chat.messages()[0].content, SYSTEM, "turn {i}");
        let h = s.runtime().history(chat.sequence()).unwrap();
        assert!(h.len() <= 256);
        assert_eq!(
            h[..sys.len() - 1],
            sys[..sys.len() - 1],
            "turn {i}: the system prompt left the cache"
        );
    }
    assert!(dropped > 0, "20 turns in 256 tokens dropped nothing");
}
