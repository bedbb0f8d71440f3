// KV store into an f32 region: one word per value.

// Writes row `row` of `x` from word `base` of `kv` (the entry point is
// in kv_store_io.wgsl); `lid` is the invocation's lane.
fn store_row(row: u32, base: u32, lid: u32) {
    for (var j = lid; j < P.row_elems; j += WG) {
        kv[base + j] = value_bits(row, j);
    }
}
