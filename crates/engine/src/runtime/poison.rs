//! Testing aids that overwrite cache cells, to prove that a sequence never
//! reads cells that are not its own.

use minfer_graph::KvKind;

use super::base::Runtime;
use super::types::SeqId;
use crate::error::Result;

impl Runtime {
    /// Writes `value` into every K and V row of every layer that `seq`'s
    /// window does not name: the cells of other sequences, free cells and
    /// cells past its cursor. A testing aid for the isolation invariant
    /// (a sequence's logits must not change); it destroys the other
    /// sequences' caches.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`](crate::EngineError::UnknownSequence);
    /// graph errors from the regions.
    pub fn poison_cells_outside(&mut self, seq: SeqId, value: f32) -> Result<()> {
        let n = self.history(seq)?.len();
        let mut mine = vec![false; self.cells.n_ctx()];
        let mut window = Vec::new();
        if n > 0 {
            self.cells.window(seq.slot, n as i32 - 1, &mut window)?;
        }
        for c in window {
            mine[c as usize] = true;
        }
        let others: Vec<usize> = (0..mine.len()).filter(|&c| !mine[c]).collect();
        self.poison(&others, value)
    }

    /// Writes `value` into every K and V row of every free cell (one no
    /// sequence, live or idle, holds). A testing aid for rollback: cells
    /// given up must never be read again, and poisoning them proves it.
    ///
    /// # Errors
    /// Graph errors from the regions.
    pub fn poison_free_cells(&mut self, value: f32) -> Result<()> {
        let free: Vec<usize> = (0..self.cells.n_ctx())
            .filter(|&c| self.cells.cell_seqs(c) == 0)
            .collect();
        self.poison(&free, value)
    }

    /// Writes `value` into every K and V row of `cells`, in every layer
    /// whose regions exist.
    fn poison(&mut self, cells: &[usize], value: f32) -> Result<()> {
        for layer in 0..self.model.hparams.n_layer {
            for kind in [KvKind::K, KvKind::V] {
                let Some((_, info)) = self.cache.kv_info(layer, kind) else {
                    continue;
                };
                let row = vec![value; info.row_elems];
                let backend = self.cache.kv_backend_mut(layer, kind)?;
                for &cell in cells {
                    backend.kv_store_row(layer, kind, cell, &row)?;
                }
            }
        }
        Ok(())
    }
}
