// The values a fused RoPE + KV store writes: each value of the row
// rotated as the in-place RoPE rotates it (the same expressions on the
// same angles), dimensions from n_rot on copied bit for bit. `x` itself
// is only read.

@group(0) @binding(4) var<storage, read> positions: array<i32>;

fn prepare(row: u32, lid: u32) {
    rope_table(lid, positions[row], P.n_rot >> 1u, bitcast<f32>(P.theta_scale),
        bitcast<f32>(P.freq_scale));
}

fn value_bits(row: u32, j: u32) -> u32 {
    let base = row * P.row_elems;
    let e = j % P.head_dim;
    if (e >= P.n_rot) {
        return x[base + j];
    }
    let head = base + (j - e);
    let pr = rope_pair(e, P.n_rot, P.style);
    let x0 = bitcast<f32>(x[head + pr.y]);
    let x1 = bitcast<f32>(x[head + pr.z]);
    let cs = rope_cs[pr.x];
    if (e == pr.y) {
        return bitcast<u32>(x0 * cs.x - x1 * cs.y);
    }
    return bitcast<u32>(x0 * cs.y + x1 * cs.x);
}
