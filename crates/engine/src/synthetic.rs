//! Deterministic pseudo-random token ids for benchmarks and examples: the
//! same ids on every run, so timings compare, and ids spread over the whole
//! vocabulary, as llama-bench feeds random tokens.

/// An endless stream of token ids below `n_vocab` from an xorshift64
/// generator.
#[derive(Debug, Clone)]
pub struct SyntheticTokens {
    state: u64,
    n_vocab: u64,
}

impl SyntheticTokens {
    /// The stream seeded with `seed` (made odd, since xorshift never
    /// leaves zero) over `n_vocab` ids (at least one).
    pub fn new(seed: u64, n_vocab: usize) -> Self {
        Self {
            state: seed | 1,
            n_vocab: n_vocab.max(1) as u64,
        }
    }
}

impl Iterator for SyntheticTokens {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let s = &mut self.state;
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        Some((*s % self.n_vocab) as u32)
    }
}
