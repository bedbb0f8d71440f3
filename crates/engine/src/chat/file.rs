//! Session files: a conversation and its KV cache on disk.
//!
//! Layout (integers little-endian):
//!
//! ```text
//! magic    8 bytes  "MINFCHAT"
//! version  u32      FORMAT_VERSION
//! header   u64 length, then JSON: model identity, KV layout, messages,
//!                   token history
//! rows     u64 length, then the K/V rows of every position, as stored
//!                   (see SeqSnapshot)
//! checksum 32 bytes sha256 of everything above
//! ```
//!
//! A file is written to a temporary file next to its destination, synced,
//! and renamed over it, so a crash never leaves a half-written session
//! under the real name. A file is checked whole (magic, version, checksum,
//! sizes, then the model identity) before anything is taken from it.

use std::io::Write;
use std::path::{Path, PathBuf};

use minfer_graph::KvFormat;
use minfer_text::ChatMessage;
use serde::{Deserialize, Serialize};

use crate::framed::{frame, unframe, FrameError};
use crate::runtime::{KvLayout, SeqSnapshot};

pub use super::format::{SessionFileError, FORMAT_VERSION, MAGIC};
pub use crate::identity::ModelIdentity;

/// The KV layout as stored in a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct LayoutRecord {
    n_layer: usize,
    row_elems: usize,
    n_ctx: u32,
    kv_format: String,
}

impl LayoutRecord {
    fn from_layout(l: &KvLayout) -> Self {
        LayoutRecord {
            n_layer: l.n_layer,
            row_elems: l.row_elems,
            n_ctx: l.n_ctx,
            kv_format: format_name(l.format).to_string(),
        }
    }

    fn describe(&self) -> String {
        format!("n_ctx {}, KV format {}", self.n_ctx, self.kv_format)
    }
}

fn format_name(f: KvFormat) -> &'static str {
    match f {
        KvFormat::F32 => "f32",
        KvFormat::F16 => "f16",
        KvFormat::Q8_0 => "q8_0",
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    model: ModelIdentity,
    layout: LayoutRecord,
    messages: Vec<ChatMessage>,
    tokens: Vec<u32>,
    #[serde(default)]
    turns: u64,
}

/// A conversation as saved: its messages and its cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionData {
    /// The model it was made with.
    pub model: ModelIdentity,
    /// Every message, the system prompt first when there is one.
    pub messages: Vec<ChatMessage>,
    /// Answers sampled so far (each turn's sampler seed is the configured
    /// seed plus this count, so `/regen` draws a new answer and a resumed
    /// session draws what the original would have).
    pub turns: u64,
    /// The sequence's tokens and K/V rows.
    pub snapshot: SeqSnapshot,
}

/// The bytes of a session file.
pub fn encode(data: &SessionData) -> Vec<u8> {
    let header = Header {
        model: data.model.clone(),
        layout: LayoutRecord::from_layout(&data.snapshot.layout),
        messages: data.messages.clone(),
        tokens: data.snapshot.tokens.clone(),
        turns: data.turns,
    };
    // Plain data with string keys: serialization cannot fail.
    let json = serde_json::to_vec(&header).unwrap_or_default();
    frame(MAGIC, FORMAT_VERSION, &json, &data.snapshot.rows)
}

/// Checks and parses the bytes of a session file against the model and
/// cache of this run. `path` names the file in errors.
///
/// # Errors
/// [`SessionFileError::NotASession`], [`SessionFileError::Version`],
/// [`SessionFileError::Checksum`], [`SessionFileError::OtherModel`].
pub fn decode(
    bytes: &[u8],
    path: &Path,
    ours: &ModelIdentity,
    layout: &KvLayout,
) -> Result<SessionData, SessionFileError> {
    let bad = |what: &str| SessionFileError::NotASession {
        path: path.to_path_buf(),
        what: what.to_string(),
    };
    let (header_bytes, rows) = unframe(bytes, MAGIC, FORMAT_VERSION).map_err(|e| match e {
        FrameError::NoHeader => bad("no session header"),
        FrameError::Checksum => SessionFileError::Checksum {
            path: path.to_path_buf(),
        },
        FrameError::Version(found) => SessionFileError::Version {
            path: path.to_path_buf(),
            found,
        },
        FrameError::CutHeader => bad("cut-off header"),
        FrameError::CutRows => bad("cut-off KV rows"),
        FrameError::Trailing => bad("trailing bytes"),
    })?;
    let header: Header =
        serde_json::from_slice(header_bytes).map_err(|e| bad(&format!("header: {e}")))?;
    let other = |theirs: String, ours: String| SessionFileError::OtherModel {
        path: path.to_path_buf(),
        theirs,
        ours,
    };
    if header.model.tensor_sha256 != ours.tensor_sha256 || header.model.arch != ours.arch {
        return Err(other(
            format!(
                "model {:?} ({}, weights {})",
                header.model.name,
                header.model.arch,
                short(&header.model.tensor_sha256)
            ),
            format!(
                "model {:?} ({}, weights {})",
                ours.name,
                ours.arch,
                short(&ours.tensor_sha256)
            ),
        ));
    }
    let ours_layout = LayoutRecord::from_layout(layout);
    if header.layout != ours_layout {
        return Err(other(header.layout.describe(), ours_layout.describe()));
    }
    if rows.len() != header.tokens.len() * layout.position_bytes() {
        return Err(bad("KV rows do not match the token count"));
    }
    Ok(SessionData {
        model: header.model,
        messages: header.messages,
        turns: header.turns,
        snapshot: SeqSnapshot {
            layout: *layout,
            tokens: header.tokens,
            rows: rows.to_vec(),
        },
    })
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// Reads and checks the session file at `path`.
///
/// # Errors
/// [`SessionFileError::Io`] when it cannot be read; as [`decode`].
pub fn read(
    path: &Path,
    ours: &ModelIdentity,
    layout: &KvLayout,
) -> Result<SessionData, SessionFileError> {
    let bytes = std::fs::read(path).map_err(|source| SessionFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(&bytes, path, ours, layout)
}

/// Writes `data` to `path` atomically: a temporary file in the same
/// folder, synced, then renamed over `path` (and the folder synced).
///
/// # Errors
/// [`SessionFileError::Io`]; the old file, if any, is left as it was.
pub fn write(path: &Path, data: &SessionData) -> Result<(), SessionFileError> {
    write_with(path, &encode(data), |_| Ok(()))
}

/// [`write`] of ready bytes, with a hook that runs after the temporary
/// file is synced and before the rename (tests make it fail to show that
/// an interrupted write leaves the old file intact).
pub(crate) fn write_with(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), SessionFileError> {
    let io = |source| SessionFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        before_rename(&tmp)?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the folder is synced; some systems
        // cannot open a folder for that, which is not worth failing over.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Tests write through this to simulate a crash before the rename.
#[doc(hidden)]
pub fn write_interrupted_for_test(path: &Path, data: &SessionData) -> Result<(), SessionFileError> {
    write_with(path, &encode(data), |_| {
        Err(std::io::Error::other("simulated crash before rename"))
    })
}
