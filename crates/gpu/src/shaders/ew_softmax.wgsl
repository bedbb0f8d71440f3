// Softmax of each row of ne0 in place, one workgroup per row. Needs
// ew_common.wgsl and ew_expf.wgsl.
//
// As the CPU: the row's maximum is subtracted, each exponential is the
// CPU's exp of that f32 difference (stored back), the exponentials are
// summed (the CPU sums in f64; double-f32 here, about 48 bits), and the
// row is multiplied by 1 / sum rounded once to f32. Lane l takes values
// l, l + 256, ... and the lanes meet in a fixed tree, so a row's result
// depends on ne0 alone.

@group(0) @binding(1) var<storage, read_write> x: array<f32>;

var<workgroup> pmax: array<f32, 256>;
var<workgroup> psum: array<vec2<f32>, 256>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = flat_group(wid, nwg);
    if row >= P.rows {
        return;
    }
    let ne0 = P.ne0;
    let base = row * ne0;
    var m = -inf();
    for (var i = lid; i < ne0; i += WG) {
        m = max(m, x[base + i]);
    }
    pmax[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            pmax[lid] = max(pmax[lid], pmax[lid + s]);
        }
        workgroupBarrier();
    }
    let mx = pmax[0];
    var acc = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < ne0; i += WG) {
        let e = expf(sub(x[base + i], mx));
        x[base + i] = e;
        acc = df_add_f(acc, e);
    }
    psum[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            psum[lid] = df_add(psum[lid], psum[lid + s]);
        }
        workgroupBarrier();
    }
    let sum = psum[0];
    // 1 / sum rounded once, from both parts of the sum (which is at
    // least 1: the maximum contributes e^0).
    var inv = opq(1.0 / sum.x);
    if in_range(sum.x, SAFE_LO, SAFE_HI) {
        inv = quot_round(vec2<f32>(1.0, 0.0), sum, inv);
    }
    // Each lane rescales the values it stored itself.
    for (var i = lid; i < ne0; i += WG) {
        x[base + i] = mul(x[base + i], inv);
    }
}
