//! Compiled kernels and dispatches: a WGSL compute shader compiled once
//! per device, and the record of one dispatch of it (bindings, uniform
//! parameters, workgroup counts) that a graph keeps and replays.
//!
//! Every kernel follows one binding convention, so that the backend can
//! bind any of them the same way: binding 0 of group 0 is a uniform block
//! of 32-bit words (each kernel declares its own struct over them), and
//! bindings 1.. are storage buffers in the order the kernel documents.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Writes out the repeated statements of a shader: each line
/// `// @repeat N: STATEMENT` becomes `count` copies of STATEMENT (at the
/// line's indentation), `@` replaced by 0, 1, ..., where `(N, count)` is
/// in `counts`. A software device's compiler (lavapipe's) unrolls only
/// small loops, and every iteration of a loop it keeps counts against the
/// 65,535 loop iterations it lets one invocation run, past which loops
/// silently stop; repeated statements cost neither, and index arrays with
/// constants.
///
/// # Panics
/// On a repeat whose count is not in `counts` (a bug in the caller).
pub(crate) fn expand_repeats(src: &str, counts: &[(&str, usize)]) -> String {
    let mut out = String::with_capacity(src.len() * 2);
    for line in src.lines() {
        let Some((indent, rest)) = line.split_once("// @repeat ") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (name, stmt) = rest.split_once(": ").expect("`// @repeat N: statement`");
        let count = counts
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no count for @repeat {name}"))
            .1;
        for i in 0..count {
            out.push_str(indent);
            out.push_str(&stmt.replace('@', &i.to_string()));
            out.push('\n');
        }
    }
    out
}

/// A compute pipeline and its bind-group layout.
#[derive(Debug)]
pub struct Kernel {
    /// The name it was compiled under (for errors and traces).
    pub name: &'static str,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

/// A storage binding: a whole buffer or a range of one.
#[derive(Clone, Debug)]
pub struct BufRange {
    /// The buffer.
    pub buffer: Arc<wgpu::Buffer>,
    /// Byte offset (a multiple of the device's storage offset alignment,
    /// 256 at most).
    pub offset: u64,
    /// Bytes bound; `None` binds to the end of the buffer.
    pub size: Option<u64>,
}

impl BufRange {
    /// The whole buffer.
    pub fn whole(buffer: &Arc<wgpu::Buffer>) -> Self {
        BufRange {
            buffer: buffer.clone(),
            offset: 0,
            size: None,
        }
    }
}

/// One dispatch as the ops describe it, before it is bound.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// The kernel to run.
    pub kernel: Arc<Kernel>,
    /// Uniform words (binding 0); padded to 16 bytes when bound.
    pub params: Vec<u32>,
    /// Storage bindings 1, 2, ... in the kernel's order.
    pub buffers: Vec<BufRange>,
    /// Workgroups in x, y, z.
    pub groups: [u32; 3],
}

/// A dispatch with its bind group made: what a recorded graph replays.
#[derive(Debug)]
pub struct Bound {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) bind: wgpu::BindGroup,
    pub(crate) groups: [u32; 3],
    /// Kept so that the uniform buffer lives as long as the binding.
    pub(crate) _uniform: wgpu::Buffer,
}

/// Kernels compiled on one device, by name.
#[derive(Default)]
pub struct KernelCache {
    pub(crate) kernels: Mutex<HashMap<&'static str, Arc<Kernel>>>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KernelCache")
    }
}
