// Products of the K-quants (Q4_K, Q5_K, Q6_K; WT picks one) with Q8_K
// activations: per super-block of 256 the exact i32 sums of the CPU's
// dot_q4_k / dot_q5_k / dot_q6_k (scaled quant sum, and for Q4_K/Q5_K the
// min-weighted activation sum), combined in f32 as d * isum - dmin * msum.
//
// A workgroup of 64 lanes computes ROWS_WG rows for up to TT tokens. Lane
// l of a row takes super-blocks l, l + LANES, ... in order, one f32 sum
// per token, and a fixed tree adds the LANES sums of a row: the same order
// for a (token, row) whatever the number of tokens. A lane decodes 32
// weights at a time and dots them with every token of its workgroup.

struct Params {
    rows: u32,       // rows of this weight chunk
    nb: u32,         // super-blocks per row
    row_bytes: u32,
    n_tok: u32,      // tokens in the whole product
    out_stride: u32, // values per output row (all the weight's rows)
    row0: u32,       // the chunk's first row in the whole weight
    t_base: u32,     // the first token of this dispatch
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const LANES: u32 = 8u;
const ROWS_WG: u32 = 8u;
const TT: u32 = 8u;

var<workgroup> red: array<f32, 512>; // TT x 64

// Four 6-bit values minus 32, as signed bytes.
fn s6(v: u32) -> u32 {
    let x = v ^ 0x20202020u;
    return x | ((x & 0x20202020u) * 6u);
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = (wid.x + wid.y * nwg.x) * ROWS_WG + lid / LANES;
    let lane = lid % LANES;
    let t0 = p.t_base + wid.z * TT;
    let nt = min(TT, p.n_tok - t0);
    var acc: array<f32, 8>;
    for (var t = 0u; t < TT; t = t + 1u) {
        acc[t] = 0.0;
    }
    if (r < p.rows) {
        for (var b = lane; b < p.nb; b = b + LANES) {
            var isum: array<i32, 8>;
            var msum: array<i32, 8>;
            for (var t = 0u; t < TT; t = t + 1u) {
                isum[t] = 0;
                msum[t] = 0;
            }
            var dw: f32;
            var dmw = 0.0;
            if (WT == T_Q6_K) {
                let o = r * p.row_bytes + b * 210u;
                dw = ldh(o + 208u);
                for (var g = 0u; g < 8u; g = g + 1u) {
                    // Elements 32g.. : half n, quarter j of the CPU's layout.
                    let n = g / 4u;
                    let j = g % 4u;
                    let ql = o + 64u * n + 32u * (j & 1u);
                    let qh = o + 128u + 32u * n;
                    let nib = 4u * (j >> 1u);
                    var q: array<u32, 8>;
                    for (var k = 0u; k < 8u; k = k + 1u) {
                        let lo = (ld(ql + 4u * k) >> nib) & 0x0F0F0F0Fu;
                        let hi = (ld(qh + 4u * k) >> (2u * j)) & 0x03030303u;
                        q[k] = s6(lo | (hi << 4u));
                    }
                    let sc0 = ld8s(o + 192u + 2u * g);
                    let sc1 = ld8s(o + 193u + 2u * g);
                    for (var t = 0u; t < TT; t = t + 1u) {
                        if (t < nt) {
                            let ab = ((t0 + t) * p.nb + b) * AK_WORDS + 8u * g;
                            var s0 = 0;
                            var s1 = 0;
                            for (var k = 0u; k < 4u; k = k + 1u) {
                                s0 = s0 + dot4I8Packed(q[k], a[ab + k]);
                                s1 = s1 + dot4I8Packed(q[k + 4u], a[ab + k + 4u]);
                            }
                            isum[t] = isum[t] + sc0 * s0 + sc1 * s1;
                        }
                    }
                }
            } else {
                var o: u32;
                var qs: u32;
                if (WT == T_Q4_K) {
                    o = r * p.row_bytes + b * 144u;
                    qs = o + 16u;
                } else {
                    o = r * p.row_bytes + b * 176u;
                    qs = o + 48u;
                }
                let dd = ld(o);
                dw = f16_to_f32(dd & 0xFFFFu);
                dmw = f16_to_f32(dd >> 16u);
                // Q5_K's fifth bits: bit g of byte l is element l of
                // sub-block g.
                var qh: array<u32, 8>;
                if (WT == T_Q5_K) {
                    for (var k = 0u; k < 8u; k = k + 1u) {
                        qh[k] = ld(o + 16u + 4u * k);
                    }
                }
                for (var g = 0u; g < 8u; g = g + 1u) {
                    // Sub-block g: the low (g even) or high nibbles of
                    // 32 bytes, and for Q5_K bit g of each qh byte.
                    let base = qs + 32u * (g / 2u);
                    let nib = 4u * (g & 1u);
                    var q: array<u32, 8>;
                    for (var k = 0u; k < 8u; k = k + 1u) {
                        var v = (ld(base + 4u * k) >> nib) & 0x0F0F0F0Fu;
                        if (WT == T_Q5_K) {
                            v = v | (((qh[k] >> g) & 0x01010101u) << 4u);
                        }
                        q[k] = v;
                    }
                    let sm = k_scale_min(o + 4u, g);
                    let sc = i32(sm.x);
                    let m = i32(sm.y);
                    for (var t = 0u; t < TT; t = t + 1u) {
                        if (t < nt) {
                            let ab = ((t0 + t) * p.nb + b) * AK_WORDS;
                            var s = 0;
                            for (var k = 0u; k < 8u; k = k + 1u) {
                                s = s + dot4I8Packed(q[k], a[ab + 8u * g + k]);
                            }
                            isum[t] = isum[t] + sc * s;
                            msum[t] = msum[t] + m * bitcast<i32>(a[ab + 65u + g]);
                        }
                    }
                }
            }
            for (var t = 0u; t < TT; t = t + 1u) {
                if (t < nt) {
                    let da = bitcast<f32>(a[((t0 + t) * p.nb + b) * AK_WORDS + 64u]);
                    acc[t] = acc[t] + ((dw * da) * f32(isum[t]) - (dmw * da) * f32(msum[t]));
                }
            }
        }
    }
    for (var t = 0u; t < TT; t = t + 1u) {
        red[t * 64u + lid] = acc[t];
    }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            for (var t = 0u; t < TT; t = t + 1u) {
                red[t * 64u + lid] = red[t * 64u + lid] + red[t * 64u + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && r < p.rows) {
        for (var t = 0u; t < TT; t = t + 1u) {
            if (t < nt) {
                out[(t0 + t) * p.out_stride + p.row0 + r] = red[t * 64u + lid];
            }
        }
    }
}
