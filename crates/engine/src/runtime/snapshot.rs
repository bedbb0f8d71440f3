//! A sequence's cache as bytes: its tokens and the K/V rows of its cells,
//! exactly as stored, so that a session file restores it without
//! recomputing anything and bit for bit.

use std::ops::Range;

use minfer_graph::{KvFormat, KvInfo, KvKind};

use super::base::Runtime;
use super::types::SeqId;
use crate::error::{EngineError, Result};

/// The shape of a runtime's KV cache: what a snapshot's rows must match to
/// be restored into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Layers (each has a K and a V region).
    pub n_layer: usize,
    /// Values per K or V row.
    pub row_elems: usize,
    /// Cells per region (the context window).
    pub n_ctx: u32,
    /// Storage format of the rows.
    pub format: KvFormat,
}

impl KvLayout {
    /// Bytes of one stored row (K or V of one layer, one cell).
    pub fn row_bytes(&self) -> usize {
        self.format.row_bytes(self.row_elems)
    }

    /// Bytes of one position: K and V rows of every layer.
    pub fn position_bytes(&self) -> usize {
        self.n_layer * 2 * self.row_bytes()
    }
}

/// A sequence's tokens and cache rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqSnapshot {
    /// The layout the rows are in.
    pub layout: KvLayout,
    /// The tokens at positions `0..`.
    pub tokens: Vec<u32>,
    /// For each position in order, for each layer, its K row then its V
    /// row, as stored ([`KvLayout::position_bytes`] per position).
    pub rows: Vec<u8>,
}

impl Runtime {
    /// The shape of this runtime's KV cache.
    pub fn kv_layout(&self) -> KvLayout {
        KvLayout {
            n_layer: self.model.hparams.n_layer,
            row_elems: self.model.hparams.kv_width(),
            n_ctx: self.cfg.n_ctx,
            format: self.cfg.kv_format,
        }
    }

    /// Copies out the tokens of `seq` and the K/V rows of every cell it
    /// holds.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// when a position has no cell or no region (a broken invariant).
    pub fn export_sequence(&self, seq: SeqId) -> Result<SeqSnapshot> {
        let tokens = self.history(seq)?.to_vec();
        let rows = self.export_rows(seq.slot, 0..tokens.len())?;
        Ok(SeqSnapshot {
            layout: self.kv_layout(),
            tokens,
            rows,
        })
    }

    /// The K/V rows of positions `range` of the sequence in `slot` (live
    /// or idle), position by position as in [`SeqSnapshot::rows`]: what
    /// the prompt cache copies out of a released sequence, only the
    /// positions its tiers do not hold yet.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] when a position has no cell or no
    /// region (a broken invariant).
    pub(crate) fn export_rows(&self, slot: u32, range: Range<usize>) -> Result<Vec<u8>> {
        let layout = self.kv_layout();
        let mut cells = Vec::with_capacity(range.len());
        for pos in range.clone() {
            let cell = self.cells.cell_of(slot, pos as i32).ok_or_else(|| {
                EngineError::InvalidArgument(format!(
                    "sequence {slot} has no cell for position {pos}"
                ))
            })? as usize;
            cells.push(cell);
        }
        // Each region read once (one device read for a GPU region), then
        // the rows interleaved position by position, layer by layer.
        let mut per_region = Vec::with_capacity(layout.n_layer * 2);
        // An empty range has no rows, and no graph may have run yet.
        let layers = if cells.is_empty() { 0 } else { layout.n_layer };
        for layer in 0..layers {
            for kind in [KvKind::K, KvKind::V] {
                if self.cache.kv_info(layer, kind).is_none() {
                    return Err(EngineError::InvalidArgument(format!(
                        "no KV region for layer {layer}"
                    )));
                }
                let mut r = Vec::with_capacity(cells.len() * layout.row_bytes());
                let backend = self.cache.kv_backend(layer, kind)?;
                backend.kv_read_raw_rows(layer, kind, &cells, &mut r)?;
                per_region.push(r);
            }
        }
        let row = layout.row_bytes();
        let mut rows = Vec::with_capacity(cells.len() * layout.position_bytes());
        for pos in 0..cells.len() {
            for r in &per_region {
                rows.extend_from_slice(&r[pos * row..(pos + 1) * row]);
            }
        }
        Ok(rows)
    }

