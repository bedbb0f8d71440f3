//! RoPE in place, with the CPU's angles (see `shaders/rope_common.wgsl`).

use minfer_graph::{RopeParams, RopeStyle};

use crate::error::{GpuError, Result};
use crate::kernel::{BufRange, Dispatch};
use crate::ops::groups_for;
use crate::Gpu;

pub(super) const ROPE_COMMON: &str = include_str!("../../shaders/rope_common.wgsl");
const ROPE: &str = include_str!("../../shaders/rope.wgsl");

/// Most rotated dimensions per head: the kernels keep one (cos, sin) per
/// pair of the row in a 256-entry workgroup table.
const MAX_ROT: usize = 512;

/// Checked RoPE parameters as the kernels take them.
pub(super) struct RopeSetup {
    pub n_head: u32,
    pub head_dim: u32,
    pub n_rot: u32,
    /// `freq_base^(-2 / n_rot)` computed on the host with the CPU
    /// backend's expression (`powf` in f32), so the running product of
    /// angles starts from the same bits.
    pub theta_scale: f32,
}

impl RopeSetup {
    pub fn new(p: &RopeParams) -> Result<Self> {
        if p.head_dim == 0 || p.n_head == 0 || p.n_rot > p.head_dim || !p.n_rot.is_multiple_of(2) {
            return Err(GpuError::Buffer {
                what: "rope params".into(),
                msg: format!(
                    "n_rot {} must be even and at most head_dim {} (n_head {})",
                    p.n_rot, p.head_dim, p.n_head
                ),
            });
        }
        if !p.is_unit() {
            return Err(GpuError::Unsupported(format!(
                "rope with a magnitude factor of {} (the plan keeps it on the CPU)",
                p.attn_factor
            )));
        }
        if p.n_rot > MAX_ROT {
            return Err(GpuError::Unsupported(format!(
                "rope of {} dimensions (at most {MAX_ROT})",
                p.n_rot
            )));
        }
        let too_big = || GpuError::Buffer {
            what: "rope params".into(),
            msg: "heads too large for 32-bit sizes".into(),
        };
        let row = p.n_head.checked_mul(p.head_dim).ok_or_else(too_big)?;
        u32::try_from(row).map_err(|_| too_big())?;
        Ok(RopeSetup {
            n_head: p.n_head as u32,
            head_dim: p.head_dim as u32,
            n_rot: p.n_rot as u32,
            theta_scale: p.freq_base.powf(-2.0 / p.n_rot as f32),
        })
    }
}

/// RoPE of every head of `n_rows` rows of `x`, in place, at `positions`.
///
/// # Errors
/// Bad parameters (odd `n_rot` or larger than `head_dim`), more than 512
/// rotated dimensions.
pub fn rope_inplace(
    gpu: &Gpu,
    x: &BufRange,
    positions: &BufRange,
    n_rows: u32,
    p: &RopeParams,
) -> Result<Vec<Dispatch>> {
    let r = RopeSetup::new(p)?;
    if r.n_rot == 0 {
        return Ok(Vec::new());
    }
    let kernel = gpu.kernel("rope", &[ROPE_COMMON, ROPE].concat())?;
    Ok(vec![Dispatch {
        kernel,
        params: vec![
            n_rows,
            r.n_head,
            r.head_dim,
            r.n_rot,
            u32::from(p.style == RopeStyle::Neox),
            r.theta_scale.to_bits(),
            p.freq_scale.to_bits(),
        ],
        buffers: vec![x.clone(), positions.clone()],
        groups: groups_for(u64::from(n_rows), 1),
    }])
}
