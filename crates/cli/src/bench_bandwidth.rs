//! How much of the machine's memory bandwidth a decode step draws: the
//! bytes of weights one token reads (every matrix, of a mixture of experts
//! only the chosen ones) times the tokens per second, against a read
//! bandwidth measured here on as many threads.

use std::hint::black_box;
use std::time::Instant;

use minfer_engine::WeightBytes;

/// A buffer well past any last-level cache, so that the probe reads memory.
const PROBE_BYTES: usize = 1 << 30;

/// The best of three timed passes of `threads` threads summing disjoint
/// parts of a 1 GiB buffer, in bytes per second.
pub fn read_bandwidth(threads: usize) -> f64 {
    let words = PROBE_BYTES / 8;
    // Written once so that every page is really there.
    let buf: Vec<u64> = (0..words as u64).collect();
    let threads = threads.max(1);
    let chunk = words.div_ceil(threads);
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for part in buf.chunks(chunk) {
                s.spawn(move || black_box(part.iter().fold(0u64, |a, &x| a.wrapping_add(x))));
            }
        });
        best = best.max(PROBE_BYTES as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// The report under the table: the weights a token reads, and for a
/// generation rate the bandwidth that draws and, when `peak` gives the
/// CPU's measured read bandwidth and its thread count, its share of that
/// (`None` when the layers run on a GPU, whose memory the probe does not
/// measure).
pub fn report(w: WeightBytes, tg: Option<(&str, f64)>, peak: Option<(f64, usize)>) -> String {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let mut s = format!(
        "weights read per token: {:.3} GiB of {:.3} GiB ({:.1} %)",
        gib(w.active),
        gib(w.total),
        100.0 * w.active as f64 / w.total.max(1) as f64
    );
    if let Some((test, tps)) = tg {
        let drawn = w.active as f64 * tps;
        s.push_str(&format!("\n{test}: {:.2} GB/s of weights", drawn / 1e9));
        match peak {
            Some((peak, threads)) => s.push_str(&format!(
                ", {:.0} % of this machine's read bandwidth ({:.2} GB/s on {threads} thread{})",
                100.0 * drawn / peak.max(1.0),
                peak / 1e9,
                if threads == 1 { "" } else { "s" }
            )),
            None => s.push_str(" (on the GPU: no share of the CPU's bandwidth is given)"),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_counts_the_share_of_weights_and_of_bandwidth() {
        let w = WeightBytes {
            active: 1 << 29,
            total: 1 << 31,
        };
        let r = report(
            w,
            Some(("tg128", 10.0)),
            Some((10.0 * f64::from(1u32 << 30), 2)),
        );
        assert!(r.contains("0.500 GiB of 2.000 GiB (25.0 %)"), "{r}");
        assert!(r.contains("5.37 GB/s of weights, 50 %"), "{r}");
        assert!(!report(w, None, Some((1.0, 1))).contains("tg"));
        let gpu = report(w, Some(("tg128", 10.0)), None);
        assert!(gpu.contains("5.37 GB/s of weights (on the GPU"), "{gpu}");
        assert!(!gpu.contains("read bandwidth"), "{gpu}");
    }
}
