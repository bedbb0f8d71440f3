//! Typed errors of the GGUF reader and writer.

use std::path::PathBuf;

/// Everything that can go wrong while reading or writing a GGUF file.
///
/// Every variant names the offending thing (offset, key, tensor, type id) so
/// that a one-line message is enough to understand what is wrong with a file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    BadMagic { found: [u8; 4] },
    #[error("GGUF version {0} is not supported (supported: 2, 3)")]
    UnsupportedVersion(u32),
    #[error("big-endian GGUF files are not supported")]
    BigEndian,
    #[error("file is truncated: needed {needed} bytes at offset {offset} while reading {what}, but the file ends at {len}")]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
        len: u64,
    },
    #[error(
        "{what} count {count} at offset {offset} cannot fit in the remaining {remaining} bytes"
    )]
    CountTooLarge {
        what: &'static str,
        count: u64,
        offset: u64,
        remaining: u64,
    },
    #[error("string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 { offset: u64 },
    #[error("unknown metadata value type {type_id} for key {}", show(key), type_id = type_id)]
    UnknownValueType { key: String, type_id: u32 },
    #[error("metadata arrays nested deeper than {max} levels (key {})", show(key), max = max)]
    NestingTooDeep { key: String, max: usize },
    #[error("duplicate metadata key {}", show(.0))]
    DuplicateKey(String),
    #[error("metadata key {} has type {found}, expected {expected}", show(key), found = found, expected = expected)]
    WrongValueType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("general.alignment = {0} is not a non-zero power of two")]
    BadAlignment(u64),
    #[error("tensor {} has unknown ggml type id {type_id}", show(name), type_id = type_id)]
    UnknownTensorType { name: String, type_id: u32 },
    #[error("tensor {} has {n_dims} dimensions (at most 4 are allowed)", show(name), n_dims = n_dims)]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor {} has invalid shape {shape:?}: {reason}", show(name), shape = shape, reason = reason)]
    BadShape {
        name: String,
        shape: Vec<u64>,
        reason: &'static str,
    },
    #[error("duplicate tensor name {}", show(.0))]
    DuplicateTensor(String),
    #[error("tensor {} offset {offset} is not aligned to {alignment}", show(name), offset = offset, alignment = alignment)]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor {} data [{start}, {end}) lies outside the data section of {data_len} bytes", show(name), start = start, end = end, data_len = data_len)]
    TensorOutOfBounds {
        name: String,
        start: u64,
        end: u64,
        data_len: u64,
    },
    #[error("split model: {0}")]
    Split(String),
    #[error("no tensor named {}", show(.0))]
    MissingTensor(String),
    #[error("writer: {0}")]
    Write(String),
}

/// Result alias for this crate.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;

/// Renders a name taken from a file for a one-line message: control
/// characters escaped, and long names shortened.
fn show(s: &str) -> String {
    const MAX: usize = 96;
    let cut = if s.len() > MAX {
        let mut end = MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s.to_string()
    };
    format!("{cut:?}")
}
