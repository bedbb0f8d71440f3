//! The prompt cache below the KV cells: a prefix evicted from the cells is
//! restored from host RAM or from disk (across a restart) and answers with
//! the bits a recomputation gives; corrupt or foreign block files are
//! refused and the answer is recomputed; the RAM budget bounds what is
//! held. On the real SmolLM2 (f16 KV cache, two threads) and, for the
//! budget, the tiny synthetic model.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use minfer_engine::{
    BatchEntry, CacheDir, EngineConfig, KvFormat, Runtime, SeqId, PROMPT_BLOCK_TOKENS as BLOCK,
};
use minfer_models::Model;

fn cfg(n_ctx: u32, cache_ram: usize, dir: Option<&Path>) -> EngineConfig {
    EngineConfig {
        n_ctx,
        n_threads: 2,
        cache_ram,
        cache_dir: dir.map(CacheDir::new),
        ..EngineConfig::default()
    }
}

const RAM: usize = 1 << 30;

/// Feeds `tokens` to `seq`, then decodes `n` greedy tokens; returns the
/// bits of the logits after the last fed token and the greedy tokens.
fn answer(rt: &mut Runtime, seq: SeqId, tokens: &[u32], n: usize) -> (Vec<u32>, Vec<u32>) {
    let first = rt
        .step(&[BatchEntry::last(seq, tokens)])
        .unwrap()
        .last(0)
        .unwrap()
        .to_vec();
    let bits = first.iter().map(|x| x.to_bits()).collect();
    let mut tok = common::argmax(&first);
    let mut toks = vec![tok];
    for _ in 1..n {
        let l = rt
            .step(&[BatchEntry::last(seq, &[tok])])
            .unwrap()
            .last(0)
            .unwrap()
            .to_vec();
        tok = common::argmax(&l);
        toks.push(tok);
    }
    (bits, toks)
}

/// Asserts two answers are the same greedy tokens and the same logits
/// bits, naming the first differing logit (not printing all of them).
#[track_caller]
fn assert_same(got: &(Vec<u32>, Vec<u32>), want: &(Vec<u32>, Vec<u32>), what: &str) {
    if let Some(i) = (0..got.0.len().max(want.0.len())).find(|&i| got.0.get(i) != want.0.get(i)) {
        panic!(
            "{what}: logit {i} differs: {:?} vs {:?}",
            got.0.get(i).map(|b| f32::from_bits(*b)),
            want.0.get(i).map(|b| f32::from_bits(*b))
        );
    }
    assert_eq!(got.1, want.1, "{what}: greedy tokens");
}

/// A prompt answered by a runtime without any cache.
fn cold(model: &Arc<Model>, prompt: &[u32], kv: KvFormat) -> (Vec<u32>, Vec<u32>) {
    let mut rt = Runtime::new(
        Arc::clone(model),
        EngineConfig {
            kv_format: kv,
            ..cfg(2048, 0, None)
        },
    )
    .unwrap();
    let s = rt.new_sequence().unwrap();
    answer(&mut rt, s, prompt, 4)
}

/// Runs `prompt` on `rt` through the prefix cache; returns the reused
/// count and the answer, and releases the sequence.
fn through_cache(rt: &mut Runtime, prompt: &[u32]) -> (usize, (Vec<u32>, Vec<u32>)) {
    let (s, reused) = rt.new_sequence_for(prompt).unwrap();
    let got = answer(rt, s, &prompt[reused..], 4);
    rt.release(s).unwrap();
    (reused, got)
}

/// `shared` tokens every prompt starts with, then a tail of its own.
fn prompts(n_vocab: usize, shared: usize, tails: &[usize]) -> Vec<Vec<u32>> {
    let mut lens = vec![shared];
    lens.extend_from_slice(tails);
    let all = common::random_ids(0x5eed_cafe, n_vocab, &lens);
    all[1..]
        .iter()
        .map(|t| [all[0].as_slice(), t].concat())
        .collect()
}

fn smollm() -> Option<Arc<Model>> {
    common::load(minfer_testutil::SMOLLM)
}

