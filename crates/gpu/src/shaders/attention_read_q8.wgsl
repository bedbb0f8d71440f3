// Value `e` of cell `cell` of a Q8_0 region (KVX is replaced by k or v):
// q * d as the CPU dequantizes it (exact: 8 by 11 significant bits).
@group(0) @binding(KVB) var<storage, read> KVX_buf: array<u32>;

fn KVX_at(cell: u32, e: u32) -> f32 {
    let blk = cell * P.KVX_stride + (e >> 5u) * 34u;
    // Blocks start at even bytes, so the f16 scale never straddles words.
    let dw = KVX_buf[blk >> 2u];
    let d = f16_to_f32((dw >> ((blk & 2u) * 8u)) & 0xffffu);
    let qa = blk + 2u + (e & 31u);
    let qw = KVX_buf[qa >> 2u];
    let q = bitcast<i32>(qw << (24u - (qa & 3u) * 8u)) >> 24u;
    return f32(q) * d;
}

// Values e and e + 1 (e even) of cell `cell`: one block, and two quants
// of one word (they start at an even byte).
fn KVX_at2(cell: u32, e: u32) -> vec2<f32> {
    let blk = cell * P.KVX_stride + (e >> 5u) * 34u;
    let dw = KVX_buf[blk >> 2u];
    let d = f16_to_f32((dw >> ((blk & 2u) * 8u)) & 0xffffu);
    let qa = blk + 2u + (e & 31u);
    let qw = KVX_buf[qa >> 2u] >> ((qa & 3u) * 8u);
    let q0 = bitcast<i32>(qw << 24u) >> 24u;
    let q1 = bitcast<i32>(qw << 16u) >> 24u;
    return vec2<f32>(f32(q0) * d, f32(q1) * d);
}
