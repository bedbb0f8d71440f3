//! The GPU backend of minfer: the graph's nodes run as WGSL compute
//! shaders through `wgpu` (Vulkan on Linux and Windows, Metal on macOS,
//! DX12), with the weights resident on the device and the KV regions of
//! the offloaded layers in device buffers.
//!
//! Numerics follow the CPU backend's scheme wherever the math allows:
//! activations entering a quantized product are quantized per row to the
//! same Q8 formats and the dot products are integer sums, so the GPU's
//! results differ from the CPU's only in the order of the float
//! accumulations. Every reduction has a fixed order per row, so a row's
//! result does not depend on the other rows of its batch.

mod backend;
mod context;
mod dispatch;
mod error;
mod kernel;
pub mod ops;

pub use backend::GpuBackend;
pub use context::{
    has_real_gpu, list_adapters, AdapterChoice, AdapterDesc, AdapterKind, Gpu, GpuOptions,
};
pub use error::{GpuError, Result};
pub use kernel::{Bound, BufRange, Dispatch, Kernel};
