// Value `e` of cell `cell` of an f16 region (KVX is replaced by k or v):
// two halves per word, the even value in the low half.
@group(0) @binding(KVB) var<storage, read> KVX_buf: array<u32>;

fn KVX_at(cell: u32, e: u32) -> f32 {
    let w = KVX_buf[cell * (P.KVX_stride >> 2u) + (e >> 1u)];
    return f16_to_f32((w >> ((e & 1u) * 16u)) & 0xffffu);
}

// Values e and e + 1 (e even) of cell `cell`: one word.
fn KVX_at2(cell: u32, e: u32) -> vec2<f32> {
    let w = KVX_buf[cell * (P.KVX_stride >> 2u) + (e >> 1u)];
    return vec2<f32>(f16_to_f32(w & 0xffffu), f16_to_f32(w >> 16u));
}
