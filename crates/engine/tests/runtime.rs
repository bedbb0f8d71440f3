//! The multi-sequence runtime's invariants: batch invariance, isolation,
//! rollback and fork against recomputation, capacity errors that leave the
//! other sequences working, and prefix sharing. On the tiny synthetic
//! models (every architecture) and, for batch invariance, on the
//! repository's Qwen3-MoE fixture and the real SmolLM2 and Gemma 3 models
//! at 1 and 2 threads.

mod common;

use std::sync::Arc;

use common::tiny;
use minfer_engine::{BatchEntry, EngineConfig, EngineError, Runtime, SeqId};
use minfer_graph::KvFormat;
use minfer_models::Model;

fn runtime(model: &Arc<Model>, n_ctx: u32, n_threads: usize, n_batch: usize) -> Runtime {
    let cfg = EngineConfig {
        n_ctx,
        n_threads,
        n_batch,
        kv_format: KvFormat::F16,
        ..EngineConfig::default()
    };
    Runtime::new(Arc::clone(model), cfg).expect("runtime")
}

/// Prompts of different lengths (deterministic pseudo-random ids below
/// `n_vocab`).
fn prompts(n_vocab: usize, lens: &[usize]) -> Vec<Vec<u32>> {
    common::random_ids(0x9e37_79b9, n_vocab, lens)
}

fn argmax(v: &[f32]) -> u32 {
    common::argmax(v)
}

/// Runs one sequence alone: the prompt in one step, then `n_gen` greedy
/// decode steps. Returns every step's logits row.
fn alone(model: &Arc<Model>, n_threads: usize, prompt: &[u32], n_gen: usize) -> Vec<Vec<f32>> {
    let mut rt = runtime(model, 512, n_threads, 512);
    let s = rt.new_sequence().unwrap();
    let mut rows = vec![rt
        .step(&[BatchEntry::last(s, prompt)])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec()];
    for _ in 0..n_gen {
        let next = argmax(rows.last().unwrap());
        let row = rt.step(&[BatchEntry::last(s, &[next])]).unwrap();
        rows.push(row.last(0).unwrap().to_vec());
    }
    rows
}

/// Runs several sequences together with staggered starts and chunked
/// prefill: at every step, the sequences that have finished their prompt
/// decode one row each, and the others feed a chunk of `chunk` prompt
/// tokens, all in one batch. Returns each sequence's logits rows, as
/// [`alone`] does.
fn together(
    model: &Arc<Model>,
    n_threads: usize,
    prompts: &[Vec<u32>],
    n_gen: usize,
    chunk: usize,
) -> Vec<Vec<Vec<f32>>> {
    let mut rt = runtime(model, 512, n_threads, 512);
    let seqs: Vec<SeqId> = prompts.iter().map(|_| rt.new_sequence().unwrap()).collect();
    let mut fed = vec![0usize; prompts.len()];
    let mut out: Vec<Vec<Vec<f32>>> = vec![Vec::new(); prompts.len()];
    let mut step = 0usize;
    loop {
        let mut entries = Vec::new();
        let mut next_tok = vec![0u32; prompts.len()];
        let mut who = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            // Sequence i joins at step i, so the mix changes over time.
            if step < i || out[i].len() > n_gen {
                continue;
            }
            if fed[i] < p.len() {
                let end = (fed[i] + chunk).min(p.len());
                who.push((i, end == p.len(), fed[i]..end));
            } else {
                next_tok[i] = argmax(out[i].last().unwrap());
                who.push((i, true, 0..0));
            }
        }
        if who.is_empty() {
            break;
        }
        for (i, last, range) in &who {
            let e = if range.is_empty() {
                BatchEntry::last(seqs[*i], std::slice::from_ref(&next_tok[*i]))
            } else if *last {
                BatchEntry::last(seqs[*i], &prompts[*i][range.clone()])
            } else {
                BatchEntry::none(seqs[*i], &prompts[*i][range.clone()])
            };
            entries.push(e);
        }
        let logits = rt.step(&entries).unwrap();
        let mut rows = Vec::new();
        for (k, (i, last, range)) in who.iter().enumerate() {
            if *last {
                rows.push((*i, logits.last(k).unwrap().to_vec()));
            } else {
                assert!(logits.entry(k).is_empty());
            }
            if !range.is_empty() {
                fed[*i] = range.end;
            }
        }
        for (i, row) in rows {
            out[i].push(row);
        }
        step += 1;
    }
    out
}