#[test]
fn a_prefix_evicted_from_the_cells_is_restored_from_ram_with_the_same_bits() {
    let Some(m) = smollm() else { return };
    // Two whole blocks and a bit in common; each prompt its own tail.
    let ps = prompts(m.n_vocab(), 2 * BLOCK + 90, &[40, 60, 30]);
    let other = common::random_ids(7, m.n_vocab(), &[900]).remove(0);
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, RAM, None)).unwrap();

    let (reused, _) = through_cache(&mut rt, &ps[0]);
    assert_eq!(reused, 0);
    let st = rt.prompt_cache_stats();
    assert_eq!((st.saved_blocks, st.ram_blocks), (2, 2), "{st:?}");
    // An unrelated prompt needs the cells: the idle prefix is evicted.
    through_cache(&mut rt, &other);
    assert_eq!(rt.usage().idle, 1, "only the newest idle sequence is left");

    let (reused, got) = through_cache(&mut rt, &ps[1]);
    assert_eq!(reused, 2 * BLOCK, "two whole blocks restored from RAM");
    assert_eq!(
        rt.prompt_cache_stats().restored_tokens_ram,
        2 * BLOCK as u64
    );
    assert_same(
        &got,
        &cold(&m, &ps[1], KvFormat::F16),
        "restored vs computed",
    );

    // The same prompt again: now the cells hold it (all but the last
    // token), with the same answer.
    let (reused, again) = through_cache(&mut rt, &ps[1]);
    assert_eq!(reused, ps[1].len() - 1);
    assert_same(&again, &got, "from the cells vs from RAM");

    // Cells holding part of block 0 and the tier the rest: the cell prefix
    // is shared, and the tier extends it from the middle of a block.
    rt.clear();
    let mut p = ps[2][..100].to_vec();
    let (s, reused) = rt.new_sequence_for(&p).unwrap();
    assert_eq!(reused, 0, "no whole block in 99 tokens");
    answer(&mut rt, s, &p, 1);
    rt.release(s).unwrap();
    p = ps[2].clone();
    let (reused, got) = through_cache(&mut rt, &p);
    assert_eq!(reused, 2 * BLOCK);
    assert_eq!(
        got,
        cold(&m, &p, KvFormat::F16),
        "cells then RAM vs computed"
    );
}

#[test]
fn the_scheduler_counts_restored_tokens_as_reused_and_answers_the_same() {
    let Some(lm) = common::loaded(minfer_testutil::SMOLLM) else {
        return;
    };
    let n_vocab = lm.model().n_vocab();
    let ps = prompts(n_vocab, BLOCK + 20, &[10, 12]);
    let other = common::random_ids(11, n_vocab, &[700]).remove(0);
    let mut s = lm.scheduler(cfg(768, RAM, None)).unwrap();
    for p in [&ps[0], &other] {
        let id = s.submit(p, &common::greedy(4)).unwrap();
        common::drain(&mut s, &[id]);
    }
    let id = s.submit(&ps[1], &common::greedy(6)).unwrap();
    s.step().unwrap();
    assert_eq!(s.times(id).unwrap().reused_tokens, BLOCK);
    let got = common::drain(&mut s, &[id]).remove(0);
    let mut alone = lm.scheduler(cfg(768, 0, None)).unwrap();
    let id = alone.submit(&ps[1], &common::greedy(6)).unwrap();
    let want = common::drain(&mut alone, &[id]).remove(0);
    assert_eq!(got.1.tokens, want.1.tokens);
    assert_eq!(got.0, want.0);
}

/// The block files of the folder the runtime writes.
fn block_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "kvb"))
        .collect();
    v.sort();
    v
}

#[test]
fn the_disk_tier_restores_a_prefix_after_a_restart_with_the_same_bits() {
    let Some(m) = smollm() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ps = prompts(m.n_vocab(), 2 * BLOCK + 10, &[30, 25]);
    let folder = {
        let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, RAM, Some(tmp.path()))).unwrap();
        through_cache(&mut rt, &ps[0]);
        rt.flush_prompt_cache();
        let st = rt.prompt_cache_stats();
        assert_eq!((st.disk_blocks, st.disk_written), (2, 2), "{st:?}");
        rt.prompt_cache_dir().unwrap().to_path_buf()
    };
    assert_eq!(block_files(&folder).len(), 2);

    // A new process (a new runtime) with no RAM tier: straight from disk.
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, 0, Some(tmp.path()))).unwrap();
    assert_eq!(rt.prompt_cache_dir(), Some(folder.as_path()));
    let (reused, got) = through_cache(&mut rt, &ps[1]);
    assert_eq!(reused, 2 * BLOCK);
    assert_eq!(
        rt.prompt_cache_stats().restored_tokens_disk,
        2 * BLOCK as u64
    );
    assert_eq!(
        got,
        cold(&m, &ps[1], KvFormat::F16),
        "restored from disk vs computed"
    );
    drop(rt);

    // With a RAM tier, a block read from disk is kept in RAM.
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, RAM, Some(tmp.path()))).unwrap();
    let (s, reused) = rt.new_sequence_for(&ps[1]).unwrap();
    assert_eq!(reused, 2 * BLOCK);
    rt.remove(s).unwrap();
    let (s, reused) = rt.new_sequence_for(&ps[0]).unwrap();
    assert_eq!(reused, 2 * BLOCK);
    rt.remove(s).unwrap();
    let st = rt.prompt_cache_stats();
    assert_eq!(
        (st.restored_tokens_disk, st.restored_tokens_ram),
        (2 * BLOCK as u64, 2 * BLOCK as u64),
        "{st:?}"
    );
}

