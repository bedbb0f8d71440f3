//! What a session file is, below its reader and writer: its magic, its
//! format version, and why one can be refused (which the crate's error
//! type wraps).

use std::path::PathBuf;

/// The first bytes of every session file.
pub const MAGIC: &[u8; 8] = b"MINFCHAT";
/// The version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Why a session file could not be written or was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionFileError {
    /// Reading or writing the file failed.
    #[error("session file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// Not a session file, or cut short.
    #[error("{} is not a minfer session file ({what})", path.display())]
    NotASession {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        what: String,
    },
    /// Written by another version of the format.
    #[error("session file {} has format version {found}; this minfer reads version {FORMAT_VERSION}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
    },
    /// The checksum does not match the contents.
    #[error("session file {} is corrupted (checksum mismatch)", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
    },
    /// Made with another model or another KV cache shape.
    #[error("session file {} was made with {theirs}; this run uses {ours}", path.display())]
    OtherModel {
        /// The file.
        path: PathBuf,
        /// What the file was made with.
        theirs: String,
        /// What this run has.
        ours: String,
    },
}
