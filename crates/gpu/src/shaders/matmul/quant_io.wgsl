// Parameters and bindings of the activation quantizers (quant_q8*.wgsl):
// f32 rows in, blocks out as words.

struct Params {
    // Tokens (rows of x).
    n_tok: u32,
    // Values per row.
    cols: u32,
    // Blocks per row: of 32 values (Q8_0, Q8_1) or 256 (Q8_K).
    nb: u32,
    // Blocks in all (n_tok * nb).
    total: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> a: array<u32>;

