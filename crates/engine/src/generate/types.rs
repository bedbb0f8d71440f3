//! What a generation is asked to do and what it reports: its settings,
//! why it stopped, its counters, and the log-probabilities of its tokens.

use minfer_sampler::SamplingParams;

use crate::spec::SpecStats;

/// What to generate and when to stop.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerateConfig {
    /// Most tokens to generate (`-n`); `0` means no limit other than the
    /// context window and the end-of-generation token.
    pub max_tokens: usize,
    /// Stop strings; the first one to appear ends generation and is not
    /// emitted. Empty strings are ignored.
    pub stop: Vec<String>,
    /// Sampling parameters.
    pub sampler: SamplingParams,
    /// Report the log-probability of every generated token and of its
    /// `n` most likely alternatives (`Some(n)`, `n` at most
    /// [`MAX_TOP_LOGPROBS`]) as [`Event::Logprobs`](crate::Event::Logprobs)
    /// events of the [`Scheduler`](crate::Scheduler); `None` is off.
    ///
    /// The probabilities are the log-softmax of the model's raw logits, before
    /// logit bias, penalties and temperature, as llama-server's `n_probs`
    /// reports them by default.
    pub logprobs: Option<u8>,
}

/// The most alternatives [`GenerateConfig::logprobs`] may ask for (OpenAI's
/// `top_logprobs` limit).
pub const MAX_TOP_LOGPROBS: u8 = 20;

/// The log-probabilities around one generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The generated token.
    pub token: u32,
    /// Its log-probability under the raw logits (`<= 0`).
    pub logprob: f32,
    /// The most likely tokens with their log-probabilities, most likely
    /// first (equal ones by lowest id); as many as asked for, fewer only
    /// when the vocabulary is smaller.
    pub top: Vec<(u32, f32)>,
}

/// The log-softmax of `logits` at `token` and its `n` most likely entries
/// (NaN counts as `-inf`). `top` is cleared and refilled, best first.
pub(crate) fn logprobs_of(logits: &[f32], token: u32, n: usize, top: &mut Vec<(u32, f32)>) -> f32 {
    let clean = |l: f32| if l.is_nan() { f32::NEG_INFINITY } else { l };
    let max = logits
        .iter()
        .fold(f32::NEG_INFINITY, |m, &l| m.max(clean(l)));
    let log_z = if max.is_finite() {
        let sum: f64 = logits
            .iter()
            .map(|&l| f64::from(clean(l) - max).exp())
            .sum();
        f64::from(max) + sum.ln()
    } else {
        f64::from(max)
    };
    let lp = |l: f32| (f64::from(clean(l)) - log_z) as f32;
    top.clear();
    if n > 0 {
        // A sorted insertion into at most `n` (<= 20) entries: better
        // means a larger logit, or an equal one with a lower id.
        for (i, &l) in logits.iter().enumerate() {
            let l = clean(l);
            if top.len() == n && l <= top[n - 1].1 {
                continue;
            }
            let at = top.partition_point(|&(_, b)| b >= l);
            if top.len() == n {
                top.pop();
            }
            top.insert(at, (i as u32, l));
        }
        for e in top.iter_mut() {
            e.1 = lp(e.1);
        }
    }
    logits
        .get(token as usize)
        .map_or(f32::NEG_INFINITY, |&l| lp(l))
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    Eog,
    /// A stop string appeared in the output.
    StopString,
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The next token would not fit in the context window.
    ContextFull,
    /// The text callback asked to stop, or the generation was cancelled.
    Cancelled,
    /// The KV cells shared with other sequences ran out.
    CacheFull,
    /// The grammar or JSON schema was complete: it allowed nothing but the
    /// end of the text.
    Grammar,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Eog => "end of generation",
            StopReason::StopString => "stop string",
            StopReason::MaxTokens => "token limit",
            StopReason::ContextFull => "context full",
            StopReason::Cancelled => "cancelled",
            StopReason::CacheFull => "KV cache full",
            StopReason::Grammar => "grammar complete",
        })
    }
}

/// Counters and timings of one [`generate`](super::generate) call.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationStats {
    /// Tokens of the prompt (evaluated in the prefill).
    pub prompt_tokens: usize,
    /// Tokens generated, the end-of-generation token not included.
    pub generated_tokens: usize,
    /// Wall time of the prefill.
    pub prefill_secs: f64,
    /// Wall time of the decode loop (sampling, gates and decode steps).
    pub decode_secs: f64,
    /// Why generation ended.
    pub stop_reason: StopReason,
    /// Graphs the engine built during this call; a run that reuses its
    /// graphs builds two (one prefill, one decode) on a fresh engine.
    pub graph_builds: u64,
    /// The generated token ids, in order (the end-of-generation token not
    /// included).
    pub tokens: Vec<u32>,
    /// Speculation counters (all zero without speculation).
    pub spec: SpecStats,
}

impl GenerationStats {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_secs)
    }

    /// Generated tokens per second of the decode loop.
    pub fn decode_tokens_per_sec(&self) -> f64 {
        rate(self.generated_tokens, self.decode_secs)
    }
}

/// `n` per second over `secs` (0 when no time passed).
pub(crate) fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}
