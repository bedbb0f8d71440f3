//! SentencePiece tokenization as llama.cpp implements it for GGUF
//! vocabularies of `tokenizer.ggml.model == "llama"` (its
//! `llm_tokenizer_spm`).
//!
//! The text of a fragment (spaces already escaped to `▁`) starts as one
//! symbol per UTF-8 character. Every adjacent pair whose concatenation is
//! a token is a candidate merge, scored by that token's score; the best
//! candidate (highest score, then leftmost) is merged, the new neighbour
//! pairs become candidates, and so on until none is left. A final symbol
//! that is not a token is emitted byte by byte through the `<0xXX>`
//! byte-fallback tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::fxhash::FxHashMap;

/// The escaped form of a space.
pub(crate) const SPACE: &str = "\u{2581}";

/// Scores and byte-fallback ids of a SentencePiece vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct Spm {
    /// Per token, its merge score.
    scores: Vec<f32>,
    /// Per byte, the token that stands for it: `<0xXX>`, else the byte as
    /// a one-character text (llama.cpp's fallback), else none.
    byte_ids: Box<[Option<u32>; 256]>,
    /// Emitted for a byte no token stands for.
    unk: Option<u32>,
}

/// One symbol of the fragment being merged: a byte range and its
/// neighbours in the chain.
#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: usize,
    /// 0 once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of two adjacent symbols.
#[derive(Clone, Copy, Debug)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    /// Byte length of the merged text; a candidate whose symbols changed
    /// since it was queued no longer has this length and is skipped.
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The heap's top is the highest score, then the leftmost pair, as
    /// llama.cpp's comparator orders them.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

impl Spm {
    /// Reads the scores and finds the byte tokens. `scores` may be shorter
    /// than the vocabulary: missing scores are 0.
    pub fn new(
        texts: &[String],
        token_ids: &FxHashMap<String, u32>,
        mut scores: Vec<f32>,
        unk: Option<u32>,
    ) -> Spm {
        scores.resize(texts.len(), 0.0);
        let mut byte_ids = Box::new([None; 256]);
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            let hex = format!("<0x{b:02X}>");
            *slot = token_ids.get(&hex).copied().or_else(|| {
                let one = [b as u8];
                std::str::from_utf8(&one)
                    .ok()
                    .and_then(|s| token_ids.get(s).copied())
            });
        }
        Spm {
            scores,
            byte_ids,
            unk,
        }
    }

    /// Appends the tokens of `text` (a fragment with its spaces already
    /// escaped) to `out`.
    pub fn encode_fragment(
        &self,
        text: &str,
        token_ids: &FxHashMap<String, u32>,
        out: &mut Vec<u32>,
    ) {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(text.len());
            symbols.push(Symbol {
                start,
                len: end - start,
                prev: k.checked_sub(1),
                next: (k + 1 < starts.len()).then_some(k + 1),
            });
        }
        let mut queue = BinaryHeap::new();
        for i in 1..symbols.len() {
            self.push_bigram(text, &symbols, token_ids, Some(i - 1), Some(i), &mut queue);
        }
        while let Some(bg) = queue.pop() {
            let (l, r) = (symbols[bg.left], symbols[bg.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != bg.size {
                continue;
            }
            symbols[bg.left].len += r.len;
            symbols[bg.right].len = 0;
            symbols[bg.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(bg.left);
            }
            let prev = symbols[bg.left].prev;
            let next = symbols[bg.left].next;
            self.push_bigram(text, &symbols, token_ids, prev, Some(bg.left), &mut queue);
            self.push_bigram(text, &symbols, token_ids, Some(bg.left), next, &mut queue);
        }
        let mut at = (!symbols.is_empty()).then_some(0);
        while let Some(i) = at {
            let s = symbols[i];
            let piece = &text[s.start..s.start + s.len];
            match token_ids.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for &b in piece.as_bytes() {
                        out.extend(self.byte_ids[b as usize].or(self.unk));
                    }
                }
            }
            at = s.next;
        }
    }

    fn push_bigram(
        &self,
        text: &str,
        symbols: &[Symbol],
        token_ids: &FxHashMap<String, u32>,
        left: Option<usize>,
        right: Option<usize>,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (symbols[left], symbols[right]);
        let size = l.len + r.len;
        let Some(&id) = token_ids.get(&text[l.start..l.start + size]) else {
            return;
        };
        queue.push(Bigram {
            score: self.scores.get(id as usize).copied().unwrap_or(0.0),
            left,
            right,
            size,
        });
    }
}

/// Escapes a fragment as SentencePiece sees it: every space becomes `▁`,
/// with one more in front when `prefix` (llama.cpp's `add_space_prefix`
/// at the start of the text or after a special token).
pub(crate) fn escape(text: &str, prefix: bool, out: &mut String) {
    out.clear();
    if prefix {
        out.push_str(SPACE);
    }
    for c in text.chars() {
        if c == ' ' {
            out.push_str(SPACE);
        } else {
            out.push(c);
        }
    }
}

/// The bytes a normal SentencePiece token renders as: its text with `▁`
/// turned back into spaces.
pub(crate) fn unescape(text: &str) -> Vec<u8> {
    text.replace(SPACE, " ").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(entries: &[(&str, f32)]) -> (Vec<String>, FxHashMap<String, u32>, Vec<f32>) {
        let texts: Vec<String> = entries.iter().map(|(t, _)| t.to_string()).collect();
        let ids = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        (texts, ids, entries.iter().map(|&(_, s)| s).collect())
    }

    #[test]
    fn merges_by_score_then_leftmost_and_falls_back_to_bytes() {
        let (texts, ids, scores) = vocab(&[
            ("<unk>", 0.0),
            ("<0x21>", 0.0),
            ("a", -1.0),
            ("b", -1.0),
            ("ab", -3.0),
            ("bb", -2.0),
            ("abb", -0.5),
            ("\u{2581}", -1.0),
        ]);
        let spm = Spm::new(&texts, &ids, scores, Some(0));
        let mut out = Vec::new();
        // "bb" outscores "ab", then "a"+"bb" is a token.
        spm.encode_fragment("abb", &ids, &mut out);
        assert_eq!(out, [6]);
        out.clear();
        // '!' has a byte token; 'é' has none and becomes <unk> per byte.
        spm.encode_fragment("a!é", &ids, &mut out);
        assert_eq!(out, [2, 1, 0, 0]);
        out.clear();
        // Equal scores: the leftmost pair wins.
        spm.encode_fragment("bbb", &ids, &mut out);
        assert_eq!(out, [5, 3]);
    }

    #[test]
    fn escaping_round_trips_spaces() {
        let mut s = String::new();
        escape("a b", true, &mut s);
        assert_eq!(s, "\u{2581}a\u{2581}b");
        assert_eq!(unescape(&s), b" a b");
        escape("", false, &mut s);
        assert!(s.is_empty());
    }
}
