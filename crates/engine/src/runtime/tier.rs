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

mod chain;
mod disk;
mod ram;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use minfer_models::Model;

use super::{Runtime, SeqId};
use crate::engine::EngineConfig;
use crate::error::{EngineError, Result};
pub use chain::BLOCK_TOKENS;
use chain::{chain, BlockKey};
use disk::{DiskTier, TierIdentity};
use ram::{Block, RamTier};

/// A prompt-cache folder, interned for the life of the process so that
/// [`EngineConfig`] stays `Copy` (front ends copy it freely). Equal paths
/// share one allocation; a process names a handful at most.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CacheDir(&'static Path);

impl CacheDir {
    /// The folder `path` (not created or checked until a runtime opens it).
    pub fn new(path: impl Into<PathBuf>) -> CacheDir {
        static INTERNED: Mutex<Vec<&'static Path>> = Mutex::new(Vec::new());
        let path = path.into();
        let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = all.iter().find(|p| **p == path) {
            return CacheDir(p);
        }
        let p: &'static Path = Box::leak(path.into_boxed_path());
        all.push(p);
        CacheDir(p)
    }

    /// The folder.
    pub fn path(self) -> &'static Path {
        self.0
    }
}

impl std::fmt::Debug for CacheDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Upper bound of [`default_cache_ram`].
const MAX_DEFAULT_RAM: usize = 8 << 30;
/// [`default_cache_ram`] where the memory size is unknown.
const FALLBACK_RAM: usize = 4 << 30;

