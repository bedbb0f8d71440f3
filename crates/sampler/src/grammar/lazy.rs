//! A lazy constraint's wait for its trigger: the output bytes are watched
//! until the trigger text shows, and the tokens from there on are what the
//! grammar must start by consuming.

use llguidance::toktrie::TokTrie;

use crate::Trigger;

/// The output seen so far, token by token, while the trigger has not shown.
#[derive(Debug, Clone)]
pub(crate) struct Wait {
    trigger: Vec<u8>,
    include: bool,
    bytes: Vec<u8>,
    /// Where each token's bytes start in `bytes`.
    starts: Vec<usize>,
    tokens: Vec<u32>,
}

/// A token's text: the trie marks special tokens with a leading 0xFF,
/// which the output does not carry.
fn text(trie: &TokTrie, token: u32) -> &[u8] {
    let b = trie.token(token);
    match b.first() {
        Some(&TokTrie::SPECIAL_TOKEN_MARKER) => &b[1..],
        _ => b,
    }
}

impl Wait {
    pub(crate) fn new(t: &Trigger) -> Wait {
        Wait {
            trigger: t.text.as_bytes().to_vec(),
            include: t.include,
            bytes: Vec::new(),
            starts: Vec::new(),
            tokens: Vec::new(),
        }
    }

    /// Adds a generated token; once the trigger is complete, returns the
    /// tokens the grammar must consume first (possibly none).
    pub(crate) fn push(&mut self, token: u32, trie: &TokTrie) -> Option<Vec<u32>> {
        let from = self.bytes.len().saturating_sub(self.trigger.len());
        self.starts.push(self.bytes.len());
        self.tokens.push(token);
        self.bytes.extend_from_slice(text(trie, token));
        if self.trigger.is_empty() {
            return Some(Vec::new());
        }
        let at = self.bytes[from..]
            .windows(self.trigger.len())
            .position(|w| w == self.trigger.as_slice())?
            + from;
        let start = if self.include {
            at
        } else {
            at + self.trigger.len()
        };
        Some(self.replay(start, trie))
    }

    /// The tokens whose text is `bytes[start..]`: whole tokens where
    /// `start` falls on a token boundary, the tail of a split token
    /// retokenized.
    fn replay(&self, start: usize, trie: &TokTrie) -> Vec<u32> {
        let k = self.starts.partition_point(|&s| s <= start);
        // `k` tokens start at or before `start`; the last of them holds it.
        let mut out = Vec::new();
        match k.checked_sub(1) {
            Some(i) if self.starts[i] == start => out.extend_from_slice(&self.tokens[i..]),
            Some(i) => {
                let end = self.starts.get(i + 1).copied().unwrap_or(self.bytes.len());
                if start < end {
                    out.extend(trie.greedy_tokenize(&self.bytes[start..end]));
                }
                out.extend_from_slice(&self.tokens[i + 1..]);
            }
            None => out.extend_from_slice(&self.tokens),
        }
        out
    }
}
