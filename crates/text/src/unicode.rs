//! Codepoint classes used by the pre-tokenizers.
//!
//! llama.cpp classifies codepoints by Unicode general category (letter,
//! number, mark, punctuation) plus the `White_Space` property. The ranges
//! come from `regex-syntax`'s Unicode tables and are expanded once into a
//! flat table, because the splitters look up every codepoint of every
//! prompt.
//!
//! llama.cpp's tables predate Unicode 16, so characters added there are
//! unassigned (no class) for it; [`UNICODE_16_ADDITIONS`] clears them here
//! so that text using them splits the same way. A newer `regex-syntax`
//! with later Unicode data would need the same treatment for its additions
//! (the real-model tests compare against llama.cpp's output).

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

/// `\p{L}`.
pub(crate) const LETTER: u8 = 1 << 0;
/// `\p{N}`.
pub(crate) const NUMBER: u8 = 1 << 1;
/// The `White_Space` property (what llama.cpp calls whitespace).
pub(crate) const WHITESPACE: u8 = 1 << 2;
/// `\p{M}`.
pub(crate) const MARK: u8 = 1 << 3;
/// `\p{P}`.
pub(crate) const PUNCT: u8 = 1 << 4;

const N_CODEPOINTS: usize = 0x11_0000;

/// Codepoints assigned in Unicode 16.0, inclusive ranges.
const UNICODE_16_ADDITIONS: &[(u32, u32)] = &[
    (0x00897, 0x00897),
    (0x01B4E, 0x01B4F),
    (0x01B7F, 0x01B7F),
    (0x01C89, 0x01C8A),
    (0x0A7CB, 0x0A7CD),
    (0x0A7DA, 0x0A7DC),
    (0x105C0, 0x105F3),
    (0x10D40, 0x10D65),
    (0x10D69, 0x10D85),
    (0x10EC2, 0x10EC4),
    (0x10EFC, 0x10EFC),
    (0x11380, 0x11389),
    (0x1138B, 0x1138B),
    (0x1138E, 0x1138E),
    (0x11390, 0x113B5),
    (0x113B7, 0x113C0),
    (0x113C2, 0x113C2),
    (0x113C5, 0x113C5),
    (0x113C7, 0x113CA),
    (0x113CC, 0x113D5),
    (0x113D7, 0x113D8),
    (0x113E1, 0x113E2),
    (0x116D0, 0x116E3),
    (0x11BC0, 0x11BE1),
    (0x11BF0, 0x11BF9),
    (0x11F5A, 0x11F5A),
    (0x13460, 0x143FA),
    (0x16100, 0x16139),
    (0x16D40, 0x16D79),
    (0x18CFF, 0x18CFF),
    (0x1CCF0, 0x1CCF9),
    (0x1E5D0, 0x1E5FA),
    (0x1E5FF, 0x1E5FF),
];

fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u8; N_CODEPOINTS];
        for (pattern, flag) in [
            (r"\p{L}", LETTER),
            (r"\p{N}", NUMBER),
            (r"\p{White_Space}", WHITESPACE),
            (r"\p{M}", MARK),
            (r"\p{P}", PUNCT),
        ] {
            for (lo, hi) in class_ranges(pattern) {
                for slot in &mut t[lo as usize..=hi as usize] {
                    *slot |= flag;
                }
            }
        }
        for &(lo, hi) in UNICODE_16_ADDITIONS {
            t[lo as usize..=hi as usize].fill(0);
        }
        t
    })
}

/// The inclusive codepoint ranges of a Unicode class pattern. The patterns
/// are constants of this module, so a parse failure is a programming error
/// caught by the unit tests; it yields an empty class rather than a panic.
fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Vec::new();
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => cls
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        _ => Vec::new(),
    }
}

/// The class flags of one codepoint.
#[inline]
pub(crate) fn flags(c: char) -> u8 {
    table()[c as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(flags('a'), LETTER);
        assert_eq!(flags('中'), LETTER);
        assert_eq!(flags('7'), NUMBER);
        assert_eq!(flags('½'), NUMBER);
        assert_eq!(flags(' '), WHITESPACE);
        assert_eq!(flags('\u{3000}'), WHITESPACE);
        assert_eq!(flags('\u{85}'), WHITESPACE);
        assert_eq!(flags('\u{301}'), MARK);
        assert_eq!(flags('!'), PUNCT);
        assert_eq!(flags('$'), 0);
        assert_eq!(flags('🚀'), 0);
        // Unicode 16 letters and digits stay unclassified, as in llama.cpp.
        assert_eq!(flags('\u{13926}'), 0);
        assert_eq!(flags('\u{1E5F1}'), 0);
    }
}
