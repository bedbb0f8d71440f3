//! The memory the CPU backend holds between steps: node buffers and the
//! KV regions of its layers. Both the backend and the node executor read
//! these, so they sit below both.

use minfer_graph::kv::KvRegion;

/// The node buffers of the CPU, one list per element type so that
/// integers never travel through `f32`.
#[derive(Default)]
pub(crate) struct TypedPool {
    pub f32: Vec<Vec<f32>>,
    pub i32: Vec<Vec<i32>>,
}

/// One layer's persistent K and V regions.
#[derive(Default)]
pub(crate) struct LayerKv {
    pub k: Option<KvRegion>,
    pub v: Option<KvRegion>,
}
