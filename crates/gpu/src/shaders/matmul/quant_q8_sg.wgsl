// quant_q8.wgsl's quantizer (same blocks, same bits) without barriers,
// for devices with subgroups of at least 8 invocations: eight lanes per
// block, lane l taking values 4l .. 4l + 3, the block's largest magnitude
// and quant sum taken across the eight by shuffles (max and integer sums
// are exact in any order). Eight blocks per workgroup of 64.

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
    // Lanes past the end quantize the last block again and store nothing
    // (every lane takes part in the shuffles).
    let gc = min(g, p.total - 1u);
    let t = gc / p.nb;
    let b = gc - t * p.nb;
    let base = t * p.cols + b * 32u + 4u * lane;
    let v = vec4<f32>(x[base], x[base + 1u], x[base + 2u], x[base + 3u]);
    var amax = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
    amax = max(amax, subgroupShuffleXor(amax, 1u));
    amax = max(amax, subgroupShuffleXor(amax, 2u));
    amax = max(amax, subgroupShuffleXor(amax, 4u));
    let d = div_rn(amax, 127.0);
    let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
    let q = vec4<i32>(clamp(round(v * id), vec4<f32>(-128.0), vec4<f32>(127.0)));
    let word = (u32(q.x) & 0xFFu) | ((u32(q.y) & 0xFFu) << 8u) | ((u32(q.z) & 0xFFu) << 16u)
        | ((u32(q.w) & 0xFFu) << 24u);
    var sum = (q.x + q.y) + (q.z + q.w);
    sum += subgroupShuffleXor(sum, 1u);
    sum += subgroupShuffleXor(sum, 2u);
    sum += subgroupShuffleXor(sum, 4u);
    if (g < p.total) {
        a[g * A32_WORDS + lane] = word;
        if (lane == 0u) {
            a[g * A32_WORDS + 8u] = bitcast<u32>(round_f16(d));
            a[g * A32_WORDS + 9u] = bitcast<u32>(round_f16(d * f32(sum)));
        }
    }
}
