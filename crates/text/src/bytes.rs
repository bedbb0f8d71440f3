//! GPT-2's reversible byte ↔ printable-character mapping.
//!
//! Byte-level BPE vocabularies never contain raw bytes: each byte is
//! replaced by a printable codepoint (bytes that are already printable
//! Latin-1 map to themselves, the others to U+0100 and up, in byte order).
//! Tokens are strings over that alphabet.

use std::sync::OnceLock;

/// Codepoints at or above this are never part of the alphabet: the
/// replacements for the 68 non-printable bytes end at U+0143.
const ALPHABET_END: usize = 0x144;

struct Maps {
    /// Byte → its character.
    to_char: [char; 256],
    /// Codepoint (below [`ALPHABET_END`]) → the byte it stands for.
    from_cp: [Option<u8>; ALPHABET_END],
}

fn is_printable(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

fn maps() -> &'static Maps {
    static MAPS: OnceLock<Maps> = OnceLock::new();
    MAPS.get_or_init(|| {
        let mut to_char = ['\0'; 256];
        let mut from_cp = [None; ALPHABET_END];
        let mut next = 256u32;
        for b in 0..=255u8 {
            let cp = if is_printable(b) {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            // Every `cp` is below ALPHABET_END, so both conversions hold.
            to_char[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
            from_cp[cp as usize] = Some(b);
        }
        Maps { to_char, from_cp }
    })
}

/// The printable character that stands for `byte`.
#[inline]
pub(crate) fn byte_to_char(byte: u8) -> char {
    maps().to_char[byte as usize]
}

/// The byte a printable character stands for, if it is one of the 256.
#[inline]
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    maps().from_cp.get(c as usize).copied().flatten()
}

/// Maps every byte of `text` to its printable character.
pub(crate) fn encode_bytes(text: &[u8], out: &mut String) {
    for &b in text {
        out.push(byte_to_char(b));
    }
}

/// Turns a vocabulary string back into bytes, as llama.cpp does: a
/// character outside the 256-character alphabet is rendered as an
/// `[UNK_BYTE_0x…]` marker instead of failing.
pub(crate) fn decode_text(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_all_bytes() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b), "byte {b}");
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('中'), None);
    }

    #[test]
    fn decode_unknown_char_is_marked() {
        assert_eq!(decode_text("Ġhi"), b" hi");
        assert_eq!(
            decode_text("中"),
            b"[UNK_BYTE_0xe4b8ad\xe4\xb8\xad]".to_vec()
        );
    }
}
