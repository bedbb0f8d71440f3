//! Rotary position embedding, computed as ggml's CPU rope does so the
//! rotated queries and keys match llama.cpp's to the last bit where the
//! C library's `powf`/`cosf`/`sinf` are the same.

use minfer_graph::ir::{RopeParams, RopeStyle};
use minfer_graph::{GraphError, Result};

/// Rotates every head of every row of `x` by its token's position.
///
/// `x` holds `positions.len()` rows of `n_head * head_dim` values. For pair
/// `i < n_rot / 2` the angle is `pos * freq_scale * freq_base^(-2i/n_rot)`,
/// where, as in ggml's rope cache, `freq_base^(-2i/n_rot)` is built by
/// repeated multiplication with `theta_scale = powf(freq_base, -2/n_rot)`
/// starting from `theta = pos`, and `cos`/`sin` are taken in f32.
/// [`RopeStyle::Normal`] rotates `(2i, 2i+1)`, [`RopeStyle::Neox`]
/// `(i, i + n_rot/2)`; dimensions from `n_rot` on are left as they are.
///
/// # Errors
/// [`GraphError::PositionOutOfRange`] when a position is negative or
/// `>= n_ctx` (checked for every token before anything is written);
/// [`GraphError::BadInput`] when `n_rot` is odd or larger than `head_dim`,
/// a dimension is 0, or `x` does not hold one row per position.
pub fn rope_inplace(x: &mut [f32], positions: &[i32], p: &RopeParams, n_ctx: usize) -> Result<()> {
    rope_ext_inplace(x, positions, p, None, n_ctx)
}

/// [`rope_inplace`] with ggml's `rope_ext` extras: pair `i`'s angle is
/// `freq_scale * (theta_i / factors[i])` when frequency factors are given
/// (`n_rot / 2` of them), blended with the unscaled angle under YaRN
/// (`p.yarn`, whose magnitude correction joins `p.attn_factor`), and every
/// cosine and sine is multiplied by that magnitude, in ggml's order.
///
/// # Errors
/// As [`rope_inplace`], and [`GraphError::BadInput`] when `factors` does
/// not hold `n_rot / 2` values.
pub fn rope_ext_inplace(
    x: &mut [f32],
    positions: &[i32],
    p: &RopeParams,
    factors: Option<&[f32]>,
    n_ctx: usize,
) -> Result<()> {
    if p.head_dim == 0 || p.n_head == 0 || p.n_rot > p.head_dim || !p.n_rot.is_multiple_of(2) {
        return Err(GraphError::BadInput {
            what: "rope params",
            msg: format!(
                "n_rot {} must be even and at most head_dim {} (n_head {})",
                p.n_rot, p.head_dim, p.n_head
            ),
        });
    }
    let row = p.n_head.checked_mul(p.head_dim);
    if row.and_then(|r| r.checked_mul(positions.len())) != Some(x.len()) {
        return Err(GraphError::BadInput {
            what: "rope input",
            msg: format!(
                "{} values are not {} rows of {} heads x {}",
                x.len(),
                positions.len(),
                p.n_head,
                p.head_dim
            ),
        });
    }
    if let Some(&pos) = positions
        .iter()
        .find(|&&pos| usize::try_from(pos).map_or(true, |q| q >= n_ctx))
    {
        return Err(GraphError::PositionOutOfRange {
            pos: pos.into(),
            n_ctx,
        });
    }
    if let Some(f) = factors.filter(|f| f.len() != p.n_rot / 2) {
        return Err(GraphError::BadInput {
            what: "rope factors",
            msg: format!("{} factors for {} rotated pairs", f.len(), p.n_rot / 2),
        });
    }
    if p.n_rot == 0 || x.is_empty() {
        return Ok(());
    }
    let row = p.n_head * p.head_dim;
    let half = p.n_rot / 2;
    let theta_scale = p.freq_base.powf(-2.0 / p.n_rot as f32);
    // ggml grows the magnitude inside its YaRN step: the same factor for
    // every pair.
    let mscale = match &p.yarn {
        Some(y) if y.ext_factor != 0.0 => p.attn_factor * (1.0 + 0.1 * (1.0 / p.freq_scale).ln()),
        _ => p.attn_factor,
    };
    for (xr, &pos) in x.chunks_exact_mut(row).zip(positions) {
        // Every head of the row shares the angles, so each angle is
        // computed once and applied across the heads.
        let mut theta = pos as f32;
        for i in 0..half {
            let extrap = match factors {
                Some(f) => theta / f[i],
                None => theta,
            };
            let interp = p.freq_scale * extrap;
            let angle = match &p.yarn {
                Some(y) => {
                    let mix = y.mix(i);
                    interp * (1.0 - mix) + extrap * mix
                }
                None => interp,
            };
            let (sin, cos) = if p.is_unit() {
                (angle.sin(), angle.cos())
            } else {
                (angle.sin() * mscale, angle.cos() * mscale)
            };
            theta *= theta_scale;
            let (a, b) = match p.style {
                RopeStyle::Normal => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + half),
            };
            for head in xr.chunks_exact_mut(p.head_dim) {
                let x0 = head[a];
                let x1 = head[b];
                head[a] = x0 * cos - x1 * sin;
                head[b] = x0 * sin + x1 * cos;
            }
        }
    }
    Ok(())
}
