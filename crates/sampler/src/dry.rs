//! DRY ("don't repeat yourself"), after koboldcpp's and llama.cpp's
//! definition: a token that would extend a sequence already present in the
//! history, beyond an allowed length, is penalised exponentially in the
//! length of the repeat. Sequence breakers (newline, `:` ...) cut repeats:
//! a repeat never reaches back across one.

use std::collections::HashMap;

use crate::tokens::Tokens;

/// Longest breaker string considered, in bytes (llama.cpp's limit).
const MAX_BREAKER_BYTES: usize = 40;
/// Longest token tail kept for a multi-token breaker.
const MAX_TAIL_TOKENS: usize = 20;

/// The sequence breakers as token sequences: a head token and the tails
/// that follow it to complete a breaker. A head with an empty tail is a
/// breaker on its own (its text contains a whole breaker string).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Breakers {
    heads: HashMap<u32, Vec<Vec<u32>>>,
}

impl Breakers {
    /// Builds the table from breaker strings over `vocab`: every token whose
    /// text contains a breaker is a breaker by itself; a token whose text
    /// ends with the start of a breaker heads a sequence completed by the
    /// tokenization of the breaker's remaining text.
    pub(crate) fn build(vocab: &Tokens, strings: &[String]) -> Breakers {
        let mut b = Breakers::default();
        for s in strings {
            let s = truncate_at_char(s, MAX_BREAKER_BYTES).as_bytes();
            if s.is_empty() {
                continue;
            }
            for id in 0..vocab.len() as u32 {
                b.add_token(vocab, id, s);
            }
        }
        b
    }

    /// A table from explicit token sequences (head first), for tests.
    #[cfg(test)]
    pub(crate) fn from_sequences(seqs: &[&[u32]]) -> Breakers {
        let mut b = Breakers::default();
        for s in seqs {
            if let Some((&head, tail)) = s.split_first() {
                b.heads.entry(head).or_default().push(tail.to_vec());
            }
        }
        b
    }

    fn add_token(&mut self, vocab: &Tokens, id: u32, s: &[u8]) {
        let word = vocab.piece(id);
        if contains(word, s) {
            self.push(id, Vec::new());
            return;
        }
        for pos in 0..word.len() {
            if word[pos] != s[0] {
                continue;
            }
            // The breaker's start must run to the end of the token.
            let overlap = (word.len() - pos).min(s.len());
            if word[pos..pos + overlap] != s[..overlap] || overlap == s.len() {
                continue;
            }
            let rest = String::from_utf8_lossy(&s[overlap..]);
            let mut tail = vocab.tokenize(&rest);
            tail.truncate(MAX_TAIL_TOKENS);
            self.push(id, tail);
        }
    }

    fn push(&mut self, head: u32, tail: Vec<u32>) {
        let tails = self.heads.entry(head).or_default();
        if !tails.contains(&tail) {
            tails.push(tail);
        }
    }

    /// Whether `token` is a breaker by itself.
    pub(crate) fn is_single(&self, token: u32) -> bool {
        self.heads
            .get(&token)
            .is_some_and(|t| t.iter().any(Vec::is_empty))
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| w == needle)
}

fn truncate_at_char(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// DRY's settings for one step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DryParams {
    pub(crate) multiplier: f32,
    pub(crate) base: f32,
    pub(crate) allowed_length: usize,
    /// How many history tokens to scan (`usize::MAX` = all).
    pub(crate) last_n: usize,
}

/// Reusable buffers of the DRY computation.
#[derive(Debug, Default, Clone)]
pub(crate) struct DryScratch {
    rev: Vec<u32>,
    z: Vec<usize>,
    longest: HashMap<u32, usize>,
}

/// The DRY penalties for the next token after `history`: `(token, amount to
/// subtract from its logit)`, written to `out` (cleared first).
pub(crate) fn dry_penalties(
    history: &[u32],
    p: DryParams,
    breakers: &Breakers,
    scratch: &mut DryScratch,
    out: &mut Vec<(u32, f32)>,
) {
    out.clear();
    if p.multiplier == 0.0 || p.last_n == 0 {
        return;
    }
    let n = history.len().min(p.last_n);
    if n <= p.allowed_length {
        return;
    }
    // The scanned window, most recent token first.
    scratch.rev.clear();
    scratch
        .rev
        .extend(history[history.len() - n..].iter().rev());
    let r = &scratch.rev;

    let limit = repeat_limit(r, breakers);
    if limit < p.allowed_length {
        return;
    }

    z_array(r, &mut scratch.z);
    scratch.longest.clear();
    for k in 1..n {
        let len = scratch.z[k].min(limit);
        if len >= p.allowed_length {
            // r[k..k + len] repeats the latest `len` tokens; the token that
            // followed that earlier occurrence would extend the repeat.
            let next = r[k - 1];
            let e = scratch.longest.entry(next).or_insert(0);
            *e = (*e).max(len);
        }
    }

    // Keep base^exponent finite, as llama.cpp does.
    let max_exponent = if p.base > 1.000_001 {
        (88.722_84_f32 / p.base.ln()) as usize
    } else {
        0
    };
    for (&token, &len) in &scratch.longest {
        if breakers.is_single(token) {
            continue;
        }
        let mut exp = len - p.allowed_length;
        if max_exponent > 0 {
            exp = exp.min(max_exponent);
        }
        out.push((token, p.multiplier * p.base.powi(exp as i32)));
    }
    // The map's order is arbitrary; the output is not.
    out.sort_unstable_by_key(|&(t, _)| t);
}

