// What both attention kernels share (attention.wgsl and
// attention_sg.wgsl): the parameters and bindings, the softmax's exp and
// each query row's window of cells. Also needs kv_common.wgsl and the K
// and V readers (attention_read_*.wgsl).

struct Params {
    n_rows: u32,
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    scale: f32,
    // 0, or the sliding window in positions.
    sliding: u32,
    n_ctx: u32,
    // Bytes from one cell to the next in K and in V.
    k_stride: u32,
    v_stride: u32,
    // 1 when `sinks` holds one logit per query head (gpt-oss).
    has_sinks: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(4) var<storage, read> offsets: array<i32>;
@group(0) @binding(5) var<storage, read> cells: array<i32>;
@group(0) @binding(6) var<storage, read> positions: array<i32>;
@group(0) @binding(7) var<storage, read> cell_pos: array<i32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;
@group(0) @binding(9) var<storage, read> sinks: array<f32>;

// Folds head `h`'s sink logit into a finished online softmax (running max
// `m`, sum `l`, accumulators rescaled by the returned factor), as ggml's
// flash attention does after its last key: a term of the denominator with
// no value. A window with no keys keeps its zeros.
fn sink_fold(h: u32, n: u32, m: ptr<function, f32>, l: ptr<function, f32>) -> f32 {
    if (P.has_sinks == 0u || n == 0u) {
        return 1.0;
    }
    let s = sinks[h];
    let m_new = max(*m, s);
    let ms = exp_f32(*m - m_new);
    *l = *l * ms + exp_f32(s - m_new);
    *m = m_new;
    return ms;
}

// e^x for the softmax's x <= 0: Cephes' expf (a 2^k scaling of a
// polynomial on [-ln2/2, ln2/2]), within 2 ulp everywhere, where WGSL's
// exp promises only 3 + 2|x| ulp. Results below the normal range are 0.
fn exp_f32(x: f32) -> f32 {
    if (x < -87.33) {
        return 0.0;
    }
    let xc = min(x, 88.0);
    let k = round(xc * 1.44269504);
    let r = (xc - k * 0.693359375) - k * -2.12194440e-4;
    let z = r * r;
    let p = ((((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
        + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1) * z) + r + 1.0;
    return p * bitcast<f32>(u32(i32(k) + 127) << 23u);
}

// Cells [from, to) of `cells` that row `t` reads: its window, cut to the
// cells at positions above pos - sliding (a suffix: windows are ordered
// by position), clamped into the arrays.
fn window(t: u32) -> vec2<u32> {
    let nc = i32(arrayLength(&cells));
    let first = clamp(offsets[t], 0, nc);
    let end = clamp(offsets[t + 1u], first, nc);
    var lo = first;
    if (P.sliding != 0u) {
        let qp = positions[t];
        let size = i32(min(P.sliding, 0x7fffffffu));
        let last = i32(arrayLength(&cell_pos)) - 1;
        // partition_point of "too old": qp - kp >= size.
        var hi = end;
        while (lo < hi) {
            let mid = lo + (hi - lo) / 2;
            if (qp - cell_pos[clamp(mid, 0, last)] >= size) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
    }
    return vec2<u32>(u32(lo), u32(end));
}

