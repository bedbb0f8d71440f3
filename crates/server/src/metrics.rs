//! Counters and gauges behind `GET /metrics`, in Prometheus' text format.
//! Handlers and the model thread update them with relaxed atomics; a
//! scrape reads a consistent-enough snapshot.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Upper bounds (seconds) of the step-time histogram's buckets.
const STEP_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Everything `/metrics` reports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Finished HTTP requests by (endpoint, status).
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Prompt tokens of admitted generations.
    pub prompt_tokens: AtomicU64,
    /// Generated tokens.
    pub completion_tokens: AtomicU64,
    /// Prompt tokens taken from the prefix cache instead of computed.
    pub prefix_reused_tokens: AtomicU64,
    /// Generations running now.
    pub active: AtomicU64,
    /// Generations waiting for a slot.
    pub queued: AtomicU64,
    /// Generations cancelled because their client went away.
    pub disconnects: AtomicU64,
    /// Live sequences in the KV cache.
    pub live_sequences: AtomicU64,
    /// Idle sequences kept for prefix reuse.
    pub idle_sequences: AtomicU64,
    /// KV cells held by any sequence (idle ones included).
    pub cells_used: AtomicU64,
    /// KV cells held by a live sequence.
    pub cells_live: AtomicU64,
    /// KV cells a new step could use: free ones and those only idle
    /// sequences hold.
    pub cells_free: AtomicU64,
    /// KV cells in all.
    pub cells_total: AtomicU64,
    /// Guessed tokens checked (speculative decoding).
    pub spec_drafted: AtomicU64,
    /// Guessed tokens accepted.
    pub spec_accepted: AtomicU64,
    /// Checks of guesses: one per generation per step that had some.
    pub spec_checks: AtomicU64,
    step_buckets: [AtomicU64; STEP_BUCKETS.len()],
    pub(crate) step_count: AtomicU64,
    /// Sum of step times in microseconds.
    step_micros: AtomicU64,
    /// Sum over steps of the requests running in each.
    pub(crate) step_busy: AtomicU64,
    /// Microseconds of finished generations' prompts, as the engine
    /// timed them.
    pub prefill_micros: AtomicU64,
    /// Microseconds of finished generations' decoding.
    pub decode_micros: AtomicU64,
    /// The most tokens (prompt and answer) one finished generation held.
    pub tokens_max: AtomicU64,
    /// When the server started, in Unix seconds.
    pub started_unix: AtomicU64,
    /// The prompt cache's tiers, as of the last step.
    pub prompt_cache: Mutex<minfer_engine::PromptCacheStats>,
}

/// The gauges every model's worker adds its share to, in the order of
/// [`Metrics::shift_gauges`]'s values.
pub const GAUGES: usize = 11;

impl Metrics {
    /// Moves one worker's share of the summed gauges from `shown` to
    /// `now` (running, queued, live and idle sequences, used, free and
    /// live cells, all cells, drafted, accepted, checks), so that the
    /// gauges are sums over the loaded models.
    pub fn shift_gauges(&self, shown: &mut [u64; GAUGES], now: [u64; GAUGES]) {
        let gauges = [
            &self.active,
            &self.queued,
            &self.live_sequences,
            &self.idle_sequences,
            &self.cells_used,
            &self.cells_free,
            &self.cells_live,
            &self.cells_total,
            &self.spec_drafted,
            &self.spec_accepted,
            &self.spec_checks,
        ];
        for ((g, old), new) in gauges.into_iter().zip(shown.iter_mut()).zip(now) {
            // Wrapping: a share that shrinks adds its two's complement.
            g.fetch_add(new.wrapping_sub(*old), Relaxed);
            *old = new;
        }
    }

    /// Counts one finished request.
    pub fn request(&self, endpoint: &str, status: u16) {
        let mut m = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((endpoint.to_string(), status)).or_default() += 1;
    }

