// KV store into a Q8_0 region: the CPU's 34-byte blocks back to back from
// the cell's first word. Two blocks are 68 bytes, 17 whole words, so each
// invocation quantizes a pair of blocks and writes its 17 words (9 for a
// lone last block, whose last word holds the cell's padding): no two
// invocations write the same word.

// Writes row `row` of `x` from word `base` of `kv` (the entry point is
// in kv_store_io.wgsl); `lid` is the invocation's lane.
fn store_row(row: u32, base: u32, lid: u32) {
    let nb = P.row_elems >> 5u;
    let pairs = (nb + 1u) >> 1u;
    for (var pr = lid; pr < pairs; pr += WG) {
        let w = base + 17u * pr;
        let j0 = 64u * pr;
        // Block 0: d in bytes 0-1, quants in bytes 2..34.
        let d0 = q8_block(row, j0);
        kv[w] = d0 | (qb[0] << 16u) | (qb[1] << 24u);
        for (var k = 1u; k < 8u; k++) {
            kv[w + k] = qb_word(4u * k - 2u);
        }
        let tail = qb[30] | (qb[31] << 8u);
        // Block 1: d in bytes 34-35, quants word-aligned from byte 36.
        var d1 = 0u;
        if (2u * pr + 1u < nb) {
            d1 = q8_block(row, j0 + 32u);
            for (var k = 0u; k < 8u; k++) {
                kv[w + 9u + k] = qb_word(4u * k);
            }
        }
        kv[w + 8u] = tail | (d1 << 16u);
    }
}
