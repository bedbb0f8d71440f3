//! One query head over its window on its own: the path of Q8_0 regions,
//! whose rows are decoded one at a time, and the definition every other
//! path reproduces bit for bit.

use minfer_kernels::Rows;

use minfer_graph::kv::{KvData, KvRegion};

use super::head::{head_rows, Head};
use super::scratch::ThreadBuf;
use super::sink::softmax;

/// One query head over its window: `out = Σ softmax(scale · q·k_j)_j v_j`
/// (with `sink` in the softmax's denominator when there is one),
/// each dot product as [`minfer_kernels::rows::dot_f32`] computes it and
/// each output element summed over the window in order. F32 and F16 regions are read in place
/// (f16 widened exactly as it is loaded, so no row is converted into a
/// buffer); Q8_0 rows are decoded into the thread's buffers. Returns
/// `false` if a cell could not be read, which validation rules out.
pub(super) fn attend_head(
    q: &[f32],
    (k, v): (&KvRegion, &KvRegion),
    window: &[i32],
    (head, sink): (Head, Option<f32>),
    buf: &mut ThreadBuf,
    out: &mut [f32],
) -> bool {
    let Head {
        hd,
        start,
        scale,
        rk,
        ..
    } = head;
    let scores = &mut buf.scores[..window.len()];
    let scored = match k.data() {
        KvData::F32(d) => rk
            .dot_rows_f32(q, head_rows(d, k, start, window), scale, scores)
            .is_ok(),
        KvData::F16(d) => rk
            .dot_rows_f16(q, head_rows(d, k, start, window), scale, scores)
            .is_ok(),
        KvData::Q8_0 => scores.iter_mut().zip(window).all(|(s, &cell)| {
            let Some(kr) = k.slice(cell as usize, start, hd, &mut buf.k) else {
                return false;
            };
            // The row kernels' score, so that the decoded row gets the
            // same fused steps as the f16 and f32 caches' rows.
            rk.dot_rows_f32(q, Rows::one(kr), scale, std::slice::from_mut(s))
                .is_ok()
        }),
    };
    if !scored {
        return false;
    }
    softmax(rk, scores, sink);
    out.fill(0.0);
    match v.data() {
        KvData::F32(d) => rk
            .axpy_rows_f32(scores, head_rows(d, v, start, window), out)
            .is_ok(),
        KvData::F16(d) => rk
            .axpy_rows_f16(scores, head_rows(d, v, start, window), out)
            .is_ok(),
        KvData::Q8_0 => scores.iter().zip(window).all(|(&pj, &cell)| {
            let Some(vr) = v.slice(cell as usize, start, hd, &mut buf.v) else {
                return false;
            };
            // The row kernels' sum, so that the widened row gets the same
            // fused steps as the f16 and f32 caches' rows.
            rk.axpy_rows_f32(&[pj], Rows::one(vr), out).is_ok()
        }),
    }
}
