//! Log probabilities in OpenAI's two shapes: the chat API's
//! `logprobs.content` entries, and the legacy completions API's parallel
//! lists.

use serde_json::{json, Value};

use crate::events::TokenLogprob;

/// One token's entry of the chat API's `logprobs.content`:
/// `{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}`;
/// `token` is the bytes as UTF-8 (lossy for a token that holds part of a
/// character, which `bytes` gives exactly). A prompt's first token has a
/// null `logprob` and `top_logprobs`.
pub fn entry(lp: &TokenLogprob) -> Value {
    let one = |bytes: &[u8], logprob: Option<f32>| {
        json!({
            "token": String::from_utf8_lossy(bytes),
            "logprob": logprob,
            "bytes": bytes,
        })
    };
    let mut e = one(&lp.bytes, lp.logprob);
    e["top_logprobs"] = match &lp.top {
        Some(top) => top.iter().map(|(_, b, l)| one(b, Some(*l))).collect(),
        None => Value::Null,
    };
    e
}

/// The chat API's `logprobs` of a choice (or of one chunk of it): the
/// entries when the request asked for them, else null.
pub fn chat(on: bool, entries: &[TokenLogprob]) -> Value {
    if on {
        let content: Vec<Value> = entries.iter().map(entry).collect();
        json!({"content": content, "refusal": null})
    } else {
        Value::Null
    }
}

/// The legacy completions API's `logprobs` for `entries`; `offset` is the
/// text's length in characters before the first token, advanced past each.
pub fn legacy(entries: &[TokenLogprob], offset: &mut usize) -> Value {
    let mut tokens = Vec::with_capacity(entries.len());
    let mut lps = Vec::with_capacity(entries.len());
    let mut tops = Vec::with_capacity(entries.len());
    let mut offsets = Vec::with_capacity(entries.len());
    for e in entries {
        let tok = e.text();
        lps.push(json!(e.logprob));
        match &e.top {
            // The prompt's first token: nothing before it to predict it.
            None => tops.push(Value::Null),
            Some(list) => {
                let mut top = serde_json::Map::new();
                for (_, bytes, l) in list {
                    top.insert(String::from_utf8_lossy(bytes).into_owned(), json!(l));
                }
                tops.push(Value::Object(top));
            }
        }
        offsets.push(json!(*offset));
        *offset += tok.chars().count();
        tokens.push(json!(tok));
    }
    json!({
        "tokens": tokens,
        "token_logprobs": lps,
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}
