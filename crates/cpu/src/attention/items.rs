//! How one attention call is cut into work items for the pool's threads.

use std::ops::Range;

/// The work items of one attention call: a tile of consecutive query
/// tokens times a run of consecutive query heads that share a KV head.
/// An item reads its KV head's rows once for all its heads, and once for
/// all the tokens of its tile whose windows are ranges of one list of
/// cells (see `super::tile`). Tiles shrink and a head group is split into
/// several runs only when there would otherwise be too few items to keep
/// every thread busy (decode), or when the scratch holds fewer tokens or
/// heads. The split changes which thread computes a query, never its
/// result.
pub(super) struct Items {
    n_tok: usize,
    /// Tokens per tile (the last may be shorter), and tiles.
    tile: usize,
    n_tiles: usize,
    n_head_kv: usize,
    group: usize,
    /// Runs per KV head, and heads per run (the last may be shorter).
    parts: usize,
    per: usize,
}

impl Items {
    /// Items for `n_tok` tokens of `n_head_kv` groups of `group` query
    /// heads, on `threads` threads whose scratch holds the scores of
    /// `room.0` heads of `room.1` tokens.
    pub(super) fn new(
        n_tok: usize,
        n_head_kv: usize,
        group: usize,
        room: (usize, usize),
        threads: usize,
    ) -> Self {
        // Two items per thread at least, so that a thread slowed by other
        // work can be made up for by the others.
        let want = 2 * threads;
        let tiles_wanted = want.div_ceil(n_head_kv.max(1));
        let tile = room.1.min(n_tok.div_ceil(tiles_wanted)).max(1);
        let n_tiles = n_tok.div_ceil(tile);
        let mut parts = group.div_ceil(room.0.max(1));
        while parts < group && n_tiles * n_head_kv * parts < want {
            parts += 1;
        }
        let per = group.div_ceil(parts);
        Items {
            n_tok,
            tile,
            n_tiles,
            n_head_kv,
            group,
            parts: group.div_ceil(per),
            per,
        }
    }

    /// How many items there are.
    pub(super) fn len(&self) -> usize {
        self.n_head_kv * self.n_tiles * self.parts
    }

    /// Item `i`: its tokens and its query heads. Items go KV head by KV
    /// head, so the items one thread takes read the same rows; within a KV
    /// head the tiles go last first, because in a causal prefill the later
    /// tokens have the longer windows and handing out the costliest items
    /// first lets the threads finish together.
    pub(super) fn get(&self, i: usize) -> (Range<usize>, Range<usize>) {
        let part = i % self.parts;
        let rest = i / self.parts;
        let tile = self.n_tiles - 1 - rest % self.n_tiles;
        let kv = rest / self.n_tiles;
        let first = kv * self.group + part * self.per;
        let last = (first + self.per).min((kv + 1) * self.group);
        let from = tile * self.tile;
        (from..(from + self.tile).min(self.n_tok), first..last)
    }
}
