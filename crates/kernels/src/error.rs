//! Typed errors of the kernels.

use minfer_gguf::GgmlType;

/// What a kernel entry point can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The operation has no kernel for this tensor type.
    #[error("tensor type {ty} is not supported for {op}")]
    UnsupportedType {
        /// The tensor type.
        ty: GgmlType,
        /// The operation, e.g. "quantize" or "dot product".
        op: &'static str,
    },
    /// A buffer or slice of the wrong length.
    #[error("{what}: expected {expected} elements or bytes, got {got}")]
    BadLength {
        /// Which buffer.
        what: &'static str,
        /// The length the operation needs.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A row length that is not a whole number of the type's blocks.
    #[error("row length {n} is not a multiple of {ty}'s block size {block}")]
    NotBlockAligned {
        /// The block type.
        ty: GgmlType,
        /// The row length in elements.
        n: usize,
        /// Elements per block of `ty`.
        block: usize,
    },
    /// A gathered row (see [`Rows`](crate::Rows)) that is negative or
    /// reaches past the end of its matrix.
    #[error("row {row} ({len} values) reaches outside the {data} values of its matrix")]
    RowOutOfRange {
        /// The requested row index.
        row: i64,
        /// Values wanted from that row.
        len: usize,
        /// Values in the whole matrix.
        data: usize,
    },
    /// A SIMD level name that [`SimdLevel::parse`](crate::SimdLevel::parse)
    /// does not know (the field holds the name given).
    #[error("unknown SIMD level {0:?} (expected scalar, avx2, avx2-vnni or avx512)")]
    UnknownSimd(String),
    /// A SIMD level this CPU cannot run (the field holds its name).
    #[error("SIMD level {0} is not supported by this CPU")]
    SimdUnavailable(&'static str),
}

/// `Ok` when a buffer has the length an operation needs, else
/// [`KernelError::BadLength`] naming it.
pub(crate) fn check_len(
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), KernelError> {
    if expected == got {
        Ok(())
    } else {
        Err(KernelError::BadLength {
            what,
            expected,
            got,
        })
    }
}