/// How far back a repeat may reach: up to the most recent complete breaker
/// sequence (`r` is most-recent-first).
fn repeat_limit(r: &[u32], breakers: &Breakers) -> usize {
    for (i, head) in r.iter().enumerate() {
        let Some(tails) = breakers.heads.get(head) else {
            continue;
        };
        // The tail follows the head in time, so it lies before it in `r`.
        let longest = tails
            .iter()
            .filter(|t| t.len() <= i)
            .filter(|t| t.iter().enumerate().all(|(o, &tok)| r[i - o - 1] == tok))
            .map(Vec::len)
            .max();
        if let Some(len) = longest {
            return i - len;
        }
    }
    r.len()
}

/// The Z-array of `s`: `z[k]` is the length of the longest common prefix of
/// `s` and `s[k..]` (`z[0]` is set to `s.len()`); linear time.
pub(crate) fn z_array(s: &[u32], z: &mut Vec<usize>) {
    let n = s.len();
    z.clear();
    z.resize(n, 0);
    if n == 0 {
        return;
    }
    z[0] = n;
    let (mut l, mut r) = (0usize, 0usize); // the match window [l, r)
    for k in 1..n {
        let mut len = 0;
        if k < r {
            len = z[k - l].min(r - k);
        }
        while k + len < n && s[len] == s[k + len] {
            len += 1;
        }
        z[k] = len;
        if k + len > r {
            l = k;
            r = k + len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(allowed: usize) -> DryParams {
        DryParams {
            multiplier: 0.8,
            base: 1.75,
            allowed_length: allowed,
            last_n: usize::MAX,
        }
    }

    fn run(history: &[u32], p: DryParams, b: &Breakers) -> Vec<(u32, f32)> {
        let mut out = Vec::new();
        dry_penalties(history, p, b, &mut DryScratch::default(), &mut out);
        out
    }

    #[test]
    fn z_array_matches_the_naive_definition() {
        let s = [1, 2, 1, 2, 1, 3, 1, 2, 1];
        let mut z = Vec::new();
        z_array(&s, &mut z);
        for k in 1..s.len() {
            let naive = (0..s.len() - k).take_while(|&i| s[i] == s[k + i]).count();
            assert_eq!(z[k], naive, "k = {k}");
        }
    }

    #[test]
    fn penalises_exactly_the_token_that_continues_the_repeat() {
        // a b c d | a b c: "a b c" occurred before, followed by d.
        let h = [10, 11, 12, 13, 10, 11, 12];
        let out = run(&h, params(2), &Breakers::default());
        // Repeat length 3, allowed 2: 0.8 * 1.75^1.
        assert_eq!(out, vec![(13, 0.8 * 1.75)]);
        // Allowed 3: the repeat is not longer than allowed... it equals it,
        // which llama.cpp still punishes with base^0.
        assert_eq!(run(&h, params(3), &Breakers::default()), vec![(13, 0.8)]);
        assert!(run(&h, params(4), &Breakers::default()).is_empty());
    }

    #[test]
    fn the_worked_example_of_llama_cpp() {
        // a b c c b c y a b c: continuing "a b c" (len 3) with c, "b c"
        // (len 2) with y; "c" alone (len 1) is below the allowed length.
        let (a, b, c, y) = (1, 2, 3, 4);
        let h = [a, b, c, c, b, c, y, a, b, c];
        let out = run(&h, params(2), &Breakers::default());
        assert_eq!(out, vec![(c, 0.8 * 1.75), (y, 0.8)]);
    }

    #[test]
    fn breakers_cut_repeats_and_are_never_penalised() {
        let nl = 99;
        let b = Breakers::from_sequences(&[&[nl]]);
        // NL 1 2 3 8 NL 1 2 3: the repeat "NL 1 2 3" is four tokens long,
        // but a repeat never reaches back across a breaker: it counts 3.
        let h = [nl, 1, 2, 3, 8, nl, 1, 2, 3];
        assert_eq!(
            run(&h, params(2), &Breakers::default()),
            vec![(8, 0.8 * 1.75f32.powi(2))]
        );
        assert_eq!(run(&h, params(2), &b), vec![(8, 0.8 * 1.75)]);
        // 1 2 3 NL 7 1 2 3: the repeat "1 2 3" would be continued by NL,
        // but a single-token breaker itself is never penalised.
        let h2 = [1, 2, 3, nl, 7, 1, 2, 3];
        assert!(run(&h2, params(2), &b).is_empty());
        // The last token is a breaker: no repeat can be under way.
        assert!(run(&[1, 2, 1, 2, nl], params(1), &b).is_empty());
        // A two-token breaker (head 5, then 6) only counts when complete.
        let b2 = Breakers::from_sequences(&[&[5, 6]]);
        let h3 = [1, 2, 3, 5, 1, 2, 3];
        assert_eq!(run(&h3, params(2), &b2), vec![(5, 0.8 * 1.75)]);
        let h4 = [5, 6, 1, 2, 3, 9, 5, 6, 1, 2, 3];
        assert_eq!(
            run(&h4, params(2), &Breakers::default()),
            vec![(9, 0.8 * 1.75f32.powi(3))]
        );
        assert_eq!(run(&h4, params(2), &b2), vec![(9, 0.8 * 1.75)]);
    }

    #[test]
    fn last_n_limits_the_scan_and_zero_multiplier_is_off() {
        let h = [10, 11, 12, 13, 10, 11, 12];
        let mut p = params(2);
        p.last_n = 4;
        assert!(run(&h, p, &Breakers::default()).is_empty());
        p.last_n = usize::MAX;
        p.multiplier = 0.0;
        assert!(run(&h, p, &Breakers::default()).is_empty());
    }

    #[test]
    fn huge_repeats_stay_finite() {
        let h: Vec<u32> = (0..600).map(|i| i % 2).collect();
        let out = run(&h, params(2), &Breakers::default());
        assert!(!out.is_empty());
        assert!(out.iter().all(|&(_, p)| p.is_finite()));
    }
}
