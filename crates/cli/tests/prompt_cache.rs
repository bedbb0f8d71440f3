//! `--cache-ram` and `--cache-dir` through the real binary: the flags are
//! documented and checked, and a second `minfer run` of a long prompt
//! restores its beginning from the disk tier the first one wrote, printing
//! the same greedy answer.

mod common;

use std::path::{Path, PathBuf};

use common::{minfer, stderr, stdout};
use minfer_testutil::{require_model, SMOLLM};

#[test]
fn the_flags_are_documented_and_checked() {
    let home = tempfile::tempdir().unwrap();
    for cmd in ["run", "serve"] {
        let out = minfer(&[cmd, "--help"], home.path());
        assert!(out.status.success(), "{}", stderr(&out));
        let help = stdout(&out);
        for flag in ["--cache-ram <MIB>", "--cache-dir <DIR>"] {
            assert!(help.contains(flag), "{cmd} --help lacks {flag}:\n{help}");
        }
    }
    let out = minfer(&["run", "--cache-ram", "lots", "x", "y"], home.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--cache-ram"), "{}", stderr(&out));
}

/// The `.kvb` files under `dir`, in any subfolder.
fn block_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for sub in std::fs::read_dir(dir).unwrap() {
        let sub = sub.unwrap().path();
        if sub.is_dir() {
            for f in std::fs::read_dir(&sub).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "kvb") {
                    found.push(f);
                }
            }
        }
    }
    found
}

#[test]
fn a_second_run_restores_the_prompt_from_the_cache_dir_and_answers_the_same() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    // Well over two blocks of 256 tokens.
    let prompt: String = (0..120)
        .map(|i| format!("Line {i}: the quick brown fox jumps over the lazy dog. "))
        .collect();
    let file = home.path().join("prompt.txt");
    std::fs::write(&file, &prompt).unwrap();
    let args = [
        "run",
        model.to_str().unwrap(),
        "--temp",
        "0",
        "--no-template",
        "-n",
        "8",
        "-f",
        file.to_str().unwrap(),
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "-vv",
    ];
    let first = minfer(&args, home.path());
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        !stderr(&first).contains("prompt cache: restored"),
        "nothing to restore yet"
    );
    let files = block_files(cache.path());
    assert!(files.len() >= 2, "block files written on exit: {files:?}");

    let second = minfer(&args, home.path());
    let err = stderr(&second);
    assert!(second.status.success(), "{err}");
    assert!(
        err.contains("prompt cache: restored positions 0.."),
        "{err}"
    );
    assert!(err.contains(" from disk)"), "{err}");
    assert_eq!(stdout(&second), stdout(&first), "the same greedy answer");
}
