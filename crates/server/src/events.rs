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
    /// The request failed; nothing follows.
    Error(String),
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
    /// generated, with their times and rates. The first token comes with
    /// the prompt's last batch, so the generation rate is over the decode
    /// steps after it, as llama-server's.
    pub fn timings(&self, f: &Finish) -> serde_json::Value {
        let (prompt_ms, predicted_ms) = (self.prefill_secs * 1e3, self.decode_secs * 1e3);
        let prompt_n = f.prompt_tokens - f.cached_tokens.min(f.prompt_tokens);
        let per = |n: usize, ms: f64| if ms > 0.0 { n as f64 / ms * 1e3 } else { 0.0 };
        let per_token = |n: usize, ms: f64| if n > 0 { ms / n as f64 } else { 0.0 };
        let steps = f.completion_tokens.saturating_sub(1);
        serde_json::json!({
            "cache_n": f.cached_tokens,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per_token(prompt_n, prompt_ms),
            "prompt_per_second": per(prompt_n, prompt_ms),
            "predicted_n": f.completion_tokens,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per_token(steps, predicted_ms),
            "predicted_per_second": per(steps, predicted_ms),
        })
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
