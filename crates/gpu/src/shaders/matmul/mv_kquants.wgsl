// Products of the K-quants (Q4_K, Q5_K, Q6_K; WT picks one) with Q8_K
// activations: per super-block of 256 the exact i32 sums of the CPU's
// dot_q4_k / dot_q5_k / dot_q6_k (scaled quant sum, and for Q4_K/Q5_K the
// min-weighted activation sum), added to one running f32 sum as
// acc + (d * isum - dmin * msum), super-block by super-block: the CPU's
// order, so a (token, row) result depends on nothing but that row and
// token.
//
// Each lane computes RPL whole rows for TT tokens (set by the host),
// decoding 32 weights at a time and dotting them with every token; the
// kernel has no barrier.

fn block_bytes() -> u32 {
    switch (WT) {
        case T_Q4_K: { return 144u; }
        case T_Q5_K: { return 176u; }
        default: { return 210u; }
    }
}

// Four 6-bit values minus 32, as signed bytes.
fn s6(v: u32) -> u32 {
    let x = v ^ 0x20202020u;
    return x | ((x & 0x20202020u) * 6u);
}

// Byte i (0..11) of the three scale words.
fn sbyte(sc: vec3<u32>, i: u32) -> u32 {
    return (sc[i >> 2u] >> ((i & 3u) * 8u)) & 0xFFu;
}

// Q4_K/Q5_K: the 6-bit scale (x) and min (y) of sub-block j, as the CPU's
// k_scale_min.
fn k_scale_min(sc: vec3<u32>, j: u32) -> vec2<i32> {
    if (j < 4u) {
        return vec2<i32>(i32(sbyte(sc, j) & 63u), i32(sbyte(sc, j + 4u) & 63u));
    }
    let x = sbyte(sc, j + 4u);
    let y = sbyte(sc, j - 4u);
    let z = sbyte(sc, j);
    return vec2<i32>(i32((x & 0x0Fu) | ((y >> 6u) << 4u)), i32((x >> 4u) | ((z >> 6u) << 4u)));
}

// Eight words from byte o (even): whole words, or halves of nine when o
// is half way into a word (Q6_K's 210-byte blocks).
fn words8(o: u32) -> array<u32, 8> {
    var v: array<u32, 8>;
    let base = o >> 2u;
    if (WT != T_Q6_K) {
        for (var k = 0u; k < 8u; k++) {
            v[k] = w[base + k];
        }
        return v;
    }
    var c: array<u32, 9>;
    for (var k = 0u; k < 9u; k++) {
        c[k] = w[base + k];
    }
    let odd = (o & 2u) != 0u;
    for (var k = 0u; k < 8u; k++) {
        v[k] = select(c[k], (c[k] >> 16u) | (c[k + 1u] << 16u), odd);
    }
    return v;
}

// Two words from byte o (even), as words8.
fn words2(o: u32) -> vec2<u32> {
    let base = o >> 2u;
    let c0 = w[base];
    let c1 = w[base + 1u];
    if ((o & 2u) == 0u) {
        return vec2<u32>(c0, c1);
    }
    let c2 = w[base + 2u];
    return vec2<u32>((c0 >> 16u) | (c1 << 16u), (c1 >> 16u) | (c2 << 16u));
}

// The integer dot product of 32 quants (eight words) with activation
// quants x, as the sums of its two halves.
fn dot32(q: array<u32, 8>, x: array<u32, 8>) -> vec2<i32> {
    var s0 = 0;
    var s1 = 0;
    for (var k = 0u; k < 4u; k++) {
        s0 += dot4I8Packed(q[k], x[k]);
        s1 += dot4I8Packed(q[k + 4u], x[k + 4u]);
    }
    return vec2<i32>(s0, s1);
}

// The per-token steps of a tile; the host writes one call per token (see
// mv_legacy.wgsl).

