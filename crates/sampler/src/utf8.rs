//! Regrouping a byte stream into whole UTF-8 characters.
//!
//! Byte-level BPE tokens often end in the middle of a multi-byte character
//! (an emoji can span three tokens). Writing such a fragment to a terminal
//! shows garbage, so output goes through [`Utf8Stream`], which keeps an
//! incomplete trailing sequence until the bytes that finish it arrive.

/// Turns pushed bytes into text, holding back an unfinished character.
///
/// Invalid bytes become U+FFFD exactly as [`String::from_utf8_lossy`]
/// would render the whole stream at once, whatever the chunking.
#[derive(Debug, Clone, Default)]
pub struct Utf8Stream {
    /// The start of an unfinished character (at most 3 bytes).
    pending: Vec<u8>,
    /// `pending` followed by the newly pushed bytes.
    buf: Vec<u8>,
    out: String,
}

impl Utf8Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `bytes` and returns the text that is complete now.
    pub fn push(&mut self, bytes: &[u8]) -> &str {
        self.buf.clear();
        self.buf.extend_from_slice(&self.pending);
        self.buf.extend_from_slice(bytes);
        self.pending.clear();
        self.out.clear();

        let mut rest = &self.buf[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.out.push_str(s);
                    break;
                }
                Err(e) => {
                    let (valid, tail) = rest.split_at(e.valid_up_to());
                    if let Ok(s) = std::str::from_utf8(valid) {
                        self.out.push_str(s);
                    }
                    match e.error_len() {
                        Some(bad) => {
                            self.out.push(char::REPLACEMENT_CHARACTER);
                            rest = &tail[bad..];
                        }
                        None => {
                            // A sequence cut short by the end of the input:
                            // later bytes may complete it.
                            self.pending.extend_from_slice(tail);
                            break;
                        }
                    }
                }
            }
        }
        &self.out
    }

    /// Ends the stream: an unfinished character becomes U+FFFD.
    pub fn finish(&mut self) -> &str {
        self.out.clear();
        if !self.pending.is_empty() {
            self.pending.clear();
            self.out.push(char::REPLACEMENT_CHARACTER);
        }
        &self.out
    }

    /// Whether bytes of an unfinished character are waiting.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn run(chunks: &[&[u8]]) -> String {
        let mut s = Utf8Stream::new();
        let mut out = String::new();
        for c in chunks {
            out.push_str(s.push(c));
        }
        out.push_str(s.finish());
        out
    }

    #[test]
    fn ascii_passes_straight_through() {
        let mut s = Utf8Stream::new();
        assert_eq!(s.push(b"abc"), "abc");
        assert!(!s.has_pending());
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn a_character_split_at_every_point_comes_out_whole() {
        let text = "a😀é中b";
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let got = run(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                assert_eq!(got, text, "cuts at {i}, {j}");
            }
        }
        let mut s = Utf8Stream::new();
        let emoji = "😀".as_bytes();
        assert_eq!(s.push(&emoji[..2]), "");
        assert!(s.has_pending());
        assert_eq!(s.push(&emoji[2..]), "😀");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(run(&[b"a\xffb"]), "a\u{FFFD}b");
        // A lead byte followed by ASCII: the lead byte alone is invalid.
        assert_eq!(run(&[b"\xe4", b"x"]), "\u{FFFD}x");
        // A truncated character at the very end.
        assert_eq!(run(&[b"ok\xf0\x9f"]), "ok\u{FFFD}");
    }

    proptest! {
        #[test]
        fn chunking_never_changes_the_text(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            let chunks: Vec<&[u8]> = points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            prop_assert_eq!(run(&chunks), String::from_utf8_lossy(&bytes).into_owned());
        }

        #[test]
        fn valid_text_split_anywhere_is_unchanged(
            text in "\\PC{0,20}",
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            let chunks: Vec<&[u8]> = points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            prop_assert_eq!(run(&chunks), text);
        }
    }
}
