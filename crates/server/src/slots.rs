//! llama-server's slot files (`POST /slots/{id}?action=save|restore|erase`
//! with `--slot-save-path`), on the model thread.
//!
//! minfer does not pin a request to one of its `-np` places: a request
//! that names `id_slot` N makes N stand for its tokens (prompt and answer)
//! once it ends. Saving slot N writes the cached sequence that holds those
//! tokens (as much of it as the cache still holds) in minfer's session
//! file format, checked on reading against the model and KV layout;
//! restoring puts a file's sequence back in the cache, where the next
//! prompt that begins with its tokens finds them (nothing is computed);
//! erasing forgets slot N and evicts the idle sequences holding its
//! tokens, so that they are computed again.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use minfer_engine::chat::{file, ModelIdentity, SessionData};
use minfer_engine::Scheduler;
use serde_json::{json, Value};

/// What to do with a slot.
#[derive(Debug, Clone)]
pub enum SlotAction {
    /// Write the slot's sequence to this file.
    Save(std::path::PathBuf),
    /// Read this file's sequence into the cache as the slot's.
    Restore(std::path::PathBuf),
    /// Forget the slot and evict its cached tokens.
    Erase,
}

/// The tokens each slot stands for, on the model thread.
#[derive(Debug)]
pub struct Slots {
    tokens: HashMap<usize, Vec<u32>>,
    identity: ModelIdentity,
}

impl Slots {
    /// No slot holds anything yet; files are checked against `identity`.
    pub fn new(identity: ModelIdentity) -> Slots {
        Slots {
            tokens: HashMap::new(),
            identity,
        }
    }

    /// Slot `n` now stands for `tokens` (a request naming it ended).
    pub fn record(&mut self, n: usize, tokens: Vec<u32>) {
        self.tokens.insert(n, tokens);
    }

    /// Carries out `action` on slot `n`: llama-server's answer, or why not.
    ///
    /// # Errors
    /// A message: the slot is empty, the file cannot be written or read,
    /// or was made by another model or KV layout.
    pub fn act(
        &mut self,
        sched: &mut Scheduler,
        n: usize,
        action: &SlotAction,
    ) -> Result<Value, String> {
        let t = Instant::now();
        let ms = || t.elapsed().as_secs_f64() * 1e3;
        match action {
            SlotAction::Save(path) => {
                let (saved, bytes) = self.save(sched, n, path)?;
                Ok(
                    json!({"id_slot": n, "filename": name(path), "n_saved": saved,
                          "n_written": bytes, "timings": {"save_ms": ms()}}),
                )
            }
            SlotAction::Restore(path) => {
                let (restored, bytes) = self.restore(sched, n, path)?;
                Ok(
                    json!({"id_slot": n, "filename": name(path), "n_restored": restored,
                          "n_read": bytes, "timings": {"restore_ms": ms()}}),
                )
            }
            SlotAction::Erase => {
                let tokens = self.tokens.remove(&n).unwrap_or_default();
                if !tokens.is_empty() {
                    sched.runtime_mut().forget_idle(&tokens);
                }
                Ok(json!({"id_slot": n, "n_erased": tokens.len()}))
            }
        }
    }

    fn save(&self, sched: &mut Scheduler, n: usize, path: &Path) -> Result<(usize, u64), String> {
        let tokens = self
            .tokens
            .get(&n)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                format!("slot {n} holds nothing: no request with id_slot {n} has ended")
            })?;
        let rt = sched.runtime_mut();
        // The probe's last token is never shared, so every real one can be.
        let mut probe = tokens.clone();
        probe.push(0);
        let (seq, _) = rt.new_sequence_for(&probe).map_err(|e| e.to_string())?;
        let snapshot = rt.export_sequence(seq);
        let _ = rt.remove(seq);
        let snapshot = snapshot.map_err(|e| e.to_string())?;
        if snapshot.tokens.is_empty() {
            return Err(format!("slot {n}'s tokens are no longer in the cache"));
        }
        let saved = snapshot.tokens.len();
        let data = SessionData {
            model: self.identity.clone(),
            messages: Vec::new(),
            turns: 0,
            snapshot,
        };
        file::write(path, &data).map_err(|e| e.to_string())?;
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        Ok((saved, bytes))
    }

    fn restore(
        &mut self,
        sched: &mut Scheduler,
        n: usize,
        path: &Path,
    ) -> Result<(usize, u64), String> {
        let rt = sched.runtime_mut();
        let data = file::read(path, &self.identity, &rt.kv_layout()).map_err(|e| e.to_string())?;
        let seq = rt.new_sequence().map_err(|e| e.to_string())?;
        if let Err(e) = rt.import_sequence(seq, &data.snapshot) {
            let _ = rt.remove(seq);
            return Err(e.to_string());
        }
        // Idle in the cache: the next prompt that begins with these tokens
        // takes them.
        rt.release(seq).map_err(|e| e.to_string())?;
        let restored = data.snapshot.tokens.len();
        self.tokens.insert(n, data.snapshot.tokens);
        Ok((restored, std::fs::metadata(path).map_or(0, |m| m.len())))
    }
}

fn name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
}
