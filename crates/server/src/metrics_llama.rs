//! llama-server's own `llamacpp:` metrics, beside minfer's: the names its
//! dashboards and its test suite read, from the same counters.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::metrics::Metrics;

impl Metrics {
    /// llama-server's counters and gauges. Its prompt tokens are the ones
    /// computed: those taken from the prefix cache are counted apart.
    pub(crate) fn render_llamacpp(&self, s: &mut String) {
        let prompt = self.prompt_tokens.load(Relaxed);
        let cached = self.prefix_reused_tokens.load(Relaxed).min(prompt);
        let predicted = self.completion_tokens.load(Relaxed);
        let prompt_secs = self.prefill_micros.load(Relaxed) as f64 / 1e6;
        let predicted_secs = self.decode_micros.load(Relaxed) as f64 / 1e6;
        let steps = self.step_count.load(Relaxed);
        let rate = |n: u64, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let counters: [(&str, &str, f64); 7] = [
            (
                "prompt_tokens_total",
                "Prompt tokens computed.",
                (prompt - cached) as f64,
            ),
            (
                "prompt_tokens_cached_total",
                "Prompt tokens taken from the prefix cache.",
                cached as f64,
            ),
            (
                "prompt_seconds_total",
                "Prompt processing time.",
                prompt_secs,
            ),
            (
                "tokens_predicted_total",
                "Tokens generated.",
                predicted as f64,
            ),
            (
                "tokens_predicted_seconds_total",
                "Generation time.",
                predicted_secs,
            ),
            ("n_decode_total", "Engine steps.", steps as f64),
            (
                "n_tokens_max",
                "The most tokens one finished generation held.",
                self.tokens_max.load(Relaxed) as f64,
            ),
        ];
        let busy = self.step_busy.load(Relaxed);
        let gauges: [(&str, &str, f64); 5] = [
            (
                "prompt_tokens_seconds",
                "Average prompt throughput in tokens/s.",
                rate(prompt - cached, prompt_secs),
            ),
            (
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s.",
                rate(predicted, predicted_secs),
            ),
            (
                "requests_processing",
                "Requests running.",
                self.active.load(Relaxed) as f64,
            ),
            (
                "requests_deferred",
                "Requests waiting.",
                self.queued.load(Relaxed) as f64,
            ),
            (
                "n_busy_slots_per_decode",
                "Average requests running per engine step.",
                if steps > 0 {
                    busy as f64 / steps as f64
                } else {
                    0.0
                },
            ),
        ];
        for (kind, list) in [("counter", &counters[..]), ("gauge", &gauges[..])] {
            for (name, help, v) in list {
                let _ = writeln!(
                    s,
                    "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {v}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use crate::metrics::Metrics;

    #[test]
    fn llamacpp_names_carry_minfer_counts() {
        let m = Metrics::default();
        m.prompt_tokens.fetch_add(200, Relaxed);
        m.prefix_reused_tokens.fetch_add(64, Relaxed);
        m.completion_tokens.fetch_add(30, Relaxed);
        m.prefill_micros.fetch_add(2_000_000, Relaxed);
        m.decode_micros.fetch_add(3_000_000, Relaxed);
        m.observe_step(0.01, 2);
        m.observe_step(0.01, 4);
        let t = m.render();
        for line in [
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 136\n",
            "llamacpp:prompt_tokens_cached_total 64\n",
            "llamacpp:prompt_seconds_total 2\n",
            "llamacpp:tokens_predicted_total 30\n",
            "llamacpp:tokens_predicted_seconds_total 3\n",
            "llamacpp:n_decode_total 2\n",
            "llamacpp:prompt_tokens_seconds 68\n",
            "llamacpp:predicted_tokens_seconds 10\n",
            "# TYPE llamacpp:n_busy_slots_per_decode gauge\nllamacpp:n_busy_slots_per_decode 3\n",
            "# HELP llamacpp:requests_deferred ",
        ] {
            assert!(t.contains(line), "{line:?} missing from:\n{t}");
        }
    }
}
