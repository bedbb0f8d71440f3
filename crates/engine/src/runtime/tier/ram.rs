//! The host-RAM tier: blocks of K/V rows held in memory under a byte
//! budget, the least recently used leaf going first.

use std::collections::HashMap;
use std::sync::Arc;

use super::chain::BlockKey;

/// One block of a prefix: its tokens and the K/V rows of their positions,
/// exactly as the cells stored them.
#[derive(Debug)]
pub(crate) struct Block {
    /// The key of the block before (the chain's [`BlockKey::ROOT`] for
    /// block 0).
    pub parent: BlockKey,
    /// The block's tokens (a whole block).
    pub tokens: Box<[u32]>,
    /// For each position in order, for each layer, its K row then its V
    /// row (the layout of [`SeqSnapshot`](crate::SeqSnapshot)'s rows).
    pub rows: Box<[u8]>,
}

impl Block {
    /// Bytes the block holds (what the budget counts).
    pub fn bytes(&self) -> usize {
        self.rows.len() + self.tokens.len() * 4
    }
}

struct Entry {
    block: Arc<Block>,
    last_used: u64,
    /// Blocks in the tier whose parent this is: while any is kept, this
    /// one is not evicted (a child is useless without its prefix).
    children: u32,
}

/// Blocks by key, bounded by a byte budget.
pub(crate) struct RamTier {
    budget: usize,
    held: usize,
    tick: u64,
    map: HashMap<BlockKey, Entry>,
    evicted: u64,
}

impl RamTier {
    /// An empty tier that holds at most `budget` bytes (0 holds nothing).
    pub fn new(budget: usize) -> RamTier {
        RamTier {
            budget,
            held: 0,
            tick: 0,
            map: HashMap::new(),
            evicted: 0,
        }
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Blocks evicted for room so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Whether the tier holds `key`.
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.map.contains_key(key)
    }

    /// The block of `key`, marked as just used.
    pub fn get(&mut self, key: &BlockKey) -> Option<Arc<Block>> {
        self.tick += 1;
        let e = self.map.get_mut(key)?;
        e.last_used = self.tick;
        Some(Arc::clone(&e.block))
    }

    /// Keeps `block` under `key`, evicting least recently used leaves for
    /// room. Returns whether it was kept: not when it is larger than the
    /// budget, when its parent is not held (the tier holds whole chains
    /// from the first block, so it never evicts a prefix for a block that
    /// cannot be reached without it), or when the only blocks left to
    /// evict are its own ancestors. A key already held is only marked as
    /// used.
    pub fn insert(&mut self, key: BlockKey, block: Arc<Block>) -> bool {
        if self.get(&key).is_some() {
            return true;
        }
        let size = block.bytes();
        if size > self.budget || (block.parent != BlockKey::ROOT && !self.contains(&block.parent)) {
            return false;
        }
        while self.held + size > self.budget {
            if !self.evict_one(&block.parent) {
                return false;
            }
        }
        if let Some(p) = self.map.get_mut(&block.parent) {
            p.children += 1;
        }
        self.held += size;
        self.tick += 1;
        self.map.insert(
            key,
            Entry {
                block,
                last_used: self.tick,
                children: 0,
            },
        );
        true
    }

    /// Evicts the least recently used block that no kept block depends on,
    /// other than `keep`; returns whether one was found.
    fn evict_one(&mut self, keep: &BlockKey) -> bool {
        let victim = self
            .map
            .iter()
            .filter(|(k, e)| e.children == 0 && *k != keep)
            .min_by_key(|(k, e)| (e.last_used, **k))
            .map(|(k, _)| *k);
        let Some(victim) = victim else {
            return false;
        };
        if let Some(e) = self.map.remove(&victim) {
            self.held -= e.block.bytes();
            self.evicted += 1;
            if let Some(p) = self.map.get_mut(&e.block.parent) {
                p.children -= 1;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(parent: BlockKey, fill: u8) -> (BlockKey, Arc<Block>) {
        let tokens: Box<[u32]> = vec![u32::from(fill); 4].into();
        let key = parent.child(&tokens);
        let b = Block {
            parent,
            tokens,
            rows: vec![fill; 84].into(),
        };
        (key, Arc::new(b))
    }

    #[test]
    fn the_budget_bounds_the_bytes_and_lru_leaves_go_first() {
        // Each block is 84 + 16 = 100 bytes; room for three.
        let mut t = RamTier::new(300);
        let (a, ba) = block(BlockKey::ROOT, 1);
        let (b, bb) = block(a, 2);
        let (x, bx) = block(BlockKey::ROOT, 3);
        assert!(t.insert(a, ba));
        assert!(t.insert(b, bb));
        assert!(t.insert(x, bx));
        assert_eq!((t.len(), t.held()), (3, 300));
        // `a` is the oldest but `b` depends on it: the oldest leaf, `b`,
        // goes (then `x` would, before `a`).
        let (y, by) = block(BlockKey::ROOT, 4);
        assert!(t.insert(y, by));
        assert!(t.contains(&a) && !t.contains(&b) && t.contains(&x));
        assert!(t.held() <= t.budget());
        // Touching `x` makes `a` (a leaf again) the oldest.
        t.get(&x);
        let (z, bz) = block(BlockKey::ROOT, 5);
        assert!(t.insert(z, bz));
        assert!(!t.contains(&a) && t.contains(&x) && t.contains(&y));
        assert_eq!(t.evicted(), 2);
    }

    #[test]
    fn a_chain_never_evicts_its_own_parent_and_oversized_blocks_are_refused() {
        let mut t = RamTier::new(200);
        let (a, ba) = block(BlockKey::ROOT, 1);
        let (b, bb) = block(a, 2);
        let (c, bc) = block(b, 3);
        assert!(t.insert(a, ba));
        assert!(t.insert(b, bb));
        // Full of `c`'s ancestors: `c` is not kept, and they stay.
        assert!(!t.insert(c, bc));
        assert!(t.contains(&a) && t.contains(&b) && !t.contains(&c));
        // An orphan (its parent not held) evicts nothing and is not kept.
        let (d, bd) = block(c, 4);
        assert!(!t.insert(d, bd));
        assert!(t.contains(&a) && t.contains(&b) && t.evicted() == 0);
        let big = Block {
            parent: BlockKey::ROOT,
            tokens: vec![0; 4].into(),
            rows: vec![0; 500].into(),
        };
        assert!(!t.insert(BlockKey([7; 32]), Arc::new(big)));
        let mut off = RamTier::new(0);
        let (k, bk) = block(BlockKey::ROOT, 9);
        assert!(!off.insert(k, bk));
        assert_eq!(off.held(), 0);
    }
}
