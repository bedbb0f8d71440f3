//! Four sequences decoding together allocate nothing once warm. Its own
//! test binary because the counter sees every thread of the process,
//! including the test harness's, which allocates whenever another test of
//! the same binary finishes.

mod common;

use common::tiny;
use minfer_graph::KvFormat;
use minfer_testutil::counting::{count, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Four sequences decoding together, one batch of four rows per step: the
/// runtime's row gathering, cell planning and logits copy reuse their
/// buffers too.
#[test]
fn batched_decode_of_four_sequences_does_not_allocate() {
    use minfer_engine::{BatchEntry, EngineConfig, Runtime};
    let m = tiny::model("llama");
    let cfg = EngineConfig {
        n_ctx: 256,
        n_threads: 2,
        n_batch: 512,
        kv_format: KvFormat::F16,
        ..EngineConfig::default()
    };
    let mut rt = Runtime::new(std::sync::Arc::clone(&m), cfg).unwrap();
    let seqs: Vec<_> = (0..4).map(|_| rt.new_sequence().unwrap()).collect();
    let prompts: [&[u32]; 4] = [&[1, 2, 3], &[4, 5, 6, 7, 8], &[9], &[10, 11]];
    let mut next = [0u32; 4];
    {
        let entries: Vec<_> = seqs
            .iter()
            .zip(prompts)
            .map(|(&s, p)| BatchEntry::last(s, p))
            .collect();
        let out = rt.step(&entries).unwrap();
        for (i, n) in next.iter_mut().enumerate() {
            *n = common::argmax(out.last(i).unwrap());
        }
    }
    let step = |rt: &mut Runtime, next: &mut [u32; 4]| {
        let entries = [
            BatchEntry::last(seqs[0], std::slice::from_ref(&next[0])),
            BatchEntry::last(seqs[1], std::slice::from_ref(&next[1])),
            BatchEntry::last(seqs[2], std::slice::from_ref(&next[2])),
            BatchEntry::last(seqs[3], std::slice::from_ref(&next[3])),
        ];
        let out = rt.step(&entries).unwrap();
        let mut new = [0u32; 4];
        for (i, n) in new.iter_mut().enumerate() {
            *n = common::argmax(out.last(i).unwrap());
        }
        *next = new;
    };
    // The first batched decode builds the four-row graph.
    step(&mut rt, &mut next);
    let ((), allocs) = count(|| {
        for _ in 0..40 {
            step(&mut rt, &mut next);
        }
    });
    assert_eq!(allocs, 0, "allocations in 40 batched decode steps");
}
