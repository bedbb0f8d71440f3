//! A head's softmax with an attention sink (gpt-oss): one more logit per
//! query head that joins the denominator only, as ggml's
//! `soft_max_add_sinks` does.

use minfer_kernels::softmax::{combine_f64, poly_exp};
use minfer_kernels::RowKernels;

/// The softmax of one head's scores, in place: the kernels' softmax
/// without a sink; with `sink`, `M = max(max_j s_j, sink)`,
/// `p_j = exp(s_j - M) / (Σ_j exp(s_j - M) + exp(sink - M))` (ggml's CPU
/// `soft_max` with sinks: the sink raises the max and adds its term to
/// the f64 sum after the scores). An empty row stays empty.
pub(super) fn softmax(rk: RowKernels, row: &mut [f32], sink: Option<f32>) {
    let Some(sink) = sink else {
        rk.attn_softmax(row);
        return;
    };
    if row.is_empty() {
        return;
    }
    let max = row.iter().fold(sink, |m, &v| m.max(v));
    // Eight partial sums combined as the kernels' softmax combines them,
    // so a sink far below the scores gives that softmax's bits. The scalar
    // `poly_exp` is the one its SIMD lanes reproduce.
    let mut sums = [0.0f64; 8];
    for (i, v) in row.iter_mut().enumerate() {
        *v = poly_exp(*v - max);
        sums[i % 8] += f64::from(*v);
    }
    let total = combine_f64(&sums) + f64::from(poly_exp(sink - max));
    let inv = (1.0 / total) as f32;
    for v in row.iter_mut() {
        *v *= inv;
    }
}
