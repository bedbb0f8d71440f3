//! The repository's copy of the golden data must be complete, and must
//! match its upstream (the folder `$MINFER_GOLDEN_UPSTREAM` names, see
//! `minfer_testutil::upstream_golden_dir`) whenever one is given, so that
//! an update there is noticed instead of silently testing against stale
//! references.

use std::collections::BTreeSet;
use std::path::Path;

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// With `$MINFER_GOLDEN_UPSTREAM` set, the copy equals the upstream file
/// for file; without it there is nothing to compare against, and this
/// test checks the copy's completeness as `golden_copy_is_complete` does,
/// so that it never passes without asserting anything.
#[test]
fn golden_copy_matches_upstream_when_given() {
    let ours = minfer_testutil::workspace_root().join("tests/golden");
    let Some(upstream) = minfer_testutil::upstream_golden_dir() else {
        eprintln!("MINFER_GOLDEN_UPSTREAM is not set: checking the copy alone");
        golden_copy_is_complete();
        return;
    };
    let (a, b) = (names(&upstream), names(&ours));
    let missing: Vec<_> = a.difference(&b).collect();
    let extra: Vec<_> = b.difference(&a).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "tests/golden differs from {}: missing {missing:?}, extra {extra:?}; \
         copy the upstream files in (never edit them)",
        upstream.display()
    );
    for name in &a {
        let x = std::fs::read(upstream.join(name)).unwrap();
        let y = std::fs::read(ours.join(name)).unwrap();
        assert!(
            x == y,
            "tests/golden/{name} differs from {}; copy the upstream file in",
            upstream.join(name).display()
        );
    }
}

#[test]
fn golden_copy_is_complete() {
    // The files the tests read must be in the repository itself.
    let ours = minfer_testutil::golden_dir();
    for name in [
        "README.md",
        "prompts.json",
        "perplexity.json",
        "apache-2.0.txt",
        "chat-templates.json",
        "tokenize-corpus.json",
        "tokenize-qwen2.5.json",
        "tokenize-smollm2.json",
        "greedy-qwen2.5.json",
        "greedy-qwen2.5.avx2.json",
        "greedy-smollm2.json",
        "greedy-smollm2.avx2.json",
    ] {
        assert!(
            ours.join(name).is_file(),
            "{} is missing",
            ours.join(name).display()
        );
    }
}
