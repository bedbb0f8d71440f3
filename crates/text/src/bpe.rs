//! The BPE merge step: one pre-tokenized word in, token ids out.
//!
//! Strings that take part in merges ("pieces": vocabulary entries, merge
//! halves and merge results) are interned as small integers so that a
//! merge lookup is a hash of two integers rather than of two strings.
//! Vocabulary texts are their own token ids, which also makes the final
//! piece → token lookup free.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bytes;
use crate::fxhash::FxHashMap;

/// Interned piece id: a token id for vocabulary texts, ids from the
/// vocabulary size on for the few merge strings that are not tokens.
type PieceId = u32;

/// Merge ranks and the lookups that turn merged pieces into token ids.
#[derive(Clone, Debug)]
pub(crate) struct Merges {
    /// Vocabulary size: piece ids below it are token ids.
    n_vocab: u32,
    /// Text → piece id, for pieces that are not vocabulary entries.
    extra_ids: FxHashMap<String, PieceId>,
    /// Texts of those pieces, by `id - n_vocab`.
    extra_text: Vec<String>,
    /// (left, right) → (rank, merged piece).
    ranks: FxHashMap<(PieceId, PieceId), (u32, PieceId)>,
    /// Byte → piece id of its one-character string.
    byte_piece: [PieceId; 256],
    /// Piece id → byte length of its text (for the staleness check).
    piece_len: Vec<u32>,
}

impl Merges {
    /// Builds the tables. `texts` are the vocabulary entries, `token_ids`
    /// maps each text to the id llama.cpp resolves it to, `merges` are
    /// `"left right"` strings in rank order.
    pub fn new<'a>(
        texts: &[String],
        token_ids: &FxHashMap<String, u32>,
        merges: impl ExactSizeIterator<Item = &'a str>,
    ) -> Merges {
        let mut m = Merges {
            n_vocab: texts.len() as u32,
            extra_ids: FxHashMap::default(),
            extra_text: Vec::new(),
            ranks: FxHashMap::with_capacity_and_hasher(merges.len(), Default::default()),
            byte_piece: [0; 256],
            piece_len: texts.iter().map(|t| t.len() as u32).collect(),
        };
        let mut buf = String::new();
        for b in 0..=255u8 {
            buf.clear();
            buf.push(bytes::byte_to_char(b));
            m.byte_piece[b as usize] = m.intern(token_ids, &buf);
        }
        for (rank, line) in merges.enumerate() {
            // As in llama.cpp, the halves are split at the first space after
            // the first byte (so a left half may itself be a space), and a
            // line without one pairs two empty strings.
            let space = line.bytes().skip(1).position(|b| b == b' ');
            let (left, right) = match space {
                // A space is one byte, so both cuts are on char boundaries.
                Some(i) => (&line[..i + 1], &line[i + 2..]),
                None => ("", ""),
            };
            buf.clear();
            buf.push_str(left);
            buf.push_str(right);
            let l = m.intern(token_ids, left);
            let r = m.intern(token_ids, right);
            let p = m.intern(token_ids, &buf);
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            // The first occurrence of a pair keeps its rank.
            m.ranks.entry((l, r)).or_insert((rank, p));
        }
        m
    }

    fn intern(&mut self, token_ids: &FxHashMap<String, u32>, text: &str) -> PieceId {
        if let Some(&id) = token_ids.get(text) {
            return id;
        }
        if let Some(&p) = self.extra_ids.get(text) {
            return p;
        }
        let p = self.n_vocab + self.extra_text.len() as PieceId;
        self.extra_ids.insert(text.to_string(), p);
        self.extra_text.push(text.to_string());
        self.piece_len.push(text.len() as u32);
        p
    }

    /// Number of merge rules.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Appends the tokens of one word (raw bytes, before the byte-to-char
    /// mapping) to `out`.
    pub fn encode_word(
        &self,
        word: &[u8],
        ignore_merges: bool,
        token_ids: &FxHashMap<String, u32>,
        out: &mut Vec<u32>,
    ) {
        if word.is_empty() {
            return;
        }
        if ignore_merges {
            let mut encoded = String::with_capacity(word.len() * 2);
            bytes::encode_bytes(word, &mut encoded);
            if let Some(&id) = token_ids.get(&encoded) {
                out.push(id);
                return;
            }
        }

        // Each symbol starts as one byte (one character of the mapped
        // text) and grows by absorbing its right neighbour.
        let mut syms: Vec<Symbol> = word
            .iter()
            .enumerate()
            .map(|(i, &b)| Symbol {
                piece: self.byte_piece[b as usize],
                len: self.piece_len[self.byte_piece[b as usize] as usize],
                prev: i as isize - 1,
                next: if i + 1 == word.len() {
                    -1
                } else {
                    i as isize + 1
                },
            })
            .collect();

        // Min-heap on (rank, left index): the lowest rank merges first and
        // ties go to the leftmost pair, as in llama.cpp.
        let mut heap: BinaryHeap<Reverse<Candidate>> = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Reverse<Candidate>>,
                    syms: &[Symbol],
                    left: isize,
                    right: isize| {
            if left < 0 || right < 0 {
                return;
            }
            let (l, r) = (&syms[left as usize], &syms[right as usize]);
            if let Some(&(rank, merged)) = self.ranks.get(&(l.piece, r.piece)) {
                heap.push(Reverse(Candidate {
                    rank,
                    left: left as usize,
                    right: right as usize,
                    merged,
                    len: l.len + r.len,
                }));
            }
        };
        for i in 1..syms.len() {
            push(&mut heap, &syms, i as isize - 1, i as isize);
        }

        while let Some(Reverse(Candidate {
            left,
            right,
            merged,
            len,
            ..
        })) = heap.pop()
        {
            let (l, r) = (&syms[left], &syms[right]);
            // A pair is stale once either side has changed; both only ever
            // grow, so comparing the combined length is enough.
            if l.len == 0 || r.len == 0 || l.len + r.len != len {
                continue;
            }
            let r_next = r.next;
            syms[left].piece = merged;
            syms[left].len = len;
            syms[left].next = r_next;
            syms[right].len = 0;
            if r_next >= 0 {
                syms[r_next as usize].prev = left as isize;
            }
            let l_prev = syms[left].prev;
            push(&mut heap, &syms, l_prev, left as isize);
            push(&mut heap, &syms, left as isize, r_next);
        }

        let mut i: isize = 0;
        while i >= 0 {
            let s = &syms[i as usize];
            if s.piece < self.n_vocab {
                out.push(s.piece);
            } else {
                self.unknown_piece(s.piece, token_ids, out);
            }
            i = s.next;
        }
    }

    /// A merge result that is not in the vocabulary: llama.cpp looks up
    /// each byte of its (mapped) text as a one-byte token and keeps the
    /// ones it finds.
    fn unknown_piece(
        &self,
        piece: PieceId,
        token_ids: &FxHashMap<String, u32>,
        out: &mut Vec<u32>,
    ) {
        let Some(text) = piece
            .checked_sub(self.n_vocab)
            .and_then(|i| self.extra_text.get(i as usize))
        else {
            return;
        };
        for &b in text.as_bytes() {
            // Only ASCII bytes form a one-byte string; the others can never
            // match a vocabulary entry.
            if let Ok(s) = std::str::from_utf8(&[b]) {
                if let Some(&id) = token_ids.get(s) {
                    out.push(id);
                }
            }
        }
    }
}