fn assert_bits_equal(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: step count");
    for (s, (x, y)) in a.iter().zip(b).enumerate() {
        let same = x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same, "{what}: logits differ at step {s}");
    }
}

fn check_batch_invariance(model: &Arc<Model>, lens: &[usize], n_gen: usize, chunk: usize) {
    let ps = prompts(model.n_vocab(), lens);
    for n_threads in [1, 2] {
        let mixed = together(model, n_threads, &ps, n_gen, chunk);
        for (i, p) in ps.iter().enumerate() {
            let solo = alone(model, n_threads, p, n_gen);
            assert_bits_equal(
                &solo,
                &mixed[i],
                &format!("sequence {i} at {n_threads} threads"),
            );
        }
    }
}

#[test]
fn batch_invariance_tiny_models() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe"] {
        let m = tiny::model(arch);
        check_batch_invariance(&m, &[5, 1, 23, 9], 12, 4);
    }
}

/// The random-weight Qwen3-MoE fixture: Q8_0 experts, repacked for the
/// kernels, eight of them with two chosen per row, so the rows of a batch
/// route to different experts and each expert serves a different subset.
#[test]
fn batch_invariance_qwen3moe_fixture() {
    let path = minfer_testutil::repo_model("qwen3moe-tiny-q8_0.gguf");
    let m = Arc::new(Model::open(&path).expect("the repository's qwen3moe model loads"));
    check_batch_invariance(&m, &[7, 40, 19, 1], 6, 16);
}

/// The random-weight Phi-3 fixture: its Q/K/V and gate/up matrices are
/// row ranges of fused tensors, repacked on their own, and its RoPE has
/// LongRoPE's factors.
#[test]
fn batch_invariance_phi3_fixture() {
    let path = minfer_testutil::repo_model("phi3-tiny-q8_0.gguf");
    let m = Arc::new(Model::open(&path).expect("the repository's phi3 model loads"));
    check_batch_invariance(&m, &[7, 40, 19, 1], 6, 16);
}

/// The random-weight gpt-oss fixture: attention sinks, alternating
/// sliding windows (the prompts reach past its window of 128), YaRN and
/// biased MXFP4 experts.
#[test]
fn batch_invariance_gpt_oss_fixture() {
    let path = minfer_testutil::repo_model("gpt-oss-tiny.gguf");
    let m = Arc::new(Model::open(&path).expect("the repository's gpt-oss model loads"));
    check_batch_invariance(&m, &[7, 140, 19, 1], 6, 16);
}

#[test]
fn batch_invariance_real_smollm2() {
    let Some(m) = common::load(minfer_testutil::SMOLLM) else {
        return;
    };
    check_batch_invariance(&m, &[7, 40, 19], 6, 16);
}

#[test]
fn batch_invariance_real_gemma3() {
    let Some(m) = common::load(minfer_testutil::GEMMA3) else {
        return;
    };
    check_batch_invariance(&m, &[7, 40, 19], 6, 16);
}

