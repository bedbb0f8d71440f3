// KV store into an f16 region: each invocation writes whole words (two
// values), so no two invocations ever write the same word.

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
    prepare(row, lid);
    let base = cell_word(row);
    if (base == 0xffffffffu) {
        return;
    }
    let words = P.row_elems >> 1u;
    for (var w = lid; w < words; w += WG) {
        let lo = f32_to_f16(value_bits(row, 2u * w));
        let hi = f32_to_f16(value_bits(row, 2u * w + 1u));
        kv[base + w] = lo | (hi << 16u);
    }
}