/// A mergeable pair. The derived order (rank, then left position) is the
/// order in which merges are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    rank: u32,
    left: usize,
    right: usize,
    merged: PieceId,
    /// Combined byte length of the pair when it was queued.
    len: u32,
}

#[derive(Clone, Copy, Debug)]
struct Symbol {
    piece: PieceId,
    /// Byte length of the piece's text; 0 once merged into its left
    /// neighbour.
    len: u32,
    prev: isize,
    next: isize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(words: &[&str]) -> (Vec<String>, FxHashMap<String, u32>) {
        let texts: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let ids = texts
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), i as u32))
            .collect();
        (texts, ids)
    }

    #[test]
    fn merges_by_rank_then_leftmost() {
        let (t, v) = vocab(&["a", "b", "ab", "aa", "aaa", "Ġ", "Ġa"]);
        let m = Merges::new(&t, &v, ["a a", "a b", "Ġ a"].into_iter());
        let mut out = Vec::new();
        m.encode_word(b"aaa", false, &v, &mut out);
        assert_eq!(out, [3, 0]); // (aa)(a): the leftmost pair wins the tie
        out.clear();
        m.encode_word(b"ab", false, &v, &mut out);
        assert_eq!(out, [2]);
        out.clear();
        m.encode_word(b" a", false, &v, &mut out);
        assert_eq!(out, [6]);
    }

    #[test]
    fn ignore_merges_takes_whole_word() {
        let (t, v) = vocab(&["a", "b", "ab", "aa", "aaa"]);
        let m = Merges::new(&t, &v, ["a a"].into_iter());
        let mut out = Vec::new();
        m.encode_word(b"aaa", true, &v, &mut out);
        assert_eq!(out, [4]);
        out.clear();
        m.encode_word(b"aaa", false, &v, &mut out);
        assert_eq!(out, [3, 0]);
    }
}
