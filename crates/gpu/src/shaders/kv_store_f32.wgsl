// KV store into an f32 region: one word per value.

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
    for (var j = lid; j < P.row_elems; j += WG) {
        kv[base + j] = value_bits(row, j);
    }
}
