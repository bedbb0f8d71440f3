// Parameters and bindings of the mat-vec kernels (mv_*.wgsl), and the
// one helper they all need. The host fills the same eight words for every
// weight family.

struct Params {
    rows: u32,       // rows of this weight chunk
    span: u32,       // per row: values (float weights) or blocks (quantized)
    row_bytes: u32,
    n_tok: u32,      // tokens in the whole product
    out_stride: u32, // values per output row (all the weight's rows)
    row0: u32,       // the chunk's first row in the whole weight
    t_base: u32,     // the first token of this dispatch
    zero: u32,       // 0 (see opq)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// x, through an operation the compiler cannot see through: keeps it from
// fusing a product into the next addition (an FMA rounds once, the CPU
// twice).
fn opq(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | p.zero);
}

