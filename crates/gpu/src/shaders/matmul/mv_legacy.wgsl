// Products of the legacy 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0; WT picks one) with Q8_0 / Q8_1 activations from the quantize
// kernel: per block the exact i32 sum of the quant products (as packed
// 4 x i8 dot products), scaled in f32 as the CPU does.
//
// Each lane computes RPL whole rows for TT tokens (WG, RPL and TT are set
// by the host). A row's blocks are taken in order into four partial sums,
// block b into partial b % 4, combined as (p0 + p2) + (p1 + p3): the CPU's
// order (dot/scalar.rs), so a (token, row) result depends on nothing but
// that row and token. The lanes share nothing, so the kernel has no
// barrier (a software device pays dearly for one), each weight block is
// read once for the TT tokens and each activation block once for the RPL
// rows.

// Bytes of a block.
fn block_bytes() -> u32 {
    switch (WT) {
        case T_Q4_0: { return 18u; }
        case T_Q4_1: { return 20u; }
        case T_Q5_0: { return 22u; }
        case T_Q5_1: { return 24u; }
        default: { return 34u; }
    }
}

// Words read per block. Blocks sit at even byte offsets; a block of
// 4k + 2 bytes is covered by k + 1 words whether it starts on a word or
// half way into one (the chunk's padding covers the last one).
fn cover_words() -> u32 {
    return (block_bytes() + 3u) / 4u;
}

// The 32 bits at byte f (even) of a block whose covering words are c; the
// block starts at byte 2 of c[0] when `odd`. Both candidates use constant
// indices, so the words stay in registers.
fn fld(c: ptr<function, array<u32, 10>>, f: u32, odd: bool) -> u32 {
    let i = f >> 2u;
    let mid = ((*c)[i] >> 16u) | ((*c)[i + 1u] << 16u);
    if ((f & 3u) == 0u) {
        return select((*c)[i], mid, odd);
    }
    return select(mid, (*c)[i + 1u], odd);
}

// Four 4-bit values (one per byte) minus 8, as signed bytes.
fn s4(v: u32) -> u32 {
    let x = v ^ 0x08080808u;
    return x | ((x & 0x08080808u) * 30u);
}

// Four 5-bit values minus 16, as signed bytes.
fn s5(v: u32) -> u32 {
    let x = v ^ 0x10101010u;
    return x | ((x & 0x10101010u) * 14u);
}

// Bits 0..3 of n into bit 4 of bytes 0..3.
fn spread4(n: u32) -> u32 {
    return ((n & 1u) | ((n & 2u) << 7u) | ((n & 4u) << 14u) | ((n & 8u) << 21u)) << 4u;
}

// A decoded block: 32 quants as signed bytes (element order, four per
// word), the scale and (Q4_1, Q5_1) the minimum.
struct Blk {
    q: array<u32, 8>,
    d: f32,
    m: f32,
}

// The block at byte o of the weight binding.
fn decode(o: u32) -> Blk {
    var c: array<u32, 10>;
    let base = o >> 2u;
    for (var k = 0u; k < cover_words(); k++) {
        c[k] = w[base + k];
    }
    let odd = (o & 2u) != 0u;
    var b: Blk;
    b.m = 0.0;
    if (WT == T_Q4_0) {
        b.d = f16_to_f32(fld(&c, 0u, odd) & 0xFFFFu);
        for (var k = 0u; k < 4u; k++) {
            let raw = fld(&c, 2u + 4u * k, odd);
            b.q[k] = s4(raw & 0x0F0F0F0Fu);
            b.q[k + 4u] = s4((raw >> 4u) & 0x0F0F0F0Fu);
        }
    } else if (WT == T_Q4_1) {
        // 20-byte blocks in rows of whole words: always aligned.
        b.d = f16_to_f32(c[0] & 0xFFFFu);
        b.m = f16_to_f32(c[0] >> 16u);
        for (var k = 0u; k < 4u; k++) {
            let raw = c[1u + k];
            b.q[k] = raw & 0x0F0F0F0Fu;
            b.q[k + 4u] = (raw >> 4u) & 0x0F0F0F0Fu;
        }
    } else if (WT == T_Q5_0) {
        b.d = f16_to_f32(fld(&c, 0u, odd) & 0xFFFFu);
        let qh = fld(&c, 2u, odd);
        for (var k = 0u; k < 4u; k++) {
            let raw = fld(&c, 6u + 4u * k, odd);
            b.q[k] = s5((raw & 0x0F0F0F0Fu) | spread4(qh >> (4u * k)));
            b.q[k + 4u] = s5(((raw >> 4u) & 0x0F0F0F0Fu) | spread4(qh >> (16u + 4u * k)));
        }
    } else if (WT == T_Q5_1) {
        // 24-byte blocks: always aligned.
        b.d = f16_to_f32(c[0] & 0xFFFFu);
        b.m = f16_to_f32(c[0] >> 16u);
        let qh = c[1];
        for (var k = 0u; k < 4u; k++) {
            let raw = c[2u + k];
            b.q[k] = (raw & 0x0F0F0F0Fu) | spread4(qh >> (4u * k));
            b.q[k + 4u] = ((raw >> 4u) & 0x0F0F0F0Fu) | spread4(qh >> (16u + 4u * k));
        }
    } else {
        // Q8_0
        b.d = f16_to_f32(fld(&c, 0u, odd) & 0xFFFFu);
        for (var k = 0u; k < 8u; k++) {
            b.q[k] = fld(&c, 2u + 4u * k, odd);
        }
    }
    return b;
}

