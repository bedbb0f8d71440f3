//! The kernels of the GPU backend, one file per family. Each function
//! returns the dispatches that compute one op over buffers the caller
//! owns; nothing here submits work or keeps state, so a recorded graph
//! binds them once and replays them every step.
//!
//! Conventions shared by every op:
//! - f32 activations are `array<f32>` rows of `ne0` contiguous values
//!   (ggml order), i32 step inputs are `array<i32>`;
//! - an op that the graph runs in place takes its output as its only
//!   read-write binding (wgpu forbids binding one buffer as both a
//!   read-only and a read-write storage range in one dispatch);
//! - every reduction runs in a fixed order that depends only on the row's
//!   own length, never on how many rows the dispatch has, so a row's
//!   result is the same alone or in any batch.

pub mod attention;
pub mod elementwise;
pub mod matmul;

/// Workgroups for `n` invocations of `per_group` each, spread over x and y
/// so that no dimension passes the 65,535 that every device supports.
pub fn groups_for(n: u64, per_group: u64) -> [u32; 3] {
    let g = n.div_ceil(per_group).max(1);
    if g <= 65_535 {
        [g as u32, 1, 1]
    } else {
        [65_535, g.div_ceil(65_535) as u32, 1]
    }
}