    /// Records one engine step's wall time and the requests it ran.
    pub fn observe_step(&self, secs: f64, busy: usize) {
        self.step_busy.fetch_add(busy as u64, Relaxed);
        for (b, &le) in self.step_buckets.iter().zip(STEP_BUCKETS.iter()) {
            if secs <= le {
                b.fetch_add(1, Relaxed);
            }
        }
        self.step_count.fetch_add(1, Relaxed);
        self.step_micros.fetch_add((secs * 1e6) as u64, Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(4096);
        let _ = writeln!(
            s,
            "# HELP minfer_requests_total HTTP requests answered, by endpoint and status."
        );
        let _ = writeln!(s, "# TYPE minfer_requests_total counter");
        let reqs = self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for ((endpoint, status), n) in reqs {
            let _ = writeln!(
                s,
                "minfer_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}"
            );
        }
        let counters = [
            (
                "minfer_prompt_tokens_total",
                "Prompt tokens of admitted generations.",
                &self.prompt_tokens,
            ),
            (
                "minfer_completion_tokens_total",
                "Tokens generated.",
                &self.completion_tokens,
            ),
            (
                "minfer_prompt_tokens_cached_total",
                "Prompt tokens served from the prefix cache.",
                &self.prefix_reused_tokens,
            ),
            (
                "minfer_disconnects_total",
                "Generations cancelled because the client went away.",
                &self.disconnects,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Relaxed)
            );
        }
        let gauges = [
            (
                "minfer_requests_active",
                "Generations running.",
                &self.active,
            ),
            (
                "minfer_requests_queued",
                "Generations waiting for a slot.",
                &self.queued,
            ),
            (
                "minfer_sequences_live",
                "Live sequences in the KV cache.",
                &self.live_sequences,
            ),
            (
                "minfer_sequences_idle",
                "Finished sequences kept for prefix reuse.",
                &self.idle_sequences,
            ),
            (
                "minfer_kv_cells_used",
                "KV cells held by a sequence (idle ones included).",
                &self.cells_used,
            ),
            (
                "minfer_kv_cells_live",
                "KV cells held by a running generation.",
                &self.cells_live,
            ),
            (
                "minfer_kv_cells_free",
                "KV cells free or held only by idle sequences.",
                &self.cells_free,
            ),
            (
                "minfer_kv_cells_total",
                "KV cells in all (the context window).",
                &self.cells_total,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}",
                v.load(Relaxed)
            );
        }
        self.render_gateway(&mut s);
        self.render_llamacpp(&mut s);
        self.render_spec(&mut s);
        self.render_prompt_cache(&mut s);
        let name = "minfer_step_seconds";
        let _ = writeln!(
            s,
            "# HELP {name} Wall time of one engine step.\n# TYPE {name} histogram"
        );
        for (b, le) in self.step_buckets.iter().zip(STEP_BUCKETS.iter()) {
            let _ = writeln!(s, "{name}_bucket{{le=\"{le}\"}} {}", b.load(Relaxed));
        }
        let count = self.step_count.load(Relaxed);
        let _ = writeln!(s, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            s,
            "{name}_sum {}",
            self.step_micros.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(s, "{name}_count {count}");
        s
    }
}

impl Metrics {
    /// The gauges an inference gateway's endpoint picker scrapes (the
    /// Kubernetes Gateway API inference extension's model-server protocol:
    /// queued and running requests, KV-cache utilization in [0, 1]) and the
    /// prefix cache's token counters, under minfer's names and under
    /// vLLM's, which the picker reads by default.
    fn render_gateway(&self, s: &mut String) {
        let total = self.cells_total.load(Relaxed);
        let free = self.cells_free.load(Relaxed).min(total);
        let usage = if total == 0 {
            0.0
        } else {
            (total - free) as f64 / total as f64
        };
        let waiting = self.queued.load(Relaxed) as f64;
        let running = self.active.load(Relaxed) as f64;
        let gauges = [
            ("num_requests_waiting", "Requests waiting for a slot.", waiting),
            ("num_requests_running", "Requests generating.", running),
            (
                "kv_cache_usage_perc",
                "KV-cache utilization: cells held by running or cached sequences that cannot be reused (1 = full).",
                usage,
            ),
        ];
        for prefix in ["minfer:", "vllm:"] {
            for (name, help, v) in gauges {
                let _ = writeln!(
                    s,
                    "# HELP {prefix}{name} {help}\n# TYPE {prefix}{name} gauge\n{prefix}{name} {v}"
                );
            }
        }
        // vLLM's older name for the same gauge, still the picker's default
        // in some releases.
        let _ = writeln!(
            s,
            "# HELP vllm:gpu_cache_usage_perc KV-cache utilization (1 = full).\n# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc {usage}"
        );
        // The prefix cache in tokens, as vLLM counts it: every prompt token
        // of an admitted generation is looked up, and a hit is one taken
        // from a cached sequence instead of computed. hits / queries is the
        // hit rate a router's prefix affinity is judged by.
        let counters = [
            (
                "prefix_cache_queries_total",
                "Prefix cache lookups, in prompt tokens looked up.",
                self.prompt_tokens.load(Relaxed),
            ),
            (
                "prefix_cache_hits_total",
                "Prefix cache hits, in prompt tokens served from the cache.",
                self.prefix_reused_tokens.load(Relaxed),
            ),
        ];
        for prefix in ["minfer:", "vllm:"] {
            for (name, help, v) in counters {
                let _ = writeln!(
                    s,
                    "# HELP {prefix}{name} {help}\n# TYPE {prefix}{name} counter\n{prefix}{name} {v}"
                );
            }
        }
    }
}

