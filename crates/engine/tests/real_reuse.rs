//! Graph reuse on a real model: a 32-token generation builds the prefill
//! graph and the decode graph once each and reuses the decode graph for
//! every other step.

mod common;

use common::{argmax, engine, load};

#[test]
fn generation_of_32_tokens_builds_two_graphs() {
    let Some(model) = load(minfer_testutil::SMOLLM) else {
        return;
    };
    let mut e = engine(&model, 512);
    // "def fibonacci(n):" in SmolLM2's vocabulary.
    let mut next = argmax(e.eval(&[1604, 3987, 46477, 24, 94, 727], false).unwrap());
    for _ in 1..32 {
        next = argmax(e.eval(&[next], false).unwrap());
    }
    assert_eq!(e.n_past(), 6 + 31);
    assert_eq!(e.graph_builds(), 2);
    assert_eq!(e.graph_reuses(), 30);
}
