// RoPE in place: one workgroup per row, every head of it. Pair (a, b) at
// angle t becomes (x_a cos t - x_b sin t, x_a sin t + x_b cos t), the
// CPU's expressions; dimensions from n_rot on are left alone.

struct Params {
    n_rows: u32,
    n_head: u32,
    head_dim: u32,
    n_rot: u32,
    // 0 normal (adjacent pairs), 1 neox (halves).
    style: u32,
    theta_scale: f32,
    freq_scale: f32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<i32>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= P.n_rows) {
        return;
    }
    let half = P.n_rot >> 1u;
    rope_table(lid, positions[row], half, P.theta_scale, P.freq_scale);
    let base = row * P.n_head * P.head_dim;
    for (var hp = lid; hp < P.n_head * half; hp += 64u) {
        let h = hp / half;
        let i = hp % half;
        var a = i;
        var b = i + half;
        if (P.style == 0u) {
            a = 2u * i;
            b = a + 1u;
        }
        let o = base + h * P.head_dim;
        let x0 = x[o + a];
        let x1 = x[o + b];
        let cs = rope_cs[i];
        x[o + a] = x0 * cs.x - x1 * cs.y;
        x[o + b] = x0 * cs.y + x1 * cs.x;
    }
}
