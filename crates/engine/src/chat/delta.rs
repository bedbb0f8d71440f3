//! Delta prefill: what a sequence must evaluate to hold a new rendering of
//! the conversation, given what it holds now.

/// How to bring a cached token history to a target rendering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    /// Cached tokens to keep: roll the sequence back to this position.
    pub keep: usize,
    /// Tokens to evaluate after them (never empty: the last one's logits
    /// start the answer).
    pub feed: Vec<u32>,
    /// Set when the cache is not a prefix of the target: the first
    /// position where they differ (the template rewrote earlier text, or
    /// the model's tokens differ from the text's own tokenization).
    pub mismatch_at: Option<usize>,
}

/// Plans the step from `cached` to `target`: keep their common beginning,
/// evaluate the rest. When `target` adds nothing (it equals the cache or
/// is a beginning of it), its last token is evaluated again, since its
/// logits are needed.
pub fn plan(cached: &[u32], target: &[u32]) -> Delta {
    let common = cached
        .iter()
        .zip(target)
        .take_while(|(a, b)| a == b)
        .count();
    let mismatch_at = (common < cached.len() && common < target.len()).then_some(common);
    let keep = common.min(target.len().saturating_sub(1));
    Delta {
        keep,
        feed: target[keep..].to_vec(),
        mismatch_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_feeds_only_the_new_tokens() {
        let d = plan(&[1, 2, 3], &[1, 2, 3, 4, 5]);
        assert_eq!((d.keep, d.feed, d.mismatch_at), (3, vec![4, 5], None));
    }

    #[test]
    fn a_rewrite_rolls_back_to_the_first_difference() {
        let d = plan(&[1, 2, 3, 9], &[1, 2, 7, 4]);
        assert_eq!((d.keep, d.feed, d.mismatch_at), (2, vec![7, 4], Some(2)));
    }

    #[test]
    fn nothing_new_re_evaluates_the_last_token() {
        let d = plan(&[1, 2, 3, 4, 5], &[1, 2, 3]);
        assert_eq!((d.keep, d.feed, d.mismatch_at), (2, vec![3], None));
        let d = plan(&[1, 2, 3], &[1, 2, 3]);
        assert_eq!((d.keep, d.feed), (2, vec![3]));
    }

    #[test]
    fn an_empty_cache_feeds_everything() {
        let d = plan(&[], &[5, 6]);
        assert_eq!((d.keep, d.feed, d.mismatch_at), (0, vec![5, 6], None));
    }
}
