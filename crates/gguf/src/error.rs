//! Typed errors of the GGUF reader and writer.

use std::path::PathBuf;

/// Everything that can go wrong while reading or writing a GGUF file.
///
/// Every variant names the offending thing (offset, key, tensor, type id) so
/// that a one-line message is enough to understand what is wrong with a file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Opening, mapping, reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    /// The first four bytes are not `GGUF`.
    BadMagic {
        /// The four bytes found instead.
        found: [u8; 4],
    },
    /// A version other than 2 or 3 (the field holds the version read).
    #[error("GGUF version {0} is not supported (supported: 2, 3)")]
    UnsupportedVersion(u32),
    /// The version field reads as 1 to 3 only when byte-swapped: a
    /// big-endian file.
    #[error("big-endian GGUF files are not supported")]
    BigEndian,
    #[error("file is truncated: needed {needed} bytes at offset {offset} while reading {what}, but the file ends at {len}")]
    /// The file ends before a field that should be there.
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Byte offset where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Length of the file (or buffer) in bytes.
        len: u64,
    },
    #[error(
        "{what} count {count} at offset {offset} cannot fit in the remaining {remaining} bytes (the file is truncated or damaged)"
    )]
    /// An element count that the rest of the file cannot hold, even at
    /// the smallest possible size per element (rejected before anything is
    /// allocated for it).
    CountTooLarge {
        /// What is being counted.
        what: &'static str,
        /// The count read from the file.
        count: u64,
        /// Byte offset just after the count.
        offset: u64,
        /// Bytes left in the file after the count.
        remaining: u64,
    },
    #[error("string at offset {offset} is not valid UTF-8")]
    /// A string (key, value or tensor name) that is not valid UTF-8.
    InvalidUtf8 {
        /// Byte offset of the string's bytes, after its length.
        offset: u64,
    },
    #[error("unknown metadata value type {type_id} for key {}", show(key), type_id = type_id)]
    /// A metadata value (or array element) type id outside the thirteen
    /// GGUF value types.
    UnknownValueType {
        /// The metadata key the value belongs to.
        key: String,
        /// The unknown type id.
        type_id: u32,
    },
    #[error("metadata arrays nested deeper than {max} levels (key {})", show(key), max = max)]
    /// Metadata arrays nested deeper than the reader's limit of 8 levels.
    NestingTooDeep {
        /// The metadata key of the outermost array.
        key: String,
        /// The nesting limit.
        max: usize,
    },
    /// The same metadata key twice (the field holds the key).
    #[error("duplicate metadata key {}", show(.0))]
    DuplicateKey(String),
    #[error("metadata key {} has type {found}, expected {expected}", show(key), found = found, expected = expected)]
    /// A metadata value of another type than the one asked for.
    WrongValueType {
        /// The key looked up.
        key: String,
        /// The kind of value wanted, e.g. "unsigned integer".
        expected: &'static str,
        /// The type name of the value stored.
        found: String,
    },
    /// A data alignment that is zero or not a power of two (the field
    /// holds the value); the writer also rejects values above `u32::MAX`.
    #[error("general.alignment = {0} is not a non-zero power of two")]
    BadAlignment(u64),
    #[error("tensor {} has unknown ggml type id {type_id}", show(name), type_id = type_id)]
    /// A tensor whose ggml type id this crate does not know.
    UnknownTensorType {
        /// The tensor's name.
        name: String,
        /// The unknown type id.
        type_id: u32,
    },
    #[error("tensor {} has {n_dims} dimensions (at most 4 are allowed)", show(name), n_dims = n_dims)]
    /// A tensor of more than [`MAX_DIMS`](crate::MAX_DIMS) dimensions.
    TooManyDims {
        /// The tensor's name.
        name: String,
        /// Its number of dimensions.
        n_dims: u32,
    },
    #[error("tensor {} has invalid shape {shape:?}: {reason}", show(name), shape = shape, reason = reason)]
    /// A tensor shape ggml cannot represent: an element or byte count that
    /// overflows, or rows that are not a whole number of blocks.
    BadShape {
        /// The tensor's name.
        name: String,
        /// Its dimensions, innermost first.
        shape: Vec<u64>,
        /// Which rule the shape breaks.
        reason: &'static str,
    },
    /// Two tensors with the same name (in one file, across the parts of a
    /// split model, or given to the writer); the field holds the name.
    #[error("duplicate tensor name {}", show(.0))]
    DuplicateTensor(String),
    #[error("tensor {} offset {offset} is not aligned to {alignment}", show(name), offset = offset, alignment = alignment)]
    /// A tensor whose data offset is not a multiple of the file's
    /// alignment.
    MisalignedTensor {
        /// The tensor's name.
        name: String,
        /// Its offset into the data section.
        offset: u64,
        /// The file's data alignment.
        alignment: u64,
    },
    #[error("tensor {} data [{start}, {end}) lies outside the data section of {data_len} bytes (the file is truncated or damaged)", show(name), start = start, end = end, data_len = data_len)]
    /// A tensor whose data reaches past the end of the file.
    TensorOutOfBounds {
        /// The tensor's name.
        name: String,
        /// First byte of its data, relative to the data section.
        start: u64,
        /// One past its last byte (`u64::MAX` when that overflows).
        end: u64,
        /// Length of the data section.
        data_len: u64,
    },
    /// A split model whose parts do not fit together (a missing part,
    /// `split.*` keys that disagree) or one of whose parts has an invalid
    /// header; the field names the part and what is wrong.
    #[error("split model: {0}")]
    Split(String),
    /// A lookup by a tensor name that the model does not have.
    #[error("no tensor named {}", show(.0))]
    MissingTensor(String),
    /// The writer was given inconsistent input, such as tensor data whose
    /// length does not match its type and shape.
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
