// Reads from the weight binding `w` (GGUF bytes as little-endian words).
// Blocks are 18, 22, 34 or 210 bytes for some types, so fields sit at any
// even byte offset; chunk buffers carry a few bytes of padding past the
// last row so that reading a whole word at the end stays in bounds.

// The 32 bits starting at byte o.
fn ld(o: u32) -> u32 {
    let i = o >> 2u;
    let sh = (o & 3u) * 8u;
    let lo = w[i];
    if (sh == 0u) {
        return lo;
    }
    return (lo >> sh) | (w[i + 1u] << (32u - sh));
}

// The 16 bits starting at byte o.
fn ld16(o: u32) -> u32 {
    return ld(o) & 0xFFFFu;
}

// The byte at o.
fn ld8(o: u32) -> u32 {
    return (w[o >> 2u] >> ((o & 3u) * 8u)) & 0xFFu;
}

// A signed byte at o.
fn ld8s(o: u32) -> i32 {
    return (i32(ld8(o)) << 24u) >> 24u;
}

// The f16 at byte o, as f32.
fn ldh(o: u32) -> f32 {
    return f16_to_f32(ld16(o));
}

// Q4_K/Q5_K: the 6-bit scale (x) and min (y) of sub-block j, from the
// 12 scale bytes at o (as the CPU's k_scale_min).
fn k_scale_min(o: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(ld8(o + j) & 63u, ld8(o + j + 4u) & 63u);
    }
    let a = ld8(o + j + 4u);
    let b = ld8(o + j - 4u);
    let c = ld8(o + j);
    return vec2<u32>((a & 0x0Fu) | ((b >> 6u) << 4u), (a >> 4u) | ((c >> 6u) << 4u));
}
