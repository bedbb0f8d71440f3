// Value `e` of cell `cell` of an f32 region (KVX is replaced by k or v).
@group(0) @binding(KVB) var<storage, read> KVX_buf: array<u32>;

fn KVX_at(cell: u32, e: u32) -> f32 {
    return bitcast<f32>(KVX_buf[cell * (P.KVX_stride >> 2u) + e]);
}

// Values e and e + 1 (e even) of cell `cell`.
fn KVX_at2(cell: u32, e: u32) -> vec2<f32> {
    let i = cell * (P.KVX_stride >> 2u) + e;
    return vec2<f32>(bitcast<f32>(KVX_buf[i]), bitcast<f32>(KVX_buf[i + 1u]));
}