// Q6_K sub-block g of every row of the lane, token t: the scaled sums.
fn tok6(
    inv: Inv,
    isum: ptr<function, array<i32, RPL * TT>>,
    q: ptr<function, array<array<u32, 8>, RPL>>,
    sc: ptr<function, array<vec2<i32>, RPL>>,
    b: u32,
    g: u32,
    t0: u32,
    t: u32,
) {
    let ab = ((t0 + t) * p.span + b) * AK_WORDS;
    let x = act8(inv, ab + 8u * g);
    for (var j = 0u; j < RPL; j++) {
        let s = dot32((*q)[j], x);
        (*isum)[j * TT + t] += (*sc)[j].x * s.x + (*sc)[j].y * s.y;
    }
}

// Q4_K/Q5_K sub-block g, token t: the scaled sum and the min-weighted
// activation sum.
fn tok45(
    inv: Inv,
    isum: ptr<function, array<i32, RPL * TT>>,
    msum: ptr<function, array<i32, RPL * TT>>,
    q: ptr<function, array<array<u32, 8>, RPL>>,
    sm: ptr<function, array<vec2<i32>, RPL>>,
    b: u32,
    g: u32,
    t0: u32,
    t: u32,
) {
    let ab = ((t0 + t) * p.span + b) * AK_WORDS;
    let x = act8(inv, ab + 8u * g);
    let bsum = bitcast<i32>(a[ab + 65u + g]);
    for (var j = 0u; j < RPL; j++) {
        let s = dot32((*q)[j], x);
        (*isum)[j * TT + t] += (*sm)[j].x * (s.x + s.y);
        (*msum)[j * TT + t] += (*sm)[j].y * bsum;
    }
}

// Super-block b's sums of token t into the running totals.
fn tokd(
    acc: ptr<function, array<f32, RPL * TT>>,
    isum: ptr<function, array<i32, RPL * TT>>,
    msum: ptr<function, array<i32, RPL * TT>>,
    dw: ptr<function, array<f32, RPL>>,
    dmw: ptr<function, array<f32, RPL>>,
    b: u32,
    t0: u32,
    t: u32,
) {
    let da = bitcast<f32>(a[((t0 + t) * p.span + b) * AK_WORDS + 64u]);
    for (var j = 0u; j < RPL; j++) {
        let i = j * TT + t;
        (*acc)[i] = (*acc)[i] + (opq(((*dw)[j] * da) * f32((*isum)[i])) - opq(((*dmw)[j] * da) * f32((*msum)[i])));
    }
}

