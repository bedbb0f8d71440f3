//! The disk tier: the RAM tier's blocks as files, one per block, named by
//! its key, in a folder per model identity and KV layout, so that a
//! restarted process finds the prefixes an earlier one computed.
//!
//! Layout of a block file (integers little-endian):
//!
//! ```text
//! magic    8 bytes  "MINFKVBK"
//! version  u32      FORMAT_VERSION
//! header   u64 length, then JSON: the identity (model, KV layout, compute
//!                   path, block size), the block's key, its parent's key,
//!                   its tokens
//! rows     u64 length, then the K/V rows of the block's positions
//! checksum 32 bytes sha256 of everything above
//! ```
//!
//! A file is checked whole (magic, checksum, version, identity, key,
//! sizes, tokens, parent) before any row is taken from it; one that fails
//! is refused with one log line and removed (it sits under a name this
//! process would write, so a good copy replaces it the next time the block
//! is computed).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::chain::BlockKey;
use super::ram::Block;
use super::writer::{Job, Writer};
use crate::framed::{frame, unframe, FrameError};
use crate::identity::ModelIdentity;

/// The first bytes of every block file.
const MAGIC: &[u8; 8] = b"MINFKVBK";
/// The version this build writes and reads.
const FORMAT_VERSION: u32 = 1;
/// The file name's ending.
const EXT: &str = "kvb";

/// What every block of one folder was computed with: a block is restored
/// only into a runtime with equal values, which is what keeps a restored
/// row the bits a recomputation would give.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TierIdentity {
    /// The weights (name informative, not compared).
    pub model: ModelIdentity,
    /// Layers, each with a K and a V row per position.
    pub n_layer: usize,
    /// Values per K or V row.
    pub row_elems: usize,
    /// Storage format of the rows.
    pub kv_format: String,
    /// Bytes of one position's rows.
    pub position_bytes: usize,
    /// The kernel path and device plan: float kernels of different SIMD
    /// levels or devices may round differently.
    pub compute: String,
    /// Tokens per block.
    pub block_tokens: usize,
}

impl TierIdentity {
    /// Everything but the model's informative name.
    fn compared(&self) -> (&str, &str, usize, usize, &str, usize, &str, usize) {
        (
            &self.model.tensor_sha256,
            &self.model.arch,
            self.n_layer,
            self.row_elems,
            &self.kv_format,
            self.position_bytes,
            &self.compute,
            self.block_tokens,
        )
    }

    fn describe_layout(&self) -> String {
        format!(
            "{} layers of {} values in {}, {} bytes a position, {}, blocks of {}",
            self.n_layer,
            self.row_elems,
            self.kv_format,
            self.position_bytes,
            self.compute,
            self.block_tokens
        )
    }

    /// The folder name: readable, then a hash of the compared fields.
    pub fn folder_name(&self) -> String {
        let json = serde_json::to_vec(&self.compared()).unwrap_or_default();
        let hash = Sha256::digest(json);
        let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        };
        format!("{}-{}-{hex}", safe(&self.model.arch), safe(&self.kv_format))
    }
}

/// Why a block file was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TierFileError {
    /// Reading the file failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Not a block file, or cut short.
    #[error("not a minfer KV block file ({0})")]
    NotABlock(String),
    /// Written by another version of the format.
    #[error("format version {0}; this minfer reads version {FORMAT_VERSION}")]
    Version(u32),
    /// The checksum does not match the contents.
    #[error("corrupted (checksum mismatch)")]
    Checksum,
    /// Made with other weights.
    #[error("made with model {theirs}; this run uses {ours}")]
    OtherModel {
        /// What the file was made with.
        theirs: String,
        /// What this run has.
        ours: String,
    },
    /// Made with another KV layout or compute path.
    #[error("made with {theirs}; this run uses {ours}")]
    OtherLayout {
        /// What the file was made with.
        theirs: String,
        /// What this run has.
        ours: String,
    },
    /// Not the block its name or the prompt says.
    #[error("holds another block ({0})")]
    WrongBlock(String),
}

#[derive(Serialize, Deserialize)]
struct Header {
    identity: TierIdentity,
    key: String,
    parent: String,
    tokens: Vec<u32>,
}

/// The bytes of the file of block `key`.
pub(crate) fn encode(id: &TierIdentity, key: &BlockKey, block: &Block) -> Vec<u8> {
    let header = Header {
        identity: id.clone(),
        key: key.hex(),
        parent: block.parent.hex(),
        tokens: block.tokens.to_vec(),
    };
    // Plain data with string keys: serialization cannot fail.
    let json = serde_json::to_vec(&header).unwrap_or_default();
    frame(MAGIC, FORMAT_VERSION, &json, &block.rows)
}