impl Metrics {
    /// Speculative decoding's counters, under llama-server's and vLLM's
    /// names (which agree) and minfer's prefix.
    /// The prompt cache's RAM and disk tiers (`--cache-ram`, `--cache-dir`).
    fn render_prompt_cache(&self, s: &mut String) {
        let p = *self.prompt_cache.lock().unwrap_or_else(|e| e.into_inner());
        let gauges = [
            (
                "minfer_prompt_cache_ram_budget_bytes",
                "The RAM tier's budget.",
                p.ram_budget as u64,
            ),
            (
                "minfer_prompt_cache_ram_bytes",
                "Bytes the RAM tier holds.",
                p.ram_bytes as u64,
            ),
            (
                "minfer_prompt_cache_ram_blocks",
                "Prompt blocks the RAM tier holds.",
                p.ram_blocks as u64,
            ),
            (
                "minfer_prompt_cache_disk_blocks",
                "Prompt blocks in the disk tier's folder.",
                p.disk_blocks as u64,
            ),
            (
                "minfer_prompt_cache_disk_bytes",
                "Bytes of those blocks.",
                p.disk_bytes,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [
            (
                "minfer_prompt_cache_restored_tokens_total{tier=\"ram\"}",
                p.restored_tokens_ram,
            ),
            (
                "minfer_prompt_cache_restored_tokens_total{tier=\"disk\"}",
                p.restored_tokens_disk,
            ),
        ];
        let name = "minfer_prompt_cache_restored_tokens_total";
        let _ = writeln!(
            s,
            "# HELP {name} Prompt tokens restored from a tier instead of computed.\n# TYPE {name} counter"
        );
        for (series, v) in counters {
            let _ = writeln!(s, "{series} {v}");
        }
        let rest = [
            (
                "minfer_prompt_cache_ram_evicted_blocks_total",
                "Blocks the RAM tier dropped for room.",
                p.ram_evicted_blocks,
            ),
            (
                "minfer_prompt_cache_disk_written_blocks_total",
                "Block files written.",
                p.disk_written,
            ),
            (
                "minfer_prompt_cache_disk_write_failures_total",
                "Block files that could not be written.",
                p.disk_write_failures,
            ),
            (
                "minfer_prompt_cache_disk_refused_blocks_total",
                "Block files refused (corrupt, another model or layout) and removed.",
                p.disk_refused,
            ),
        ];
        for (name, help, v) in rest {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        }
    }

    fn render_spec(&self, s: &mut String) {
        let counters = [
            (
                "spec_decode_num_draft_tokens_total",
                "Speculative decoding: guessed tokens checked.",
                &self.spec_drafted,
            ),
            (
                "spec_decode_num_accepted_tokens_total",
                "Speculative decoding: guessed tokens the model accepted.",
                &self.spec_accepted,
            ),
            (
                "spec_decode_num_drafts_total",
                "Speculative decoding: checks (steps of a generation with guesses).",
                &self.spec_checks,
            ),
        ];
        for prefix in ["minfer:", "llamacpp:", "vllm:"] {
            for (name, help, v) in counters {
                let _ = writeln!(
                    s,
                    "# HELP {prefix}{name} {help}\n# TYPE {prefix}{name} counter\n{prefix}{name} {}",
                    v.load(Relaxed)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_cache_tiers_are_reported() {
        let m = Metrics::default();
        *m.prompt_cache.lock().unwrap() = minfer_engine::PromptCacheStats {
            ram_budget: 1 << 20,
            ram_bytes: 4096,
            restored_tokens_disk: 512,
            ..Default::default()
        };
        let t = m.render();
        for line in [
            "minfer_prompt_cache_ram_budget_bytes 1048576\n",
            "minfer_prompt_cache_ram_bytes 4096\n",
            "minfer_prompt_cache_restored_tokens_total{tier=\"disk\"} 512\n",
            "# TYPE minfer_prompt_cache_disk_write_failures_total counter\n",
        ] {
            assert!(t.contains(line), "{line} in {t}");
        }
    }

    #[test]
    fn gateway_gauges_follow_the_queue_and_the_cache() {
        let m = Metrics::default();
        m.cells_total.store(1000, Relaxed);
        m.cells_free.store(750, Relaxed);
        m.queued.store(3, Relaxed);
        m.active.store(2, Relaxed);
        let t = m.render();
        for prefix in ["minfer:", "vllm:"] {
            assert!(
                t.contains(&format!("{prefix}num_requests_waiting 3\n")),
                "{t}"
            );
            assert!(
                t.contains(&format!("{prefix}num_requests_running 2\n")),
                "{t}"
            );
            assert!(
                t.contains(&format!("{prefix}kv_cache_usage_perc 0.25\n")),
                "{t}"
            );
        }
        assert!(
            t.contains("# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.25")
        );
    }

    #[test]
    fn prefix_cache_counters_count_prompt_tokens_looked_up_and_hit() {
        let m = Metrics::default();
        let t = m.render();
        for prefix in ["minfer:", "vllm:"] {
            assert!(
                t.contains(&format!(
                    "# TYPE {prefix}prefix_cache_queries_total counter\n{prefix}prefix_cache_queries_total 0\n"
                )),
                "{t}"
            );
            assert!(
                t.contains(&format!(
                    "# TYPE {prefix}prefix_cache_hits_total counter\n{prefix}prefix_cache_hits_total 0\n"
                )),
                "{t}"
            );
        }
        // Two requests of 120 and 80 prompt tokens, the second finding 64
        // of its tokens cached.
        m.prompt_tokens.fetch_add(120, Relaxed);
        m.prompt_tokens.fetch_add(80, Relaxed);
        m.prefix_reused_tokens.fetch_add(64, Relaxed);
        let t = m.render();
        for prefix in ["minfer:", "vllm:"] {
            assert!(
                t.contains(&format!("{prefix}prefix_cache_queries_total 200\n")),
                "{t}"
            );
            assert!(
                t.contains(&format!("{prefix}prefix_cache_hits_total 64\n")),
                "{t}"
            );
        }
        // The older minfer names stay, with the same values.
        assert!(t.contains("minfer_prompt_tokens_total 200\n"), "{t}");
        assert!(t.contains("minfer_prompt_tokens_cached_total 64\n"), "{t}");
        // Every sample line is a name, an optional label set and a number.
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(
                name.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':'),
                "{line}"
            );
        }
    }

    #[test]
    fn renders_counters_gauges_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.request("/v1/chat/completions", 200);
        m.request("/v1/chat/completions", 200);
        m.request("/v1/models", 401);
        m.observe_step(0.003, 1);
        m.observe_step(0.2, 2);
        m.completion_tokens.fetch_add(5, Relaxed);
        let t = m.render();
        assert!(
            t.contains("minfer_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2")
        );
        assert!(t.contains("minfer_requests_total{endpoint=\"/v1/models\",status=\"401\"} 1"));
        assert!(t.contains("minfer_completion_tokens_total 5"));
        assert!(t.contains("minfer_step_seconds_bucket{le=\"0.005\"} 1"));
        assert!(t.contains("minfer_step_seconds_bucket{le=\"0.25\"} 2"));
        assert!(t.contains("minfer_step_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(t.contains("minfer_step_seconds_count 2"));
        assert!(t.contains("vllm:num_requests_waiting 0"));
        assert!(t.contains("minfer:kv_cache_usage_perc 0"));
        m.spec_drafted.store(9, Relaxed);
        m.spec_accepted.store(6, Relaxed);
        let t = m.render();
        for prefix in ["minfer:", "llamacpp:", "vllm:"] {
            assert!(t.contains(&format!("{prefix}spec_decode_num_draft_tokens_total 9\n")));
            assert!(t.contains(&format!(
                "{prefix}spec_decode_num_accepted_tokens_total 6\n"
            )));
            assert!(t.contains(&format!("{prefix}spec_decode_num_drafts_total 0\n")));
        }
    }
}
