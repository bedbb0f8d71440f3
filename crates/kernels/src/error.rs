//! Typed errors of the kernels.

use minfer_gguf::GgmlType;

/// What a kernel entry point can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error("tensor type {ty} is not supported for {op}")]
    UnsupportedType { ty: GgmlType, op: &'static str },
    #[error("{what}: expected {expected} elements or bytes, got {got}")]
    BadLength {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("row length {n} is not a multiple of {ty}'s block size {block}")]
    NotBlockAligned {
        ty: GgmlType,
        n: usize,
        block: usize,
    },
    #[error("row {row} ({len} values) reaches outside the {data} values of its matrix")]
    RowOutOfRange { row: i64, len: usize, data: usize },
    #[error("unknown SIMD level {0:?} (expected scalar, avx2 or avx512)")]
    UnknownSimd(String),
    #[error("SIMD level {0} is not supported by this CPU")]
    SimdUnavailable(&'static str),
}