/// A RAM budget sized to the machine: a quarter of physical memory (from
/// `/proc/meminfo`), at most 8 GiB; 4 GiB where the size is unknown. Read
/// once by front ends when they build their configuration.
pub fn default_cache_ram() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s));
    match total {
        Some(bytes) => (bytes / 4).min(MAX_DEFAULT_RAM),
        None => FALLBACK_RAM,
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

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
                    model: crate::chat::weights_identity(model, name),
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

impl Runtime {
    /// Copies the whole blocks of the sequence in `slot` that the tiers do
    /// not hold yet out of the cells (called as it is released). Blocks go
    /// in chain order, and RAM stops taking them at the first it refuses
    /// (the rest would be unreachable there), so a release costs the new
    /// blocks plus at most one. A failure only costs the cache: it is
    /// logged, never returned.
    pub(super) fn save_to_tiers(&mut self, slot: u32) {
        let Some(keys) = self.seqs[slot as usize].as_ref().map(|s| chain(&s.history)) else {
            return;
        };
        let (t0, mut copied) = (std::time::Instant::now(), 0);
        let mut ram_open = true;
        let mut parent = BlockKey::ROOT;
        for (i, key) in keys.into_iter().enumerate() {
            let Some(tier) = self.tier.as_ref() else {
                return;
            };
            let ram_wants = ram_open && tier.ram.budget() > 0 && !tier.ram.contains(&key);
            let disk_wants = tier.disk.as_ref().is_some_and(|d| !d.has(&key));
            if ram_wants || disk_wants {
                match self.copy_block(slot, i, parent) {
                    Ok(block) => {
                        copied += 1;
                        if let Some(t) = self.tier.as_mut() {
                            ram_open &= t.keep(key, block);
                        }
                    }
                    Err(e) => {
                        tracing::warn!("prompt cache: cannot copy a block out of the cells: {e}");
                        return;
                    }
                }
            }
            parent = key;
        }
        if let Some(t) = self.tier.as_mut() {
            t.saved += copied;
        }
        if copied > 0 {
            tracing::debug!(
                "prompt cache: copied {copied} blocks out of the cells in {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
    }

    /// Block `i` of the sequence in `slot`, copied out of the cells.
    fn copy_block(&self, slot: u32, i: usize, parent: BlockKey) -> Result<Arc<Block>> {
        let range = i * BLOCK_TOKENS..(i + 1) * BLOCK_TOKENS;
        let s = self.seqs[slot as usize]
            .as_ref()
            .ok_or(EngineError::UnknownSequence(slot))?;
        let tokens: Box<[u32]> = s.history[range.clone()].into();
        let rows = self.export_rows(slot, range)?.into_boxed_slice();
        Ok(Arc::new(Block {
            parent,
            tokens,
            rows,
        }))
    }

    /// Extends `seq`, which holds the first `have` tokens of `target`,
    /// with the rows of the following whole blocks of `target` that the
    /// tiers hold, as far as they hold them without a gap; returns the
    /// tokens `seq` holds after. A block the tiers do not have, cells that
    /// cannot be freed, or a failed write end the restore where it is:
    /// the rest is computed as usual.
    pub(super) fn extend_from_tiers(&mut self, seq: SeqId, target: &[u32], have: usize) -> usize {
        let first = have / BLOCK_TOKENS;
        let Some(tier) = self.tier.as_mut() else {
            return have;
        };
        if first >= target.len() / BLOCK_TOKENS {
            return have;
        }
        let keys = chain(target);
        let mut found = Vec::new();
        for i in first..keys.len() {
            let parent = if i == 0 { BlockKey::ROOT } else { keys[i - 1] };
            let tokens = &target[i * BLOCK_TOKENS..(i + 1) * BLOCK_TOKENS];
            match tier.find(&keys[i], &parent, tokens) {
                Some(hit) => found.push(hit),
                None => break,
            }
        }
        let end = (first + found.len()) * BLOCK_TOKENS;
        if end <= have {
            return have;
        }
        let mut at = have;
        let (mut from_ram, mut from_disk) = (0, 0);
        for (j, (block, on_disk)) in found.iter().enumerate() {
            let block_start = (first + j) * BLOCK_TOKENS;
            let skip = at - block_start;
            let pb = self.kv_layout().position_bytes();
            let res = self.append_rows(seq, &block.tokens[skip..], &block.rows[skip * pb..]);
            if let Err(e) = res {
                tracing::debug!("prompt cache: restore stopped at position {at}: {e}");
                break;
            }
            if *on_disk {
                from_disk += BLOCK_TOKENS - skip;
            } else {
                from_ram += BLOCK_TOKENS - skip;
            }
            at = block_start + BLOCK_TOKENS;
        }
        if let Some(t) = self.tier.as_mut() {
            t.restored_ram += from_ram as u64;
            t.restored_disk += from_disk as u64;
        }
        if at > have {
            tracing::debug!(
                "prompt cache: restored positions {have}..{at} ({from_ram} from RAM, {from_disk} from disk)"
            );
        }
        at
    }

    /// What the prompt cache below the cells holds and has restored; all
    /// zero when it is off.
    pub fn prompt_cache_stats(&self) -> PromptCacheStats {
        let Some(t) = self.tier.as_ref() else {
            return PromptCacheStats::default();
        };
        let (disk_written, disk_write_failures) =
            t.disk.as_ref().map_or((0, 0), |d| d.written_and_failed());
        PromptCacheStats {
            block_tokens: BLOCK_TOKENS,
            ram_budget: t.ram.budget(),
            ram_bytes: t.ram.held(),
            ram_blocks: t.ram.len(),
            ram_evicted_blocks: t.ram.evicted(),
            disk_blocks: t.disk.as_ref().map_or(0, |d| d.blocks()),
            disk_bytes: t.disk.as_ref().map_or(0, |d| d.bytes()),
            disk_written,
            disk_write_failures,
            disk_refused: t.disk.as_ref().map_or(0, |d| d.refused()),
            restored_tokens_ram: t.restored_ram,
            restored_tokens_disk: t.restored_disk,
            saved_blocks: t.saved,
        }
    }

    /// The disk tier's folder for this model and KV layout, when there is
    /// one.
    pub fn prompt_cache_dir(&self) -> Option<&Path> {
        self.tier.as_ref()?.disk.as_ref().map(|d| d.dir())
    }

    /// Waits until every block file queued for the disk tier is written
    /// (they are written on a thread of their own; dropping the runtime
    /// waits too).
    pub fn flush_prompt_cache(&self) {
        if let Some(d) = self.tier.as_ref().and_then(|t| t.disk.as_ref()) {
            d.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_is_a_quarter_of_memory_up_to_8_gib() {
        let info = "MemTotal:       24683664 kB\nMemFree: 1 kB\n";
        assert_eq!(mem_total(info), Some(24_683_664 * 1024));
        assert_eq!(mem_total("nothing"), None);
        let d = default_cache_ram();
        assert!(d > 0 && d <= MAX_DEFAULT_RAM);
    }

    #[test]
    fn cache_dirs_are_interned() {
        let a = CacheDir::new("/tmp/minfer-a");
        let b = CacheDir::new(PathBuf::from("/tmp/minfer-a"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.path(), b.path()));
        assert_ne!(a, CacheDir::new("/tmp/minfer-b"));
    }
}
