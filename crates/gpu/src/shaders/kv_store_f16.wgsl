// KV store into an f16 region: each invocation writes whole words (two
// values), so no two invocations ever write the same word.

// Writes row `row` of `x` from word `base` of `kv` (the entry point is
// in kv_store_io.wgsl); `lid` is the invocation's lane.
fn store_row(row: u32, base: u32, lid: u32) {
    let words = P.row_elems >> 1u;
    for (var w = lid; w < words; w += WG) {
        let lo = f32_to_f16(value_bits(row, 2u * w));
        let hi = f32_to_f16(value_bits(row, 2u * w + 1u));
        kv[base + w] = lo | (hi << 16u);
    }
}