    /// Fills `seq`, which must be empty, with a snapshot: fresh cells get
    /// its rows and the sequence its tokens. Nothing is computed.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// when `seq` is not empty or the snapshot's layout or size does not
    /// match this runtime; [`EngineError::CacheFull`] when there are not
    /// enough free cells. Nothing changes on error.
    pub fn import_sequence(&mut self, seq: SeqId, snap: &SeqSnapshot) -> Result<()> {
        if self.n_past(seq)? != 0 {
            return Err(EngineError::InvalidArgument(format!(
                "{seq} is not empty; a snapshot restores into an empty sequence"
            )));
        }
        let layout = self.kv_layout();
        if snap.layout != layout {
            return Err(EngineError::InvalidArgument(format!(
                "the snapshot's KV layout {:?} does not match this runtime's {layout:?}",
                snap.layout
            )));
        }
        let n = snap.tokens.len();
        if n > layout.n_ctx as usize || snap.rows.len() != n * layout.position_bytes() {
            return Err(EngineError::InvalidArgument(format!(
                "a snapshot of {n} tokens with {} bytes of rows does not fit this runtime",
                snap.rows.len()
            )));
        }
        if let Some(&token) = snap.tokens.iter().find(|&&t| t as usize >= self.n_vocab()) {
            return Err(EngineError::TokenOutOfRange {
                token,
                n_vocab: self.n_vocab(),
            });
        }
        self.append_rows(seq, &snap.tokens, &snap.rows)
    }

    /// Appends `tokens` to `seq` at its next positions, with their K/V rows
    /// (`rows`, in [`SeqSnapshot::rows`]' layout for this runtime) written
    /// into fresh cells: the shared core of a session file's restore and a
    /// prompt-cache tier's. Nothing is computed.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// when `rows` is not `tokens`' size; [`EngineError::ContextFull`] past
    /// `n_ctx`; [`EngineError::CacheFull`] when there are not enough free
    /// cells even after evicting idle sequences. Nothing changes on error.
    pub(crate) fn append_rows(&mut self, seq: SeqId, tokens: &[u32], rows: &[u8]) -> Result<()> {
        let start = self.n_past(seq)? as usize;
        let layout = self.kv_layout();
        let n = tokens.len();
        if rows.len() != n * layout.position_bytes() {
            return Err(EngineError::InvalidArgument(format!(
                "{n} tokens with {} bytes of rows do not match this runtime's layout",
                rows.len()
            )));
        }
        if start + n > layout.n_ctx as usize {
            return Err(EngineError::ContextFull {
                n_ctx: layout.n_ctx,
            });
        }
        self.make_room(n);
        let free = self.cells.n_ctx() - self.cells.used();
        if n > free {
            return Err(EngineError::CacheFull { needed: n, free });
        }
        for layer in 0..layout.n_layer {
            for kind in [KvKind::K, KvKind::V] {
                let want = KvInfo::new(layout.format, layout.row_elems, layout.n_ctx as usize);
                let device = self.offload.layer_device(layer);
                self.cache.ensure_kv_region_on(device, layer, kind, want)?;
            }
        }
        if let Err(e) = self.write_rows(seq.slot, start, rows) {
            // Positions from `start` on were never part of the sequence.
            let _ = self.cells.remove(seq.slot, start as i32);
            return Err(e);
        }
        self.tick += 1;
        let tick = self.tick;
        let s = self.state_mut(seq)?;
        s.history.extend_from_slice(tokens);
        s.last_used = tick;
        Ok(())
    }

    /// Takes a cell for each position from `start` on and writes its rows.
    fn write_rows(&mut self, slot: u32, start: usize, rows: &[u8]) -> Result<()> {
        let layout = self.kv_layout();
        let row = layout.row_bytes();
        for (i, position) in rows.chunks_exact(layout.position_bytes()).enumerate() {
            let cell = self.cells.allocate(slot, (start + i) as i32)? as usize;
            for (r, bytes) in position.chunks_exact(row).enumerate() {
                let (layer, kind) = (r / 2, if r % 2 == 0 { KvKind::K } else { KvKind::V });
                if self.cache.kv_info(layer, kind).is_some() {
                    let backend = self.cache.kv_backend_mut(layer, kind)?;
                    backend.kv_write_raw(layer, kind, cell, bytes)?;
                }
            }
        }
        Ok(())
    }
}
