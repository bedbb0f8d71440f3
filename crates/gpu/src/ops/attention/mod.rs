//! KV regions on the device and the ops over them: RoPE, the KV store
//! (f32, f16 and Q8_0 cells), RoPE fused with the store, and causal GQA
//! attention over each query's window of cells (sliding windows too).
//!
//! What the kernels share with the CPU backend, bit for bit: stored f16
//! halves and Q8_0 blocks (rounding and the quantizer's scale are done on
//! integer bits), the raw row format, the RoPE angles' running product,
//! and the attention scores' dot-product order. What differs by rounding
//! only: sine and cosine (a polynomial here, libm there), `exp`, and the
//! softmax, which runs online over blocks of 64 keys in f32 where the CPU
//! sums in f64 after a full pass. The tests state the measured errors.

mod kv;
mod rope;

use std::sync::Arc;

use minfer_graph::{AttnParams, KvFormat};

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::ops::groups_for;
use crate::Gpu;
pub use kv::{kv_store, new_kv, read_raw_row, rope_kv_store, write_raw_row, DeviceKv};
pub use rope::rope_inplace;

const ATTENTION_COMMON: &str = include_str!("../../shaders/attention_common.wgsl");
const ATTENTION: &str = include_str!("../../shaders/attention.wgsl");
const ATTENTION_SG: &str = include_str!("../../shaders/attention_sg.wgsl");
const READ_F32: &str = include_str!("../../shaders/attention_read_f32.wgsl");
const READ_F16: &str = include_str!("../../shaders/attention_read_f16.wgsl");
const READ_Q8: &str = include_str!("../../shaders/attention_read_q8.wgsl");

/// Largest head the attention kernel takes (its shared query and
/// per-thread accumulators are sized for it).
const MAX_HEAD_DIM: usize = 512;

/// Largest head the subgroup kernel takes (each lane keeps the whole
/// query and an eighth of the output).
const MAX_HEAD_DIM_SG: usize = 256;

/// The step inputs a sliding window reads: each query's position and the
/// position of every window cell (parallel to the cells).
#[derive(Clone, Debug)]
pub struct SlidingInputs {
    /// `n_rows` query positions.
    pub positions: BufRange,
    /// One position per window cell.
    pub cell_positions: BufRange,
}

/// The kernel name and the region-reading source for K or V in `format`.
fn reader(format: KvFormat, which: &str, binding: &str) -> String {
    let src = match format {
        KvFormat::F32 => READ_F32,
        KvFormat::F16 => READ_F16,
        KvFormat::Q8_0 => READ_Q8,
    };
    src.replace("KVX", which).replace("KVB", binding)
}

fn format_name(f: KvFormat) -> &'static str {
    match f {
        KvFormat::F32 => "f32",
        KvFormat::F16 => "f16",
        KvFormat::Q8_0 => "q8_0",
    }
}

/// The attention kernel for K and V in `k` and `v` and heads of
/// `head_dim`, and the (row, head) pairs one workgroup takes: the subgroup
/// kernel (no barriers) on a software device with subgroups where the
/// head fits it, the workgroup kernel otherwise. Both sum in the same
/// order.
fn attention_kernel(
    gpu: &Gpu,
    k: KvFormat,
    v: KvFormat,
    head_dim: usize,
) -> Result<(Arc<crate::Kernel>, u64)> {
    let readers = || [reader(k, "k", "2"), reader(v, "v", "3")].concat();
    // The subgroup kernel keeps the query and its outputs in each lane's
    // registers, which suits a CPU's wide vectors; a GPU does better with
    // the workgroup kernel's shared query.
    let software = gpu.adapter().kind == crate::AdapterKind::Software;
    if software && gpu.subgroups && head_dim.is_multiple_of(16) && head_dim <= MAX_HEAD_DIM_SG {
        let name = format!(
            "attention_sg_{}_{}_hd{head_dim}",
            format_name(k),
            format_name(v)
        );
        let kernel = gpu.kernel_with(&name, || {
            let dpl = head_dim / 8;
            let body = crate::kernel::expand_repeats(
                ATTENTION_SG,
                &[("HD8", head_dim / 8), ("DPL", dpl), ("DPL2", dpl / 2)],
            );
            format!(
                "const HD: u32 = {head_dim}u;\n{ATTENTION_COMMON}{}{}{body}",
                kv::KV_COMMON,
                readers()
            )
        })?;
        return Ok((kernel, 8));
    }
    let name = format!("attention_{}_{}", format_name(k), format_name(v));
    let kernel = gpu.kernel_with(&name, || {
        [ATTENTION_COMMON, ATTENTION, kv::KV_COMMON, &readers()].concat()
    })?;
    Ok((kernel, 1))
}