#[test]
fn isolation_poisoned_foreign_cells_change_nothing() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe"] {
        let m = tiny::model(arch);
        let ps = prompts(m.n_vocab(), &[11, 17, 6]);
        // Reference: sequence 1 alone, with a clean cache.
        let clean = alone(&m, 2, &ps[1], 5);
        // Poison everything sequence 1 must not read, in K and V, then
        // decode: the logits must be bit-identical to the clean run.
        for value in [f32::NAN, 6.0e4] {
            let mut rt2 = runtime(&m, 128, 2, 512);
            let s2: Vec<SeqId> = ps.iter().map(|_| rt2.new_sequence().unwrap()).collect();
            let e2: Vec<_> = s2
                .iter()
                .zip(&ps)
                .map(|(&s, p)| BatchEntry::last(s, p))
                .collect();
            let first = rt2.step(&e2).unwrap().last(1).unwrap().to_vec();
            rt2.poison_cells_outside(s2[1], value).unwrap();
            let mut rows = vec![first];
            for _ in 0..5 {
                let next = argmax(rows.last().unwrap());
                let row = rt2.step(&[BatchEntry::last(s2[1], &[next])]).unwrap();
                rows.push(row.last(0).unwrap().to_vec());
                // Re-poison the cells the step just freed or never used.
                rt2.poison_cells_outside(s2[1], value).unwrap();
            }
            assert_bits_equal(&clean, &rows, &format!("{arch}, poison {value}"));
        }
    }
}

#[test]
fn rollback_and_fork_match_recomputation() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe"] {
        let m = tiny::model(arch);
        let ps = prompts(m.n_vocab(), &[20, 8]);
        let (a, b) = (&ps[0], &ps[1]);
        // Fresh: a[..12] + b.
        let mut fresh = runtime(&m, 128, 2, 512);
        let f = fresh.new_sequence().unwrap();
        let mut input = a[..12].to_vec();
        input.extend_from_slice(b);
        let want = fresh
            .step(&[BatchEntry::all(f, &input)])
            .unwrap()
            .entry(0)
            .to_vec();
        let tail = &want[12 * m.n_vocab()..];

        // Rollback: a, back to 12, then b.
        let mut rt = runtime(&m, 128, 2, 512);
        let s = rt.new_sequence().unwrap();
        rt.step(&[BatchEntry::last(s, a)]).unwrap();
        rt.rollback(s, 12).unwrap();
        assert_eq!(rt.history(s).unwrap(), &a[..12]);
        let got = rt.step(&[BatchEntry::all(s, b)]).unwrap().entry(0).to_vec();
        assert_bits_equal(&[tail.to_vec()], &[got], &format!("{arch}: rollback"));

        // Fork: the child of a[..12] continues with b while the parent
        // continues with a[12..]; both match recomputation.
        let mut rt = runtime(&m, 128, 2, 512);
        let p = rt.new_sequence().unwrap();
        rt.step(&[BatchEntry::last(p, &a[..12])]).unwrap();
        let used_before = rt.usage().used;
        let c = rt.fork(p).unwrap();
        assert_eq!(rt.usage().used, used_before, "a fork copies no cells");
        assert_eq!(rt.history(c).unwrap(), &a[..12]);
        let logits = rt
            .step(&[BatchEntry::all(c, b), BatchEntry::last(p, &a[12..])])
            .unwrap();
        let child = logits.entry(0).to_vec();
        let parent = logits.last(1).unwrap().to_vec();
        assert_bits_equal(&[tail.to_vec()], &[child], &format!("{arch}: fork child"));
        let mut solo = runtime(&m, 128, 2, 512);
        let q = solo.new_sequence().unwrap();
        let want_parent = solo
            .step(&[BatchEntry::last(q, a)])
            .unwrap()
            .last(0)
            .unwrap()
            .to_vec();
        assert_bits_equal(&[want_parent], &[parent], &format!("{arch}: fork parent"));
        assert_eq!(rt.usage().used, 12 + b.len() + (a.len() - 12));
    }
}

