//! The shape every interleaved kernel shares: sixteen rows per group,
//! up to four tokens per tile.

/// Rows per interleaved group: one 512-bit register of i32 lanes.
pub const GROUP: usize = 16;

/// Tokens per tile: each unpacked block serves this many tokens.
pub const TILE: usize = 4;

/// One tile's outputs: per token, the sixteen rows of the group.
pub type Tile = [[f32; GROUP]; TILE];
