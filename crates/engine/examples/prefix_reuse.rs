//! Time to first token with and without a cached prefix: a first request
//! with a `N`-token prompt runs to completion, then a second request whose
//! prompt shares its first `SHARED` tokens starts; its time to first token
//! is compared with the same prompt on a cold runtime.
//!
//! ```sh
//! cargo run --release -p minfer-engine --example prefix_reuse -- MODEL.gguf [N] [SHARED] [THREADS]
//! ```

mod common;

use common::{timed_request, tokens};
use minfer_engine::{EngineConfig, LoadedModel};

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
    let (t_cold, r_cold, _) = timed_request(&mut cold, &second);
    let mut warm = m.scheduler(cfg).expect("scheduler");
    timed_request(&mut warm, &first);
    let (t_warm, r_warm, _) = timed_request(&mut warm, &second);
    println!(
        "{n}-token prompt sharing {shared} tokens with a finished request, {threads} threads:\n\
         cold: first token after {t_cold:.3} s ({r_cold} tokens reused)\n\
         warm: first token after {t_warm:.3} s ({r_warm} tokens reused)\n\
         speed-up: {:.1}x",
        t_cold / t_warm
    );
}
