//! The runtime's side of the prompt cache: blocks copied out of the cells
//! of released sequences, and restored into fresh cells for a prompt that
//! comes back.

use std::path::Path;
use std::sync::Arc;

use super::chain::{chain, BlockKey};
use super::ram::Block;
use super::{PromptCacheStats, BLOCK_TOKENS};
use crate::error::{EngineError, Result};
use crate::runtime::{Runtime, SeqId};

impl Runtime {
    /// Copies the whole blocks of the sequence in `slot` that the tiers do
    /// not hold yet out of the cells (called as it is released). Blocks go
    /// in chain order, and RAM stops taking them at the first it refuses
    /// (the rest would be unreachable there), so a release costs the new
    /// blocks plus at most one. A failure only costs the cache: it is
    /// logged, never returned.
    pub(crate) fn save_to_tiers(&mut self, slot: u32) {
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
    pub(crate) fn extend_from_tiers(&mut self, seq: SeqId, target: &[u32], have: usize) -> usize {
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
