// Quantizes f32 activation rows to Q8_0 / Q8_1 blocks of 32, as the CPU's
// quantize_row_q8_0 / quantize_row_q8_1: d = amax / 127, q = round half
// to even of x * (127 / amax), s = d * sum(q), d and s stored as f16.
// One lane per value, eight blocks per workgroup of 256.
//
// Block g of the output (token t, block b, g = t * nb + b) is A32_WORDS
// words at g * A32_WORDS: 8 words of quants (four i8 each, element order),
// then d and s as f32 holding their f16 values.

var<workgroup> amax_sh: array<f32, 256>;
var<workgroup> q_sh: array<i32, 256>;
var<workgroup> sum_sh: array<i32, 256>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = (wid.x + wid.y * nwg.x) * 8u + lid / 32u;
    let lane = lid & 31u;
    let ok = g < p.total;
    var v = 0.0;
    if (ok) {
        let t = g / p.nb;
        let b = g - t * p.nb;
        v = x[t * p.cols + b * 32u + lane];
    }
    amax_sh[lid] = abs(v);
    workgroupBarrier();
    // max is exact and order-free, so any tree gives the CPU's value.
    for (var s = 16u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            amax_sh[lid] = max(amax_sh[lid], amax_sh[lid + s]);
        }
        workgroupBarrier();
    }
    let amax = amax_sh[lid & ~31u];
    let d = div_rn(amax, 127.0);
    let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
    let q = i32(clamp(round(v * id), -128.0, 127.0));
    q_sh[lid] = q;
    sum_sh[lid] = q;
    workgroupBarrier();
    if (ok && (lane & 3u) == 0u) {
        let word = (u32(q_sh[lid]) & 0xFFu)
            | ((u32(q_sh[lid + 1u]) & 0xFFu) << 8u)
            | ((u32(q_sh[lid + 2u]) & 0xFFu) << 16u)
            | ((u32(q_sh[lid + 3u]) & 0xFFu) << 24u);
        a[g * A32_WORDS + lane / 4u] = word;
    }
    // Integer sums are exact in any order.
    for (var s = 16u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            sum_sh[lid] = sum_sh[lid] + sum_sh[lid + s];
        }
        workgroupBarrier();
    }
    if (ok && lane == 0u) {
        a[g * A32_WORDS + 8u] = bitcast<u32>(round_f16(d));
        a[g * A32_WORDS + 9u] = bitcast<u32>(round_f16(d * f32(sum_sh[lid])));
    }
}
