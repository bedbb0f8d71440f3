//! The prompt cache below the KV cells: blocks of released sequences'
//! K/V rows kept in host RAM ([`ram`]) and on disk ([`disk`]), keyed by a
//! hash chain over the prompt's tokens ([`chain`]).
//!
//! When a sequence is [released](Runtime::release), its whole blocks that
//! the tiers do not hold yet are copied out of the cells (only those
//! positions, so the cost follows the new tokens). When
//! [`new_sequence_for`](Runtime::new_sequence_for) has shared what the
//! cells hold, it walks the prompt's chain on from there, in RAM, then on
//! disk, and writes the rows of the blocks it finds into fresh cells.
//! Rows are restored as the exact bytes the cells held, so a restored
//! prompt answers with the bits a recomputation gives.

mod cells;
mod chain;
mod disk;
mod ram;
mod writer;

use std::sync::Arc;

use minfer_models::Model;

use crate::config::EngineConfig;
use crate::error::{EngineError, Result};
use chain::BlockKey;
pub use chain::BLOCK_TOKENS;
use disk::{DiskTier, TierIdentity};
use ram::{Block, RamTier};

/// What the prompt cache holds and has saved, for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromptCacheStats {
    /// Tokens per block.
    pub block_tokens: usize,
    /// The RAM tier's budget in bytes (0: off).
    pub ram_budget: usize,
    /// Bytes the RAM tier holds.
    pub ram_bytes: usize,
    /// Blocks the RAM tier holds.
    pub ram_blocks: usize,
    /// Blocks the RAM tier dropped for room.
    pub ram_evicted_blocks: u64,
    /// Block files in the disk tier's folder (found at start or written
    /// since); 0 without a disk tier.
    pub disk_blocks: usize,
    /// Their bytes.
    pub disk_bytes: u64,
    /// Block files written, and those that could not be.
    pub disk_written: u64,
    /// Block files that could not be written (logged once).
    pub disk_write_failures: u64,
    /// Block files refused (corrupt, another model or layout) and removed.
    pub disk_refused: u64,
    /// Prompt tokens restored from RAM instead of computed.
    pub restored_tokens_ram: u64,
    /// Prompt tokens restored from disk instead of computed.
    pub restored_tokens_disk: u64,
    /// Blocks copied out of released sequences.
    pub saved_blocks: u64,
}

/// The tiers of one runtime.
pub(crate) struct PromptTier {
    ram: RamTier,
    disk: Option<DiskTier>,
    restored_ram: u64,
    restored_disk: u64,
    saved: u64,
}

impl PromptTier {
    /// The tiers `cfg` asks for, `None` when it asks for none. With a
    /// cache folder, the model's identity is computed here (every weight
    /// is read once).
    ///
    /// # Errors
    /// [`EngineError::PromptCache`] when the folder cannot be opened.
    pub fn open(
        cfg: &EngineConfig,
        model: &Model,
        position_bytes: usize,
        compute: String,
    ) -> Result<Option<PromptTier>> {
        if cfg.cache_ram == 0 && cfg.cache_dir.is_none() {
            return Ok(None);
        }
        let disk = match cfg.cache_dir {
            None => None,
            Some(dir) => {
                let t0 = std::time::Instant::now();
                let name = model
                    .file()
                    .metadata()
                    .get_str("general.name")
                    .ok()
                    .flatten()
                    .unwrap_or_default()
                    .to_string();
                let id = TierIdentity {
                    model: crate::identity::weights_identity(model, name),
                    n_layer: model.hparams.n_layer,
                    row_elems: model.hparams.kv_width(),
                    kv_format: format!("{:?}", cfg.kv_format).to_lowercase(),
                    position_bytes,
                    compute,
                    block_tokens: BLOCK_TOKENS,
                };
                tracing::info!(
                    ms = t0.elapsed().as_secs_f64() * 1e3,
                    "hashed the weights to name the prompt cache's folder"
                );
                let tier =
                    DiskTier::open(dir.path(), id).map_err(|e| EngineError::PromptCache {
                        path: dir.path().to_path_buf(),
                        msg: e.to_string(),
                    })?;
                Some(tier)
            }
        };
        Ok(Some(PromptTier {
            ram: RamTier::new(cfg.cache_ram),
            disk,
            restored_ram: 0,
            restored_disk: 0,
            saved: 0,
        }))
    }

    /// Keeps a block copied out of the cells: in RAM when it fits, and
    /// written through to disk when not there yet. Returns whether RAM
    /// holds it.
    fn keep(&mut self, key: BlockKey, block: Arc<Block>) -> bool {
        let in_ram = self.ram.budget() > 0 && self.ram.insert(key, Arc::clone(&block));
        if let Some(d) = self.disk.as_mut().filter(|d| !d.has(&key)) {
            d.store(key, block);
        }
        in_ram
    }

    /// The block of `key` (the block of `tokens` after `parent`) from
    /// RAM, else from disk (then kept in RAM too); with whether it came
    /// from disk.
    fn find(
        &mut self,
        key: &BlockKey,
        parent: &BlockKey,
        tokens: &[u32],
    ) -> Option<(Arc<Block>, bool)> {
        if let Some(b) = self.ram.get(key) {
            // A key names its tokens (sha256); comparing costs nothing
            // next to the rows and keeps a collision from mattering.
            return (*b.tokens == *tokens && b.parent == *parent).then_some((b, false));
        }
        let b = Arc::new(self.disk.as_mut()?.load(key, parent, tokens)?);
        if self.ram.budget() > 0 {
            self.ram.insert(*key, Arc::clone(&b));
        }
        Some((b, true))
    }
}
