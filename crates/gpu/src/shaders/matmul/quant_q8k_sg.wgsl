// quant_q8k.wgsl's quantizer (same blocks, same bits) without barriers,
// for devices with subgroups of at least 8 invocations: eight lanes per
// super-block, lane l taking the 32 values 32l .. 32l + 31 (whose quant
// sum is its own), the signed value of largest magnitude (the first one
// on ties, as the CPU's scan) found across the eight by shuffles. Eight
// super-blocks per workgroup of 64.

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sl: u32,
) {
    let lane = sl & 7u;
    let g = (wid.x + wid.y * nwg.x) * 8u + (sg * sg_size + sl) / 8u;
    let gc = min(g, p.total - 1u);
    let t = gc / p.nb;
    let b = gc - t * p.nb;
    let base = t * p.cols + b * 256u + 32u * lane;
    var v: array<f32, 32>;
    for (var i = 0u; i < 32u; i++) {
        v[i] = x[base + i];
    }
    // This lane's first value of largest magnitude.
    var am = abs(v[0]);
    var at = 32u * lane;
    var mx = v[0];
    for (var i = 1u; i < 32u; i++) {
        if (abs(v[i]) > am) {
            am = abs(v[i]);
            at = 32u * lane + i;
            mx = v[i];
        }
    }
    for (var m = 1u; m < 8u; m = m << 1u) {
        let oa = subgroupShuffleXor(am, m);
        let ot = subgroupShuffleXor(at, m);
        let om = subgroupShuffleXor(mx, m);
        if (oa > am || (oa == am && ot < at)) {
            am = oa;
            at = ot;
            mx = om;
        }
    }
    var iscale = 0.0;
    var d = 0.0;
    if (am != 0.0) {
        iscale = div_rn(-127.0, mx);
        d = div_rn(1.0, iscale);
    }
    var sum = 0;
    var words: array<u32, 8>;
    for (var k = 0u; k < 8u; k++) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            var q = 0;
            if (am != 0.0) {
                q = min(i32(round(iscale * v[4u * k + e])), 127);
            }
            sum += q;
            word = word | ((u32(q) & 0xFFu) << (8u * e));
        }
        words[k] = word;
    }
    if (g < p.total) {
        for (var k = 0u; k < 8u; k++) {
            a[g * AK_WORDS + 8u * lane + k] = words[k];
        }
        a[g * AK_WORDS + 65u + lane] = bitcast<u32>(sum);
        if (lane == 0u) {
            a[g * AK_WORDS + 64u] = bitcast<u32>(d);
        }
    }
}