/// Checks and parses the file of block `key` against this run's identity.
///
/// # Errors
/// Every [`TierFileError`] but `Io`.
pub(crate) fn decode(
    bytes: &[u8],
    ours: &TierIdentity,
    key: &BlockKey,
) -> Result<Block, TierFileError> {
    let bad = |what: &str| TierFileError::NotABlock(what.to_string());
    let (header_bytes, rows) = unframe(bytes, MAGIC, FORMAT_VERSION).map_err(|e| match e {
        FrameError::NoHeader => bad("no block header"),
        FrameError::Checksum => TierFileError::Checksum,
        FrameError::Version(v) => TierFileError::Version(v),
        FrameError::CutHeader => bad("cut-off header"),
        FrameError::CutRows => bad("cut-off rows"),
        FrameError::Trailing => bad("trailing bytes"),
    })?;
    let h: Header =
        serde_json::from_slice(header_bytes).map_err(|e| bad(&format!("header: {e}")))?;
    let theirs = &h.identity;
    if (&theirs.model.tensor_sha256, &theirs.model.arch)
        != (&ours.model.tensor_sha256, &ours.model.arch)
    {
        let show = |m: &ModelIdentity| {
            let sha = &m.tensor_sha256[..m.tensor_sha256.len().min(12)];
            format!("{:?} ({}, weights {sha})", m.name, m.arch)
        };
        return Err(TierFileError::OtherModel {
            theirs: show(&theirs.model),
            ours: show(&ours.model),
        });
    }
    if theirs.compared() != ours.compared() {
        return Err(TierFileError::OtherLayout {
            theirs: theirs.describe_layout(),
            ours: ours.describe_layout(),
        });
    }
    if h.key != key.hex() {
        return Err(TierFileError::WrongBlock(format!("key {}", h.key)));
    }
    let parent = BlockKey::from_hex(&h.parent).ok_or_else(|| bad("the parent key is not a key"))?;
    if h.tokens.len() != ours.block_tokens || rows.len() != ours.block_tokens * ours.position_bytes
    {
        return Err(bad("the rows do not match the block size"));
    }
    if parent.child(&h.tokens) != *key {
        return Err(TierFileError::WrongBlock(
            "its tokens and parent do not hash to its key".into(),
        ));
    }
    Ok(Block {
        parent,
        tokens: h.tokens.into(),
        rows: rows.into(),
    })
}

/// The block files of one model and layout, and the thread that writes
/// new ones.
pub(crate) struct DiskTier {
    dir: PathBuf,
    id: Arc<TierIdentity>,
    /// The blocks on disk (found at start, or queued since), by key, with
    /// their file sizes (an estimate for queued ones).
    index: HashMap<BlockKey, u64>,
    /// Bytes of the files in `index`.
    bytes: u64,
    refused: u64,
    writer: Writer,
}

