//! Cutting special-token texts out of a prompt before BPE runs.
//!
//! llama.cpp takes the special tokens longest text first and, for each one,
//! splits every still-raw fragment at each of its occurrences (left to
//! right, without overlap). Taking the tokens in that order, rather than
//! scanning the text once, decides which token wins where two overlap, so
//! the same order is kept here. A token with the LSTRIP or RSTRIP
//! attribute also swallows the ASCII whitespace (C's `isspace`) before or
//! after it, within the fragment it was found in.

use crate::vocab::attr;

/// A piece of the prompt after partitioning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Raw text, as a byte range of the prompt.
    Text(usize, usize),
    /// A special token found in the prompt.
    Token(u32),
}

/// The special tokens in partition order.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecialTokens {
    /// (id, attributes), longest text first; ties by id so that the order
    /// is reproducible.
    order: Vec<(u32, u8)>,
}

impl SpecialTokens {
    /// Control, user-defined and unknown tokens take part.
    pub fn new(texts: &[String], attrs: &[u8]) -> SpecialTokens {
        let mask = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        let mut order: Vec<(u32, u8)> = attrs
            .iter()
            .enumerate()
            .filter(|(_, &a)| a & mask != 0)
            .map(|(i, &a)| (i as u32, a))
            .collect();
        order.sort_by(|a, b| {
            let (la, lb) = (texts[a.0 as usize].len(), texts[b.0 as usize].len());
            lb.cmp(&la).then(a.0.cmp(&b.0))
        });
        SpecialTokens { order }
    }

    /// Splits `text` into raw fragments and special tokens. Without
    /// `parse_special` only user-defined tokens are cut out: control and
    /// unknown texts are tokenized as plain text.
    pub fn partition(&self, text: &str, texts: &[String], parse_special: bool) -> Vec<Fragment> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Fragment::Text(0, text.len()));
        for &(id, a) in &self.order {
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let needle = texts[id as usize].as_str();
            // Most special tokens never occur in a given prompt; one scan
            // of the whole text rules them out cheaply.
            if needle.is_empty() || !text.contains(needle) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(start, end) = f else {
                    next.push(f);
                    continue;
                };
                let mut pos = start;
                while let Some(i) = text[pos..end].find(needle) {
                    let m = pos + i;
                    let mut left_end = m;
                    if a & attr::LSTRIP != 0 {
                        left_end = pos + trim_end_len(&text.as_bytes()[pos..m]);
                    }
                    if left_end > pos {
                        next.push(Fragment::Text(pos, left_end));
                    }
                    next.push(Fragment::Token(id));
                    pos = m + needle.len();
                    if a & attr::RSTRIP != 0 {
                        pos += text.as_bytes()[pos..end]
                            .iter()
                            .take_while(|&&b| is_c_space(b))
                            .count();
                    }
                }
                if pos < end {
                    next.push(Fragment::Text(pos, end));
                }
            }
            frags = next;
        }
        frags
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp strips with: space,
/// tab, line feed, vertical tab, form feed, carriage return.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The length of `bytes` without its trailing [`is_c_space`] bytes.
fn trim_end_len(bytes: &[u8]) -> usize {
    bytes.len() - bytes.iter().rev().take_while(|&&b| is_c_space(b)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Vec<String>, SpecialTokens) {
        let texts: Vec<String> = ["a", "<s>", "<|im_start|>", "<|im_end|>", "<u>"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let attrs = [
            attr::NORMAL,
            attr::CONTROL,
            attr::CONTROL,
            attr::CONTROL,
            attr::USER_DEFINED,
        ];
        let st = SpecialTokens::new(&texts, &attrs);
        (texts, st)
    }

    #[test]
    fn splits_at_special_tokens() {
        let (texts, st) = setup();
        let t = "<|im_start|>user<s>x<|im_end|>";
        assert_eq!(
            st.partition(t, &texts, true),
            [
                Fragment::Token(2),
                Fragment::Text(12, 16),
                Fragment::Token(1),
                Fragment::Text(19, 20),
                Fragment::Token(3),
            ]
        );
    }

    #[test]
    fn without_parse_special_only_user_defined() {
        let (texts, st) = setup();
        let t = "x<s>y<u>z";
        assert_eq!(
            st.partition(t, &texts, false),
            [
                Fragment::Text(0, 5),
                Fragment::Token(4),
                Fragment::Text(8, 9)
            ]
        );
    }

    #[test]
    fn strip_attributes_swallow_ascii_whitespace() {
        let texts: Vec<String> = ["<r>", "<l>"].iter().map(|s| s.to_string()).collect();
        let attrs = [attr::CONTROL | attr::RSTRIP, attr::CONTROL | attr::LSTRIP];
        let st = SpecialTokens::new(&texts, &attrs);
        // Vertical tab and form feed count; a no-break space does not.
        let t = "a <r> \t\x0b\x0cb<r>\u{a0}c \n<l>d<r>  ";
        assert_eq!(
            st.partition(t, &texts, true),
            [
                Fragment::Text(0, 2),
                Fragment::Token(0),
                Fragment::Text(9, 10),
                Fragment::Token(0),
                Fragment::Text(13, 16),
                Fragment::Token(1),
                Fragment::Text(21, 22),
                Fragment::Token(0),
            ]
        );
        // Only whitespace before an LSTRIP token: no text fragment left.
        assert_eq!(st.partition(" \n<l>", &texts, true), [Fragment::Token(1)]);
    }
}
