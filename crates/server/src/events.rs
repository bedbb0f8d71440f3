//! What the model thread sends back to a request: typed events (text,
//! log probabilities, how each choice ended, a failure). Each API renders
//! them in its own shape; nothing here knows any API's JSON.

use minfer_engine::{StopReason, TokenLogprobs, Tokenizer};

/// What a request receives: for each choice, text, then one `Done`; or
/// one `Error` after which nothing follows.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// More text of a choice (whole UTF-8 characters).
    Text(usize, String),
    /// One generated token's log probability (only when the request asked
    /// for log probabilities); it comes before the text that holds the
    /// token.
    Logprobs(usize, TokenLogprob),
    /// The entries of a choice's prompt tokens (a scored job only), the
    /// first with no log probability; before any text of the choice.
    PromptLogprobs(usize, Vec<TokenLogprob>),
    /// What a choice generated, as the engine counted it: its token ids
    /// and how long its prompt and its decoding took; just before its
    /// `Done`.
    Generated(usize, Generated),
    /// A choice ended.
    Done(usize, Finish),
    /// Where a choice's prompt stands (llama-server's `return_progress`):
    /// once before any of it is computed, then after every chunk of it.
    Progress(usize, Progress),
    /// A choice's timings so far (llama-server's `timings_per_token`): just
    /// before each piece of its text.
    Timings(usize, Timings),
    /// The request failed; nothing follows.
    Error(String),
}

/// What a request wants reported while it runs, beyond its text.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// [`Out::Progress`] while its prompt is evaluated.
    pub progress: bool,
    /// [`Out::Timings`] before each piece of text.
    pub timings: bool,
}

impl Report {
    /// What a request with llama-server's `return_progress` and
    /// `timings_per_token` gets: nothing unless it streams.
    pub fn streamed(stream: bool, return_progress: bool, timings_per_token: bool) -> Report {
        Report {
            progress: stream && return_progress,
            timings: stream && timings_per_token,
        }
    }
}

/// How far a prompt's evaluation has come (llama-server's
/// `prompt_progress`), with the timings so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Tokens of the prompt.
    pub total: usize,
    /// Those found in the cache.
    pub cache: usize,
    /// Those in the cache now, the found ones included.
    pub processed: usize,
    /// The timings so far.
    pub timings: Timings,
}

impl Progress {
    /// llama-server's `prompt_progress` object.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "total": self.total,
            "cache": self.cache,
            "processed": self.processed,
            "time_ms": (self.timings.prompt_secs * 1e3) as u64,
        })
    }
}

/// What a choice has computed and how long it took: llama-server's
/// `timings`.
#[derive(Default, Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    /// Prompt tokens found in the cache.
    pub cache_n: usize,
    /// Prompt tokens computed.
    pub prompt_n: usize,
    /// Seconds the prompt took.
    pub prompt_secs: f64,
    /// Tokens generated.
    pub predicted_n: usize,
    /// Seconds the generation took after the prompt.
    pub predicted_secs: f64,
}

impl Timings {
    /// The timings of a generation as the engine reads it now.
    pub fn of(p: &minfer_engine::GenProgress) -> Timings {
        let prompt_n = p.evaluated_tokens - p.reused_tokens.min(p.evaluated_tokens);
        Timings {
            cache_n: p.reused_tokens,
            prompt_n,
            // Before the first chunk is computed, the time is the wait
            // for a place, not prompt work.
            prompt_secs: if prompt_n == 0 { 0.0 } else { p.prefill_secs },
            predicted_n: p.generated_tokens,
            predicted_secs: p.decode_secs,
        }
    }

    /// llama-server's `timings` object. The first token comes with the
    /// prompt's last batch, so the generation rate is over the decode
    /// steps after it, as llama-server's.
    pub fn to_json(self) -> serde_json::Value {
        let (prompt_ms, predicted_ms) = (self.prompt_secs * 1e3, self.predicted_secs * 1e3);
        let per = |n: usize, ms: f64| if ms > 0.0 { n as f64 / ms * 1e3 } else { 0.0 };
        let per_token = |n: usize, ms: f64| if n > 0 { ms / n as f64 } else { 0.0 };
        let steps = self.predicted_n.saturating_sub(1);
        serde_json::json!({
            "cache_n": self.cache_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per_token(self.prompt_n, prompt_ms),
            "prompt_per_second": per(self.prompt_n, prompt_ms),
            "predicted_n": self.predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per_token(steps, predicted_ms),
            "predicted_per_second": per(steps, predicted_ms),
        })
    }
}

/// One token's log probability and its most likely alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The token's id.
    pub id: u32,
    /// The token's bytes (part of a character, for some tokens).
    pub bytes: Vec<u8>,
    /// Its log probability; none for a prompt's first token, which nothing
    /// before it predicts.
    pub logprob: Option<f32>,
    /// The alternatives with theirs (id, bytes, log probability), most
    /// likely first; none for a prompt's first token.
    pub top: Option<Vec<(u32, Vec<u8>, f32)>>,
}

impl TokenLogprob {
    /// The entry of one scored token, its ids decoded with `tok`.
    pub fn new(tok: &Tokenizer, lp: &TokenLogprobs) -> TokenLogprob {
        let bytes = |id: u32| tok.decode_token(id).to_vec();
        TokenLogprob {
            id: lp.token,
            bytes: bytes(lp.token),
            logprob: Some(lp.logprob),
            top: Some(lp.top.iter().map(|&(id, l)| (id, bytes(id), l)).collect()),
        }
    }

    /// The entry of a prompt's first token: no log probability.
    pub fn unscored(tok: &Tokenizer, id: u32) -> TokenLogprob {
        TokenLogprob {
            id,
            bytes: tok.decode_token(id).to_vec(),
            logprob: None,
            top: None,
        }
    }

    /// The token as text (lossy for a token that holds part of a
    /// character, which `bytes` gives exactly).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// A choice's token ids and the engine's own timings of it.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct Generated {
    /// The generated token ids (the end-of-generation token not included).
    pub tokens: Vec<u32>,
    /// Seconds the prompt's evaluation took.
    pub prefill_secs: f64,
    /// Seconds the generation took after the prompt.
    pub decode_secs: f64,
}

impl Generated {
    /// llama-server's `timings` of an answer that ended as `f`: the
    /// prompt tokens computed (not found in the cache) and the tokens
    /// generated, with their times and rates.
    pub fn timings(&self, f: &Finish) -> serde_json::Value {
        Timings {
            cache_n: f.cached_tokens,
            prompt_n: f.prompt_tokens - f.cached_tokens.min(f.prompt_tokens),
            prompt_secs: self.prefill_secs,
            predicted_n: f.completion_tokens,
            predicted_secs: self.decode_secs,
        }
        .to_json()
    }
}

/// How a generation ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finish {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated (the end-of-generation token not included).
    pub completion_tokens: usize,
    /// Tokens of the prompt found in the prefix cache (not computed).
    pub cached_tokens: usize,
    /// Why it ended.
    pub reason: StopReason,
}

impl Finish {
    /// Whether the answer was cut off (by the token limit or a full
    /// context) rather than ended by the model, a stop string or a cancel.
    pub fn cut_off(&self) -> bool {
        match self.reason {
            StopReason::Eog
            | StopReason::StopString
            | StopReason::Cancelled
            | StopReason::Grammar => false,
            StopReason::MaxTokens | StopReason::ContextFull | StopReason::CacheFull => true,
        }
    }
}
