// The values a plain KV store writes: the rows of `x` as they are.

fn prepare(row: u32, lid: u32) {}

fn value_bits(row: u32, j: u32) -> u32 {
    return x[row * P.row_elems + j];
}
