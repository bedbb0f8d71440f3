//! Time to first token of a long prompt computed, restored from the
//! prompt cache's RAM tier, and restored from its disk tier after a
//! restart. A first request of `N` tokens runs to completion; a second
//! request sharing its first `SHARED` tokens (an agent's next turn) is
//! timed on a cold runtime, on the same runtime after an unrelated prompt
//! has evicted the first from the KV cells (RAM tier), and on a new
//! runtime over the same cache folder (disk tier).
//!
//! ```sh
//! cargo run --release -p minfer-engine --example prompt_cache -- MODEL.gguf [N] [SHARED] [THREADS]
//! ```

use std::time::Instant;

mod common;

use common::{timed_request, tokens};
use minfer_engine::{CacheDir, EngineConfig, LoadedModel};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: prompt_cache MODEL.gguf [N] [SHARED] [THREADS]");
    let n: usize = args.get(2).map_or(8192, |a| a.parse().expect("N"));
    let shared: usize = args.get(3).map_or(n - 64, |a| a.parse().expect("SHARED"));
    let threads: usize = args.get(4).map_or(2, |a| a.parse().expect("THREADS"));
    let m = LoadedModel::open(std::path::Path::new(path)).expect("model");
    let dir = tempfile_dir();
    let base = EngineConfig {
        n_ctx: (n + 512) as u32,
        n_threads: threads,
        ..EngineConfig::default()
    };
    let tiers = EngineConfig {
        cache_ram: 4 << 30,
        cache_dir: Some(CacheDir::new(&dir)),
        ..base
    };
    let v = m.model().n_vocab();
    let first = tokens(1, n, v);
    let mut second = first[..shared].to_vec();
    second.extend(tokens(2, n - shared, v));
    let other = tokens(3, 1024, v);

    let (t_cold, _, want) = timed_request(&mut m.scheduler(base).expect("scheduler"), &second);

    let t0 = Instant::now();
    let mut s = m.scheduler(tiers).expect("scheduler");
    let t_start = t0.elapsed().as_secs_f64();
    timed_request(&mut s, &first);
    timed_request(&mut s, &other);
    let (t_ram, r_ram, got_ram) = timed_request(&mut s, &second);
    let st = s.runtime().prompt_cache_stats();
    drop(s);

    let mut s = m.scheduler(tiers).expect("scheduler");
    let (t_disk, r_disk, got_disk) = timed_request(&mut s, &second);
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(got_ram, want, "restored from RAM answers the same");
    assert_eq!(got_disk, want, "restored from disk answers the same");
    println!(
        "{n}-token prompt sharing {shared} tokens with an earlier one, {threads} threads:\n\
         computed:           first token after {t_cold:.3} s\n\
         restored from RAM:  first token after {t_ram:.3} s ({r_ram} tokens restored)\n\
         restored from disk: first token after {t_disk:.3} s ({r_disk} tokens restored, new runtime)\n\
         start-up with a cache folder (weights hashed): {t_start:.3} s\n\
         RAM tier: {} blocks, {:.1} MB",
        st.ram_blocks,
        st.ram_bytes as f64 / 1e6
    );
}

/// A fresh folder under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("minfer-prompt-cache-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temporary folder");
    d
}