#[test]
fn capacity_error_is_typed_and_others_keep_working() {
    let m = tiny::model("llama");
    let mut rt = runtime(&m, 32, 2, 512);
    let a = rt.new_sequence().unwrap();
    let b = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::last(a, &[1; 20])]).unwrap();
    rt.step(&[BatchEntry::last(b, &[2; 10])]).unwrap();
    // b asks for more cells than are left: a typed error, nothing changed.
    let err = rt.step(&[BatchEntry::last(b, &[3; 5])]).unwrap_err();
    assert!(
        matches!(err, EngineError::CacheFull { needed: 5, free: 2 }),
        "{err:?}"
    );
    assert_eq!(rt.n_past(b).unwrap(), 10);
    assert_eq!(rt.usage().used, 30);
    // a still decodes, and matches a run that never saw b's failure.
    let got = rt
        .step(&[BatchEntry::last(a, &[4])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    let mut solo = runtime(&m, 32, 2, 512);
    let s = solo.new_sequence().unwrap();
    solo.step(&[BatchEntry::last(s, &[1; 20])]).unwrap();
    let want = solo
        .step(&[BatchEntry::last(s, &[4])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    assert_bits_equal(&[want], &[got], "a after b's failure");
    // Removing b frees its cells for others.
    rt.remove(b).unwrap();
    assert_eq!(rt.usage().used, 21);
    assert!(matches!(
        rt.history(b).unwrap_err(),
        EngineError::UnknownSequence(_)
    ));
    let c = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::last(c, &[5; 11])]).unwrap();
    // A stale handle stays invalid even when its slot is reused.
    assert!(rt.n_past(b).is_err());
    // A position past n_ctx is ContextFull for that sequence.
    let mut small = runtime(&m, 8, 1, 512);
    let s = small.new_sequence().unwrap();
    let err = small.step(&[BatchEntry::last(s, &[1; 9])]).unwrap_err();
    assert!(
        matches!(err, EngineError::ContextFull { n_ctx: 8 }),
        "{err:?}"
    );
}

#[test]
fn prefix_of_a_released_sequence_is_shared_and_evicted_lru() {
    let m = tiny::model("qwen2");
    let ps = prompts(m.n_vocab(), &[30, 6, 6]);
    let mut rt = runtime(&m, 64, 2, 512);
    let a = rt.new_sequence().unwrap();
    rt.step(&[BatchEntry::last(a, &ps[0])]).unwrap();
    rt.release(a).unwrap();
    assert!(rt.history(a).is_err(), "a released handle is invalid");
    assert_eq!(rt.usage().idle, 1);

    // A prompt that shares 25 tokens with the released one.
    let mut prompt = ps[0][..25].to_vec();
    prompt.extend_from_slice(&ps[1]);
    let (s, reused) = rt.new_sequence_for(&prompt).unwrap();
    assert_eq!(reused, 25);
    assert_eq!(rt.usage().used, 30, "nothing recomputed or copied");
    let got = rt
        .step(&[BatchEntry::last(s, &prompt[reused..])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    let mut cold = runtime(&m, 64, 2, 512);
    let c = cold.new_sequence().unwrap();
    let want = cold
        .step(&[BatchEntry::last(c, &prompt)])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    assert_bits_equal(&[want], &[got], "shared prefix vs cold");

    // The whole prompt cached: the last token is still evaluated.
    let (t, reused) = rt.new_sequence_for(&prompt).unwrap();
    assert_eq!(reused, prompt.len() - 1);
    rt.remove(t).unwrap();

    // Filling the cache evicts the idle sequence: only the 5 cells it held
    // alone are reclaimed; the 25 it shares with `s` stay.
    let b = rt.new_sequence().unwrap();
    let need = 64 - rt.usage().used;
    rt.step(&[BatchEntry::last(b, &vec![7; need])]).unwrap();
    assert_eq!(rt.usage().idle, 1, "no eviction while cells were free");
    rt.step(&[BatchEntry::last(b, &[7])]).unwrap();
    assert_eq!(rt.usage().idle, 0, "the idle sequence was evicted for room");
    assert_eq!(rt.usage().used, 60);
    // `s` still reads its shared prefix.
    let got = rt
        .step(&[BatchEntry::last(s, &[9])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    let want = cold
        .step(&[BatchEntry::last(c, &[9])])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    assert_bits_equal(&[want], &[got], "shared prefix after the source's eviction");
}
