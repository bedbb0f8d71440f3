//! A small, fast, non-cryptographic hasher for the vocabulary maps.
//!
//! Building a tokenizer hashes a few hundred thousand short strings and
//! integer pairs; the standard SipHash made that the bulk of load time. The
//! keys come from the model file, not from untrusted network input, so
//! resistance to hash flooding is not needed here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash used by rustc (`FxHasher`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the well-mixed bits at the top, while the
        // table picks buckets with the low bits: rotate them down.
        self.hash.rotate_left(26)
    }
}

/// A `HashMap` using [`FxHasher`].
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinguishes_keys() {
        let mut m: FxHashMap<String, u32> = FxHashMap::default();
        for i in 0..10_000u32 {
            m.insert(format!("k{i}"), i);
        }
        assert!((0..10_000u32).all(|i| m[&format!("k{i}")] == i));
        let mut p: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        p.insert((1, 2), 3);
        assert_eq!(p.get(&(2, 1)), None);
    }
}
