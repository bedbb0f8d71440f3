//! The length check every kernel of this crate makes before it touches a
//! buffer, so that a wrong length is a typed error and never a panic.

use minfer_graph::GraphError;

/// The error of a kernel given buffers of the wrong length.
pub(crate) fn bad_len(
    what: &'static str,
    expected: impl std::fmt::Display,
    got: usize,
) -> GraphError {
    GraphError::BadInput {
        what,
        msg: format!("expected {expected} values, got {got}"),
    }
}
