//! The keys of the prompt-cache tiers: a hash chain over fixed-size blocks
//! of a token prefix.
//!
//! Block `i` holds positions `i·B..(i+1)·B` ([`BLOCK_TOKENS`] = B). Its key
//! is `sha256(key of block i−1, tokens of block i)`, block 0's parent being
//! [`BlockKey::ROOT`]. A key therefore names the whole prefix up to the end
//! of its block, not just its own tokens: two prompts share block `i`'s key
//! exactly when their first `(i+1)·B` tokens are equal, which is what makes
//! the block's K/V rows (functions of every earlier token) reusable.

use sha2::{Digest, Sha256};

/// Tokens per block. Only whole blocks are kept: a prefix is restored in
/// steps of this many positions.
pub const BLOCK_TOKENS: usize = 256;

/// What a chain hash starts with, so that these keys cannot collide with
/// other sha256 uses of the same bytes.
const DOMAIN: &[u8] = b"minfer prompt-cache block v1\0";

/// The key of one block: the hash of the token prefix it ends.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey(pub [u8; 32]);

impl BlockKey {
    /// The parent of block 0 (no tokens before it).
    pub const ROOT: BlockKey = BlockKey([0; 32]);

    /// The key of the block of `tokens` that follows the block keyed
    /// `self`.
    pub fn child(&self, tokens: &[u32]) -> BlockKey {
        let mut h = Sha256::new();
        h.update(DOMAIN);
        h.update(self.0);
        h.update((tokens.len() as u64).to_le_bytes());
        for t in tokens {
            h.update(t.to_le_bytes());
        }
        BlockKey(h.finalize().into())
    }

    /// Lower-case hex, 64 characters (the disk tier's file names).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses [`hex`](BlockKey::hex)'s form; `None` for anything else.
    pub fn from_hex(s: &str) -> Option<BlockKey> {
        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(BlockKey(out))
    }
}

impl std::fmt::Debug for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockKey({})", &self.hex()[..12])
    }
}

/// The keys of the whole blocks of `tokens` (a trailing partial block has
/// none), block 0 first.
pub fn chain(tokens: &[u32]) -> Vec<BlockKey> {
    let mut keys = Vec::with_capacity(tokens.len() / BLOCK_TOKENS);
    let mut parent = BlockKey::ROOT;
    for block in tokens.chunks_exact(BLOCK_TOKENS) {
        parent = parent.child(block);
        keys.push(parent);
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize, seed: u32) -> Vec<u32> {
        (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ seed)
            .collect()
    }

    #[test]
    fn only_whole_blocks_have_keys() {
        assert!(chain(&ids(BLOCK_TOKENS - 1, 1)).is_empty());
        assert_eq!(chain(&ids(BLOCK_TOKENS, 1)).len(), 1);
        assert_eq!(chain(&ids(3 * BLOCK_TOKENS + 7, 1)).len(), 3);
    }

    #[test]
    fn a_key_names_the_whole_prefix() {
        let a = ids(3 * BLOCK_TOKENS, 1);
        let mut b = a.clone();
        // Same tokens up to the middle of block 1, then different.
        b[BLOCK_TOKENS + 10] ^= 1;
        let (ka, kb) = (chain(&a), chain(&b));
        assert_eq!(ka[0], kb[0], "block 0 is the same prefix");
        assert_ne!(ka[1], kb[1], "block 1 differs");
        assert_ne!(
            ka[2], kb[2],
            "block 2's tokens are equal, its prefix is not"
        );
        // A prompt that extends another shares all of its keys.
        let mut longer = a.clone();
        longer.extend(ids(BLOCK_TOKENS, 9));
        assert_eq!(chain(&longer)[..3], ka[..]);
    }

    #[test]
    fn keys_are_stable_and_chained() {
        let a = ids(2 * BLOCK_TOKENS, 5);
        let k = chain(&a);
        assert_eq!(k[0], BlockKey::ROOT.child(&a[..BLOCK_TOKENS]));
        assert_eq!(k[1], k[0].child(&a[BLOCK_TOKENS..]));
        // The same input in the same build gives the same bytes (keys name
        // files that outlive the process).
        assert_eq!(chain(&a), k);
        // Block 0 of all-zero tokens: pinned so that a change of the hash
        // (which would orphan every file of a disk tier) is noticed.
        // (The value is sha256 of the domain tag, 32 zero bytes, 256 as a
        // u64 and 256 zero u32s, all little-endian.)
        let zeros = BlockKey::ROOT.child(&[0; BLOCK_TOKENS]);
        assert_eq!(
            zeros.hex(),
            "813dbd88ad0ed46e7b8572cfd9d8d7d1d49fe8fbb5f71c484b41b60a873ffbcb"
        );
    }

    #[test]
    fn hex_round_trips_and_rejects_other_names() {
        let k = chain(&ids(BLOCK_TOKENS, 3))[0];
        assert_eq!(BlockKey::from_hex(&k.hex()), Some(k));
        assert_eq!(BlockKey::from_hex("abc"), None);
        assert_eq!(BlockKey::from_hex(&"g".repeat(64)), None);
    }
}
