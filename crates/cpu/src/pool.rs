//! The node buffers the CPU backend holds between steps. Both the backend
//! and the node executor read them, so they sit below both.

/// The node buffers of the CPU, one list per element type so that
/// integers never travel through `f32`.
#[derive(Default)]
pub(crate) struct TypedPool {
    pub f32: Vec<Vec<f32>>,
    pub i32: Vec<Vec<i32>>,
}