#[test]
fn corrupt_and_foreign_block_files_are_refused_and_the_answer_is_recomputed() {
    let Some(m) = smollm() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // One whole block each.
    let ps = prompts(m.n_vocab(), BLOCK + 30, &[20, 15, 25]);
    let write = |kv: KvFormat| {
        let c = EngineConfig {
            kv_format: kv,
            ..cfg(1024, 0, Some(tmp.path()))
        };
        let mut rt = Runtime::new(Arc::clone(&m), c).unwrap();
        through_cache(&mut rt, &ps[0]);
        rt.flush_prompt_cache();
        rt.prompt_cache_dir().unwrap().to_path_buf()
    };
    let f16 = write(KvFormat::F16);
    let f32_dir = write(KvFormat::F32);
    assert_ne!(f16, f32_dir, "a folder per KV format");
    let file = block_files(&f16).remove(0);
    let want = cold(&m, &ps[1], KvFormat::F16);

    // A flipped byte in the middle of the rows.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, RAM, Some(tmp.path()))).unwrap();
    let (reused, got) = through_cache(&mut rt, &ps[1]);
    assert_eq!(reused, 0, "a corrupt block is never loaded");
    assert_same(&got, &want, "recomputed after a corrupt file");
    assert_eq!(rt.prompt_cache_stats().disk_refused, 1);
    // Refused files are removed; the recomputed block is written again.
    rt.flush_prompt_cache();
    assert_eq!(std::fs::read(&file).unwrap().len(), bytes.len());
    assert_ne!(std::fs::read(&file).unwrap(), bytes);
    drop(rt);

    // The same block from an f32 cache, under the f16 folder's name.
    let foreign = block_files(&f32_dir).remove(0);
    assert_eq!(
        foreign.file_name(),
        file.file_name(),
        "keys depend on tokens only"
    );
    std::fs::copy(&foreign, &file).unwrap();
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, 0, Some(tmp.path()))).unwrap();
    let (reused, got) = through_cache(&mut rt, &ps[2]);
    assert_eq!(reused, 0, "a block of another KV format is never loaded");
    assert_same(
        &got,
        &cold(&m, &ps[2], KvFormat::F16),
        "recomputed after a foreign file",
    );
    assert_eq!(rt.prompt_cache_stats().disk_refused, 1);
    rt.flush_prompt_cache();
    drop(rt);
    // Rewritten by the f16 runtime: a good copy restores again.
    let mut rt = Runtime::new(Arc::clone(&m), cfg(1024, 0, Some(tmp.path()))).unwrap();
    let (reused, got) = through_cache(&mut rt, &ps[1]);
    assert_eq!(reused, BLOCK);
    assert_same(&got, &want, "restored from the rewritten file");
}

#[test]
fn the_ram_budget_bounds_the_bytes_held() {
    let m = common::tiny::model("qwen2");
    let n_vocab = m.n_vocab();
    // Learn a block's size from a runtime without a bound.
    let mut rt = Runtime::new(Arc::clone(&m), cfg(2048, RAM, None)).unwrap();
    let ps = prompts(n_vocab, 0, &[BLOCK + 1, 5 * BLOCK + 1, 2 * BLOCK + 1]);
    through_cache(&mut rt, &ps[0]);
    let block = rt.prompt_cache_stats().ram_bytes;
    assert!(block > BLOCK * 4, "a block holds its rows");

    let budget = 3 * block + block / 2;
    let mut rt = Runtime::new(Arc::clone(&m), cfg(2048, budget, None)).unwrap();
    through_cache(&mut rt, &ps[1]);
    let st = rt.prompt_cache_stats();
    // A chain never evicts its own beginning: the first three blocks stay,
    // the rest do not fit.
    assert_eq!((st.ram_blocks, st.ram_bytes), (3, 3 * block), "{st:?}");
    through_cache(&mut rt, &ps[2]);
    let st = rt.prompt_cache_stats();
    assert!(st.ram_bytes <= budget, "{st:?}");
    assert_eq!(st.ram_blocks, 3);
    assert_eq!(
        st.ram_evicted_blocks, 2,
        "the older chain's last blocks went first"
    );
    // The older chain keeps its first block; the new one is whole.
    rt.clear();
    let (s, reused) = rt.new_sequence_for(&ps[2]).unwrap();
    assert_eq!(reused, 2 * BLOCK);
    rt.remove(s).unwrap();
    let (s, reused) = rt.new_sequence_for(&ps[1]).unwrap();
    assert_eq!(reused, BLOCK);
    rt.remove(s).unwrap();
}