impl DiskTier {
    /// Opens (creating) the folder for `id` under `root` and lists the
    /// block files already there.
    ///
    /// # Errors
    /// When the folder cannot be created or listed, or the writer thread
    /// cannot start.
    pub fn open(root: &Path, id: TierIdentity) -> std::io::Result<DiskTier> {
        let dir = root.join(id.folder_name());
        std::fs::create_dir_all(&dir)?;
        let mut index = HashMap::new();
        let mut bytes = 0;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(key) = name
                .to_str()
                .and_then(|n| n.strip_suffix(&format!(".{EXT}")))
                .and_then(BlockKey::from_hex)
            else {
                continue;
            };
            let len = entry.metadata().map_or(0, |m| m.len());
            bytes += len;
            index.insert(key, len);
        }
        tracing::info!(
            dir = %dir.display(),
            blocks = index.len(),
            mb = bytes as f64 / 1e6,
            "prompt cache on disk"
        );
        Ok(DiskTier {
            dir,
            id: Arc::new(id),
            index,
            bytes,
            refused: 0,
            writer: Writer::start()?,
        })
    }

    /// The folder of this model's blocks.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &BlockKey) -> PathBuf {
        self.dir.join(format!("{}.{EXT}", key.hex()))
    }

    /// Whether a file of `key` is there (or queued).
    pub fn has(&self, key: &BlockKey) -> bool {
        self.index.contains_key(key)
    }

    /// Queues the file of `block`, which is not on disk yet.
    pub fn store(&mut self, key: BlockKey, block: Arc<Block>) {
        let estimate = block.bytes() as u64;
        self.index.insert(key, estimate);
        self.bytes += estimate;
        let id = Arc::clone(&self.id);
        self.writer.send(Job {
            path: self.path(&key),
            encode: Box::new(move || encode(&id, &key, &block)),
        });
    }

    /// The block of `key`, when its file is there and checks out as the
    /// block of `tokens` after `parent`. A file that does not is refused:
    /// one log line, and it is removed.
    pub fn load(&mut self, key: &BlockKey, parent: &BlockKey, tokens: &[u32]) -> Option<Block> {
        if !self.has(key) {
            return None;
        }
        let path = self.path(key);
        let checked = std::fs::read(&path)
            .map_err(TierFileError::Io)
            .and_then(|bytes| decode(&bytes, &self.id, key))
            .and_then(|b| {
                if b.parent != *parent || *b.tokens != *tokens {
                    return Err(TierFileError::WrongBlock(
                        "its tokens differ from the prompt's".into(),
                    ));
                }
                Ok(b)
            });
        match checked {
            Ok(b) => Some(b),
            Err(TierFileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                // Removed behind our back, or still queued: a miss.
                tracing::debug!(file = %path.display(), "prompt cache: block file not found");
                None
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), "prompt cache: refused a block file: {e}; removing it");
                self.refused += 1;
                let _ = std::fs::remove_file(&path);
                if let Some(len) = self.index.remove(key) {
                    self.bytes = self.bytes.saturating_sub(len);
                }
                None
            }
        }
    }

    /// Waits for the queued files.
    pub fn flush(&self) {
        self.writer.flush();
    }

    /// Blocks known on disk (written, found, or queued).
    pub fn blocks(&self) -> usize {
        self.index.len()
    }

    /// Bytes of those files (queued ones estimated).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Files refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Files written and files that failed to be written, so far.
    pub fn written_and_failed(&self) -> (u64, u64) {
        let c = self.writer.counters();
        (
            c.written.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(format: &str) -> TierIdentity {
        TierIdentity {
            model: ModelIdentity {
                tensor_sha256: "ab".repeat(32),
                arch: "llama".into(),
                name: "test".into(),
            },
            n_layer: 2,
            row_elems: 4,
            kv_format: format.into(),
            position_bytes: 32,
            compute: "cpu".into(),
            block_tokens: 3,
        }
    }

    fn block() -> (BlockKey, Block) {
        let tokens = vec![5u32, 6, 7];
        let key = BlockKey::ROOT.child(&tokens);
        let rows: Vec<u8> = (0..96).map(|i| i as u8).collect();
        let b = Block {
            parent: BlockKey::ROOT,
            tokens: tokens.into(),
            rows: rows.into(),
        };
        (key, b)
    }

    #[test]
    fn a_file_round_trips_and_every_mismatch_is_refused() {
        let ours = id("f16");
        let (key, b) = block();
        let bytes = encode(&ours, &key, &b);
        let back = decode(&bytes, &ours, &key).unwrap();
        assert_eq!(
            (back.parent, &back.tokens, &back.rows),
            (b.parent, &b.tokens, &b.rows)
        );

        for i in [0, 10, 40, bytes.len() - 40, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(decode(&bad, &ours, &key).is_err(), "flipped byte {i}");
        }
        assert!(decode(&bytes[..bytes.len() - 1], &ours, &key).is_err());
        let e = decode(&bytes, &id("q8_0"), &key).unwrap_err();
        assert!(matches!(e, TierFileError::OtherLayout { .. }), "{e}");
        let mut other = id("f16");
        other.model.tensor_sha256 = "cd".repeat(32);
        let e = decode(&bytes, &other, &key).unwrap_err();
        assert!(matches!(e, TierFileError::OtherModel { .. }), "{e}");
        let e = decode(&bytes, &ours, &BlockKey([1; 32])).unwrap_err();
        assert!(matches!(e, TierFileError::WrongBlock(_)), "{e}");
        // The informative name may differ.
        let mut renamed = id("f16");
        renamed.model.name = "other name".into();
        assert!(decode(&bytes, &renamed, &key).is_ok());
    }

    #[test]
    fn folders_differ_by_identity() {
        assert_ne!(id("f16").folder_name(), id("q8_0").folder_name());
        let mut renamed = id("f16");
        renamed.model.name = "x".into();
        assert_eq!(renamed.folder_name(), id("f16").folder_name());
        assert!(id("f16").folder_name().starts_with("llama-f16-"));
    }
}