/// Attention of `n_rows` query rows (`p.n_head * p.head_dim` values each)
/// over the cells `cells[offsets[t]..offsets[t + 1]]` of `k` and `v`,
/// written to `out` (same shape as `q`). With `p.sliding_window > 0`,
/// `sliding` names the positions and only cells above
/// `position - sliding_window` are read. With `sinks` (one f32 logit per
/// query head, gpt-oss's) each head's softmax has one more term in its
/// denominator, folded in after the last key as ggml's flash attention
/// does.
///
/// One workgroup per (row, query head), or on a software device with
/// subgroups eight lanes per pair (heads of up to 256 values, a multiple
/// of 16); query head `h`
/// reads KV head `h / (n_head / n_head_kv)`. Scores are `scale * q·k` in the CPU's
/// dot-product order, the softmax runs online over blocks of 64 keys from
/// the window's start, and every sum has an order fixed by the row's own
/// window, so a row's result is the same in any batch. An empty window
/// gives zeros. Offsets are clamped into `cells` and cells into the
/// regions, so bad inputs never read out of bounds.
///
/// # Errors
/// Head counts or sizes that do not fit the regions, a head over 512
/// values, a sliding window without [`SlidingInputs`].
#[allow(clippy::too_many_arguments)]
pub fn attention(
    gpu: &Gpu,
    q: &BufRange,
    k: &DeviceKv,
    v: &DeviceKv,
    offsets: &BufRange,
    cells: &BufRange,
    sliding: Option<&SlidingInputs>,
    sinks: Option<&BufRange>,
    n_rows: u32,
    p: &AttnParams,
    out: &BufRange,
) -> Result<Vec<Dispatch>> {
    let bad = |msg: String| GpuError::Buffer {
        what: "attention".into(),
        msg,
    };
    if p.head_dim == 0 || p.n_head_kv == 0 || !p.n_head.is_multiple_of(p.n_head_kv) {
        return Err(bad(format!(
            "n_head {} must be a multiple of n_head_kv {}, head_dim {} positive",
            p.n_head, p.n_head_kv, p.head_dim
        )));
    }
    if p.head_dim > MAX_HEAD_DIM {
        return Err(GpuError::Unsupported(format!(
            "attention heads of {} values (at most {MAX_HEAD_DIM})",
            p.head_dim
        )));
    }
    let kv_row = p.n_head_kv * p.head_dim;
    if k.row_elems != kv_row || v.row_elems != kv_row || k.n_ctx != v.n_ctx {
        return Err(bad(format!(
            "K rows {} and V rows {} (cells {} / {}) do not fit {} kv heads x {}",
            k.row_elems, v.row_elems, k.n_ctx, v.n_ctx, p.n_head_kv, p.head_dim
        )));
    }
    let rows = u64::from(n_rows) * p.n_head as u64;
    if u32::try_from(rows * p.head_dim as u64).is_err() {
        return Err(bad(format!(
            "{n_rows} rows of {} heads are too many",
            p.n_head
        )));
    }
    // Without a sliding window the position bindings are never read; the
    // offsets and cells stand in for them.
    let (positions, cell_pos) = match (p.sliding_window, sliding) {
        (0, _) => (offsets.clone(), cells.clone()),
        (_, Some(s)) => (s.positions.clone(), s.cell_positions.clone()),
        (_, None) => {
            return Err(bad(format!(
                "a sliding window of {} needs the positions",
                p.sliding_window
            )))
        }
    };
    let (kernel, per_group) = attention_kernel(gpu, k.format, v.format, p.head_dim)?;
    Ok(vec![Dispatch {
        kernel,
        params: vec![
            n_rows,
            p.n_head as u32,
            p.n_head_kv as u32,
            p.head_dim as u32,
            p.scale.to_bits(),
            p.sliding_window,
            k.n_ctx as u32,
            k.stride as u32,
            v.stride as u32,
            u32::from(sinks.is_some()),
        ],
        buffers: vec![
            q.clone(),
            BufRange::whole(&k.buffer),
            BufRange::whole(&v.buffer),
            offsets.clone(),
            cells.clone(),
            positions,
            cell_pos,
            out.clone(),
            // Without sinks the binding is never read; the queries stand in.
            sinks.unwrap_or(q).clone(),
        ],
        groups: groups_for(rows, per_group),
    }])
}
