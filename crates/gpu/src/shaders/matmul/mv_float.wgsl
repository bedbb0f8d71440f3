// Products of F32 or F16 weights (WT) with f32 activations (binding a,
// as bits).
//
// Each lane computes RPL whole rows for TT tokens (set by the host). A
// row's products are summed as the CPU's dot_f32 sums them: element i
// into partial i % 8, the partials combined as
// ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)), an order that
// depends on nothing but the row and the token. No lane waits for
// another: the kernel has no barrier.

// Half e (0..7) of eight f16 values starting at byte 2 of c[0] when odd,
// at c[0] otherwise.
fn half_at(c: ptr<function, array<u32, 5>>, e: u32, odd: bool) -> f32 {
    let even = ((*c)[e >> 1u] >> ((e & 1u) * 16u)) & 0xFFFFu;
    let e1 = e + 1u;
    let shifted = ((*c)[e1 >> 1u] >> ((e1 & 1u) * 16u)) & 0xFFFFu;
    return f16_to_f32(select(even, shifted, odd));
}

// Weights 8s .. 8s + 7 of the row at byte ro.
fn wrow8(ro: u32, s: u32) -> array<f32, 8> {
    var v: array<f32, 8>;
    if (WT == T_F32) {
        let base = (ro >> 2u) + 8u * s;
        for (var k = 0u; k < 8u; k++) {
            v[k] = bitcast<f32>(w[base + k]);
        }
    } else {
        // F16 rows of an odd length start half way into a word.
        let o = ro + 16u * s;
        var c: array<u32, 5>;
        for (var k = 0u; k < 5u; k++) {
            c[k] = w[(o >> 2u) + k];
        }
        let odd = (o & 2u) != 0u;
        for (var k = 0u; k < 8u; k++) {
            v[k] = half_at(&c, k, odd);
        }
    }
    return v;
}

// Token t of the tile: values 8s .. 8s + n of every row of the lane times
// the token's, into the partial sums. The host writes one call per token
// (see mv_legacy.wgsl).
fn tok(
    inv: Inv,
    lo: ptr<function, array<vec4<f32>, RPL * TT>>,
    hi: ptr<function, array<vec4<f32>, RPL * TT>>,
    wv: ptr<function, array<array<f32, 8>, RPL>>,
    s: u32,
    n: u32,
    t0: u32,
    t: u32,
) {
    let keep_lo = vec4<bool>(0u < n, 1u < n, 2u < n, 3u < n);
    let keep_hi = vec4<bool>(4u < n, 5u < n, 6u < n, 7u < n);
    let x = act8(inv, (t0 + t) * p.span + 8u * s);
    let xl = vec4<f32>(bitcast<f32>(x[0]), bitcast<f32>(x[1]), bitcast<f32>(x[2]), bitcast<f32>(x[3]));
    let xh = vec4<f32>(bitcast<f32>(x[4]), bitcast<f32>(x[5]), bitcast<f32>(x[6]), bitcast<f32>(x[7]));
    for (var j = 0u; j < RPL; j++) {
        let i = j * TT + t;
        let w = (*wv)[j];
        let pl = vec4<f32>(w[0], w[1], w[2], w[3]) * xl;
        let ph = vec4<f32>(w[4], w[5], w[6], w[7]) * xh;
        (*lo)[i] = select((*lo)[i], (*lo)[i] + pl, keep_lo);
        (*hi)[i] = select((*hi)[i], (*hi)[i] + ph, keep_hi);
    }
}

@compute @workgroup_size(WG)
fn main(inv: Inv) {
    let r0 = ((inv.wid.x + inv.wid.y * inv.nwg.x) * WG + inv.lid) * RPL;
    let t0 = p.t_base + inv.wid.z * TT;
    // Partials 0..3 and 4..7 of each (row, token).
    var lo: array<vec4<f32>, RPL * TT>;
    var hi: array<vec4<f32>, RPL * TT>;
    var ro: array<u32, RPL>;
    for (var j = 0u; j < RPL; j++) {
        ro[j] = min(r0 + j, p.rows - 1u) * p.row_bytes;
    }
    let nfull = p.span / 8u;
    let rem = p.span % 8u;
    // The last step covers the rem values after the full ones (its other
    // lanes add nothing).
    let steps = nfull + select(0u, 1u, rem != 0u);
    for (var s = 0u; s < steps; s++) {
        let n = select(8u, rem, s == nfull);
        var wv: array<array<f32, 8>, RPL>;
        for (var j = 0u; j < RPL; j++) {
            wv[j] = wrow8(ro[j], s);
        }
        // @repeat TT: tok(inv, &lo, &hi, &wv, s, n, t0, @u);
    }
    for (var j = 0u; j < RPL; j++) {
        for (var t = 0u; t < TT; t++) {
            let i = j * TT + t;
            let r = r0 + j;
            let tk = t0 + t;
            if (r < p.rows && tk < p.n_tok) {
                let l = lo[i];
                let h = hi[i];
                out[tk * p.out_stride + p.row0 + r] = ((l.x + h.x) + (l.z + h.z)) + ((l.y + h.y) + (l.w + h.w));
            }
        }
    }
}