// Token t of the tile: block b of every row of the lane dotted with the
// token's activation block, into the rows' partial sums. The host writes
// one call per token (a software device's compiler would not unroll a
// loop this large, and a loop over t would index the sums at run time).
fn tok(
    inv: Inv,
    acc: ptr<function, array<vec4<f32>, RPL * TT>>,
    blk: ptr<function, array<Blk, RPL>>,
    b: u32,
    t0: u32,
    t: u32,
) {
    let ab = ((t0 + t) * p.span + b) * A32_WORDS;
    let aq = act8(inv, ab);
    let ds = act2(inv, ab + 8u);
    let da = bitcast<f32>(ds.x);
    for (var j = 0u; j < RPL; j++) {
        var isum = 0;
        for (var k = 0u; k < 8u; k++) {
            isum += dot4I8Packed((*blk)[j].q[k], aq[k]);
        }
        var v = ((*blk)[j].d * da) * f32(isum);
        if (WT == T_Q4_1 || WT == T_Q5_1) {
            v = opq(v) + opq((*blk)[j].m * bitcast<f32>(ds.y));
        }
        let s = (*acc)[j * TT + t];
        (*acc)[j * TT + t] = vec4<f32>(s.y, s.z, s.w, s.x + v);
    }
}

@compute @workgroup_size(WG)
fn main(inv: Inv) {
    let r0 = ((inv.wid.x + inv.wid.y * inv.nwg.x) * WG + inv.lid) * RPL;
    let t0 = p.t_base + inv.wid.z * TT;
    // The four partial sums of each (row, token), turned one slot per
    // block so that slot 0 is always the current block's partial.
    var acc: array<vec4<f32>, RPL * TT>;
    // Rows past the chunk read its last row (every lane runs the same
    // loop, as the subgroup reads need) and store nothing.
    var ro: array<u32, RPL>;
    for (var j = 0u; j < RPL; j++) {
        ro[j] = min(r0 + j, p.rows - 1u) * p.row_bytes;
    }
    for (var b = 0u; b < p.span; b++) {
        var blk: array<Blk, RPL>;
        for (var j = 0u; j < RPL; j++) {
            blk[j] = decode(ro[j] + b * block_bytes());
        }
        // @repeat TT: tok(inv, &acc, &blk, b, t0, @u);
    }
    // Partial i ends in slot (i - nb) % 4.
    let turn = p.span & 3u;
    for (var j = 0u; j < RPL; j++) {
        for (var t = 0u; t < TT; t++) {
            let s = acc[j * TT + t];
            var q = s;
            if (turn == 1u) {
                q = s.wxyz;
            } else if (turn == 2u) {
                q = s.zwxy;
            } else if (turn == 3u) {
                q = s.yzwx;
            }
            let r = r0 + j;
            let tk = t0 + t;
            if (r < p.rows && tk < p.n_tok) {
                out[tk * p.out_stride + p.row0 + r] = (q.x + q.z) + (q.y + q.w);
            }
        }
    }
}
