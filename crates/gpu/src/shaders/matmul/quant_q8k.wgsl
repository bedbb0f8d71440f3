// Quantizes f32 activation rows to Q8_K super-blocks of 256, as the CPU's
// quantize_row_q8_k (llama.cpp's reference): the signed value of largest
// magnitude (the first one on ties), iscale = -127 / max, q = min(127,
// round half to even of iscale * x), d = 1 / iscale, and the sums of each
// 32 quants. One lane per value, one super-block per workgroup.
//
// Super-block g (token t, block b, g = t * nb + b) is AK_WORDS words at
// g * AK_WORDS: 64 words of quants (four i8 each), d as f32, then the
// eight sums of 32 quants as i32.

var<workgroup> amax_sh: array<f32, 256>;
var<workgroup> at_sh: array<u32, 256>;
var<workgroup> x_sh: array<f32, 256>;
var<workgroup> q_sh: array<i32, 256>;
var<workgroup> sum_sh: array<i32, 256>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + wid.y * nwg.x;
    let ok = g < p.total;
    var v = 0.0;
    if (ok) {
        let t = g / p.nb;
        let b = g - t * p.nb;
        v = x[t * p.cols + b * 256u + lid];
    }
    x_sh[lid] = v;
    amax_sh[lid] = abs(v);
    at_sh[lid] = lid;
    workgroupBarrier();
    // Largest magnitude, lowest index among equals: the element that the
    // CPU's first-wins scan picks, whatever the tree's shape.
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let o = lid + s;
            if (amax_sh[o] > amax_sh[lid] || (amax_sh[o] == amax_sh[lid] && at_sh[o] < at_sh[lid])) {
                amax_sh[lid] = amax_sh[o];
                at_sh[lid] = at_sh[o];
            }
        }
        workgroupBarrier();
    }
    let amax = amax_sh[0];
    let mx = x_sh[at_sh[0]];
    var q = 0;
    var d = 0.0;
    if (amax != 0.0) {
        let iscale = div_rn(-127.0, mx);
        q = min(i32(round(iscale * v)), 127);
        d = div_rn(1.0, iscale);
    }
    q_sh[lid] = q;
    sum_sh[lid] = q;
    workgroupBarrier();
    if (ok && (lid & 3u) == 0u) {
        let word = (u32(q_sh[lid]) & 0xFFu)
            | ((u32(q_sh[lid + 1u]) & 0xFFu) << 8u)
            | ((u32(q_sh[lid + 2u]) & 0xFFu) << 16u)
            | ((u32(q_sh[lid + 3u]) & 0xFFu) << 24u);
        a[g * AK_WORDS + lid / 4u] = word;
    }
    let lane = lid & 31u;
    for (var s = 16u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            sum_sh[lid] = sum_sh[lid] + sum_sh[lid + s];
        }
        workgroupBarrier();
    }
    if (ok && lane == 0u) {
        a[g * AK_WORDS + 65u + lid / 32u] = bitcast<u32>(sum_sh[lid]);
    }
    if (ok && lid == 0u) {
        a[g * AK_WORDS + 64u] = bitcast<u32>(d);
    }
}
