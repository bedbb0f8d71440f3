//! GGUF v2/v3 reading and writing.
//!
//! [`GgufFile::open`] memory-maps a model (or all parts of a split model),
//! validates the whole header against the file size before anything is
//! used, and hands out zero-copy views of tensor bytes. [`GgufWriter`]
//! produces valid files, mainly for tests and tools.
//!
//! Malformed input of any kind yields a [`GgufError`]; the reader never
//! panics and never allocates more than the file's own size can justify.

mod error;
mod file;
mod parse;
mod types;
mod value;
mod writer;

pub use error::{GgufError, Result};
pub use file::{
    split_name, split_path, GgufFile, Tensor, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS,
};
pub use parse::{parse_header, Header, Metadata, TensorInfo, DEFAULT_ALIGNMENT, MAX_DIMS};
pub use types::GgmlType;
pub use value::{Array, Value, ValueType};
pub use writer::{array_of, GgufWriter};