@compute @workgroup_size(WG)
fn main(inv: Inv) {
    let r0 = ((inv.wid.x + inv.wid.y * inv.nwg.x) * WG + inv.lid) * RPL;
    let t0 = p.t_base + inv.wid.z * TT;
    var acc: array<f32, RPL * TT>;
    var ro: array<u32, RPL>;
    for (var j = 0u; j < RPL; j++) {
        ro[j] = min(r0 + j, p.rows - 1u) * p.row_bytes;
    }
    for (var b = 0u; b < p.span; b++) {
        var isum: array<i32, RPL * TT>;
        var msum: array<i32, RPL * TT>;
        var dw: array<f32, RPL>;
        var dmw: array<f32, RPL>;
        for (var j = 0u; j < RPL; j++) {
            let o = ro[j] + b * block_bytes();
            if (WT == T_Q6_K) {
                let dword = w[(o + 208u) >> 2u];
                dw[j] = f16_to_f32(select(dword & 0xFFFFu, dword >> 16u, (o & 2u) != 0u));
                dmw[j] = 0.0;
            } else {
                let dd = w[o >> 2u];
                dw[j] = f16_to_f32(dd & 0xFFFFu);
                dmw[j] = f16_to_f32(dd >> 16u);
            }
        }
        if (WT == T_Q6_K) {
            // Sub-block g = 4n + jj + 2h: low bits from nibble h of the
            // 32 ql bytes at 64n + 32jj, high bits 2(jj + 2h) of the qh
            // bytes at 128 + 32n; 16 signed scales at 192.
            for (var n = 0u; n < 2u; n++) {
                var qh: array<array<u32, 8>, RPL>;
                var scl: array<vec2<u32>, RPL>;
                for (var j = 0u; j < RPL; j++) {
                    let o = ro[j] + b * 210u;
                    qh[j] = words8(o + 128u + 32u * n);
                    // Scale bytes of sub-blocks 4n .. 4n + 3 (eight bytes),
                    // as two words.
                    scl[j] = words2(o + 192u + 8u * n);
                }
                for (var jj = 0u; jj < 2u; jj++) {
                    var ql: array<array<u32, 8>, RPL>;
                    for (var j = 0u; j < RPL; j++) {
                        ql[j] = words8(ro[j] + b * 210u + 64u * n + 32u * jj);
                    }
                    for (var h = 0u; h < 2u; h++) {
                        let jq = jj + 2u * h;
                        let g = 4u * n + jq;
                        var q: array<array<u32, 8>, RPL>;
                        var sc: array<vec2<i32>, RPL>;
                        for (var j = 0u; j < RPL; j++) {
                            for (var k = 0u; k < 8u; k++) {
                                let lo4 = (ql[j][k] >> (4u * h)) & 0x0F0F0F0Fu;
                                let hi2 = (qh[j][k] >> (2u * jq)) & 0x03030303u;
                                q[j][k] = s6(lo4 | (hi2 << 4u));
                            }
                            let sw = scl[j][jq >> 1u] >> (16u * (jq & 1u));
                            sc[j] = vec2<i32>(
                                (i32(sw & 0xFFu) << 24u) >> 24u,
                                (i32((sw >> 8u) & 0xFFu) << 24u) >> 24u,
                            );
                        }
                        // @repeat TT: tok6(inv, &isum, &q, &sc, b, g, t0, @u);
                    }
                }
            }
        } else {
            // Q4_K / Q5_K: sub-block g is the low (g even) or high nibbles
            // of the 32 qs bytes at 32 (g / 2), and for Q5_K bit g of each
            // of the 32 qh bytes.
            var scw: array<vec3<u32>, RPL>;
            var qh: array<array<u32, 8>, RPL>;
            for (var j = 0u; j < RPL; j++) {
                let o = ro[j] + b * block_bytes();
                scw[j] = vec3<u32>(w[(o >> 2u) + 1u], w[(o >> 2u) + 2u], w[(o >> 2u) + 3u]);
                if (WT == T_Q5_K) {
                    qh[j] = words8(o + 16u);
                }
            }
            let qs_at = select(16u, 48u, WT == T_Q5_K);
            for (var gp = 0u; gp < 4u; gp++) {
                var raw: array<array<u32, 8>, RPL>;
                for (var j = 0u; j < RPL; j++) {
                    raw[j] = words8(ro[j] + b * block_bytes() + qs_at + 32u * gp);
                }
                for (var h = 0u; h < 2u; h++) {
                    let g = 2u * gp + h;
                    var q: array<array<u32, 8>, RPL>;
                    var sm: array<vec2<i32>, RPL>;
                    for (var j = 0u; j < RPL; j++) {
                        for (var k = 0u; k < 8u; k++) {
                            var v = (raw[j][k] >> (4u * h)) & 0x0F0F0F0Fu;
                            if (WT == T_Q5_K) {
                                v = v | (((qh[j][k] >> g) & 0x01010101u) << 4u);
                            }
                            q[j][k] = v;
                        }
                        sm[j] = k_scale_min(scw[j], g);
                    }
                    // @repeat TT: tok45(inv, &isum, &msum, &q, &sm, b, g, t0, @u);
                }
            }
        }
        // @repeat TT: tokd(&acc, &isum, &msum, &dw, &dmw, b, t0, @u);
    }
    for (var j = 0u; j < RPL; j++) {
        for (var t = 0u; t < TT; t++) {
            let r = r0 + j;
            let tk = t0 + t;
            if (r < p.rows && tk < p.n_tok) {
                out[tk * p.out_stride + p.row0 + r] = acc[j * TT + t];
            }
        }
    }
}
