// out = x / sqrt(mean(x^2) + eps) per row of ne0 (eps = P.f), one
// workgroup per row. Needs ew_common.wgsl.
//
// As the CPU (ggml): each square is rounded to f32 and the squares are
// summed exactly enough to stand for its f64 sum (double-f32 here), the
// mean is rounded once to f32, eps is added in f32 and the row is
// multiplied by the f32 factor 1 / sqrt(mean + eps), both IEEE-rounded.
// Lane l sums values l, l + 256, ... and the lanes meet in a fixed tree,
// so a row's result depends on ne0 alone, never on the rows beside it.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> part: array<vec2<f32>, 256>;

// The row's sum of squares, each square multiplied by `scale` (a power of
// two, so exactly), in double-f32; the same value in every lane.
fn sum_squares(base: u32, ne0: u32, lid: u32, scale: f32) -> vec2<f32> {
    var acc = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < ne0; i += WG) {
        let v = x[base + i];
        acc = df_add_f(acc, mul(mul(v, v), scale));
    }
    part[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            part[lid] = df_add(part[lid], part[lid + s]);
        }
        workgroupBarrier();
    }
    let sum = workgroupUniformLoad(&part[0]);
    // No lane may overwrite part[] before every lane has read it.
    workgroupBarrier();
    return sum;
}

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
    var sum = sum_squares(base, ne0, lid, 1.0);
    // The CPU's f64 sum does not overflow where the squares fit f32; when
    // the f32 sum does (inf or, through the compensation, NaN), it is
    // taken again with the squares scaled by 2^-64 and the mean scaled
    // back (exact: powers of two).
    var unscale = 1.0;
    if (bitcast<u32>(sum.x) & 0x7f800000u) == 0x7f800000u {
        sum = sum_squares(base, ne0, lid, 0x1.0p-64f);
        unscale = 0x1.0p+64f;
    }
    // mean = sum / ne0 rounded once, from both parts of the sum.
    let n = f32(ne0);
    var mean = opq(sum.x / n);
    if in_range(sum.x, SAFE_LO, SAFE_HI) {
        mean = quot_round(sum, vec2<f32>(n, 0.0), mean);
    }
    mean = mul(mean, unscale);
    let scale = div_cr(1.0, sqrt_cr(add(mean, bitcast<f32>(P.f))));
    for (var i = lid; i < ne0; i += WG) {
        out[base + i] = mul(x[base + i], scale);
    }
}
