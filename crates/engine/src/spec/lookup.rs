//! Prompt lookup: guesses from the sequence itself. When the last `n`
//! tokens appeared before, the tokens that followed them then are the
//! guess for what follows now (llama.cpp's lookup decoding and vLLM's
//! n-gram proposer). It costs no model at all, and pays off where the
//! answer repeats its context: code edits, quoting, summaries.

/// How far back a candidate's context is compared beyond the n-gram, to
/// choose between occurrences.
const CONTEXT: usize = 64;

/// Finds the longest n-gram (from `n_max` down to 1 tokens) that ends
/// `tokens` and also occurs earlier, and writes up to `k` of the tokens
/// that followed it into `out`. Among several occurrences the one whose
/// preceding tokens agree longest with those before the n-gram now wins
/// (the most recent among equals): in a copied text the same line may
/// occur many times, and its context tells which copy is being followed.
/// Returns the length of the matched n-gram, 0 when nothing matched (then
/// `out` is empty).
pub fn propose(tokens: &[u32], n_max: usize, k: usize, out: &mut Vec<u32>) -> usize {
    out.clear();
    let len = tokens.len();
    if k == 0 || len < 2 {
        return 0;
    }
    for n in (1..=n_max.min(len - 1)).rev() {
        let tail = &tokens[len - n..];
        // An occurrence at `s` must leave at least one token after it that
        // is not part of the tail itself: `s + n < len`, i.e. `s < len - n`.
        let mut best: Option<(usize, usize)> = None;
        for s in (0..len - n).rev() {
            if &tokens[s..s + n] != tail {
                continue;
            }
            let agree = (1..=CONTEXT.min(s))
                .take_while(|&j| tokens[s - j] == tokens[len - n - j])
                .count();
            if best.is_none_or(|(_, a)| agree > a) {
                best = Some((s, agree));
            }
        }
        if let Some((s, _)) = best {
            let from = s + n;
            let to = (from + k).min(len);
            out.extend_from_slice(&tokens[from..to]);
            return n;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::propose;

    #[test]
    fn longest_most_recent_match_wins() {
        let mut out = Vec::new();
        // "1 2 3" occurs at 0 and 5; the later one is followed by 9 9.
        let t = [1, 2, 3, 4, 5, 1, 2, 3, 9, 9, 7, 2, 3];
        // Tail "7 2 3" never occurred, "2 3" did (at 1 and 6; neither has
        // a preceding token that agrees with the 7, so the later wins).
        assert_eq!(propose(&t, 3, 4, &mut out), 2);
        assert_eq!(out, [9, 9, 7, 2]);
        // Capped at k.
        assert_eq!(propose(&t, 3, 1, &mut out), 2);
        assert_eq!(out, [9]);
    }

    #[test]
    fn the_occurrence_with_the_longer_context_wins() {
        let mut out = Vec::new();
        // "5 1 2" at 0 is followed by 3; "7 1 2" at 4 by 8. The sequence
        // ends in "5 1 2": the occurrence at 0 agrees one token further
        // back, though the one at 4 is more recent.
        let t = [5, 1, 2, 3, 7, 1, 2, 8, 0, 5, 1, 2];
        assert_eq!(propose(&t, 2, 2, &mut out), 2);
        assert_eq!(out, [3, 7]);
    }

    #[test]
    fn no_match_no_guess() {
        let mut out = vec![5];
        assert_eq!(propose(&[1, 2, 3, 4], 3, 4, &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(propose(&[1], 3, 4, &mut out), 0);
        assert_eq!(propose(&[1, 1], 3, 0, &mut out), 0);
    }

    #[test]
    fn a_repeat_proposes_up_to_the_end() {
        let mut out = Vec::new();
        // Tail "1 1" matches at 1 (most recent with a token after it).
        assert_eq!(propose(&[1, 1, 1, 1], 2, 8, &mut out), 2);
        assert_eq!(out, [1]);
    }
}
