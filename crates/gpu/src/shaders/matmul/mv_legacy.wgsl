// Products of the legacy 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0; WT picks one) with Q8_0 / Q8_1 activations from the quantize
// kernel: per block the exact i32 sum of the quant products (as packed
// 4 x i8 dot products), scaled in f32 as the CPU does.
//
// A workgroup of 64 lanes computes ROWS_WG rows for up to TT tokens.
// Lane l of a row takes blocks l, l + LANES, ... in order, one f32 sum
// per token, and the LANES sums of a row are added by a fixed tree. Each
// (token, row) result is so summed in the same order whatever the number
// of tokens, which keeps a row's result independent of its batch; the
// tokens of a workgroup share each decoded weight block.

struct Params {
    rows: u32,      // rows of this weight chunk
    nb: u32,        // blocks per row
    row_bytes: u32,
    n_tok: u32,     // tokens in the whole product
    out_stride: u32, // values per output row (all the weight's rows)
    row0: u32,      // the chunk's first row in the whole weight
    t_base: u32,    // the first token of this dispatch
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const LANES: u32 = 32u;
const ROWS_WG: u32 = 2u;
const TT: u32 = 8u;

var<workgroup> red: array<f32, 512>; // TT x 64

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
            var q: array<u32, 8>;
            var dw: f32;
            var mw = 0.0;
            if (WT == T_Q4_0) {
                let o = r * p.row_bytes + b * 18u;
                dw = ldh(o);
                for (var k = 0u; k < 4u; k = k + 1u) {
                    let raw = ld(o + 2u + 4u * k);
                    q[k] = s4(raw & 0x0F0F0F0Fu);
                    q[k + 4u] = s4((raw >> 4u) & 0x0F0F0F0Fu);
                }
            } else if (WT == T_Q4_1) {
                let o = r * p.row_bytes + b * 20u;
                dw = ldh(o);
                mw = ldh(o + 2u);
                for (var k = 0u; k < 4u; k = k + 1u) {
                    let raw = ld(o + 4u + 4u * k);
                    q[k] = raw & 0x0F0F0F0Fu;
                    q[k + 4u] = (raw >> 4u) & 0x0F0F0F0Fu;
                }
            } else if (WT == T_Q5_0) {
                let o = r * p.row_bytes + b * 22u;
                dw = ldh(o);
                let qh = ld(o + 2u);
                for (var k = 0u; k < 4u; k = k + 1u) {
                    let raw = ld(o + 6u + 4u * k);
                    q[k] = s5((raw & 0x0F0F0F0Fu) | spread4(qh >> (4u * k)));
                    q[k + 4u] = s5(((raw >> 4u) & 0x0F0F0F0Fu) | spread4(qh >> (16u + 4u * k)));
                }
            } else if (WT == T_Q5_1) {
                let o = r * p.row_bytes + b * 24u;
                dw = ldh(o);
                mw = ldh(o + 2u);
                let qh = ld(o + 4u);
                for (var k = 0u; k < 4u; k = k + 1u) {
                    let raw = ld(o + 8u + 4u * k);
                    q[k] = (raw & 0x0F0F0F0Fu) | spread4(qh >> (4u * k));
                    q[k + 4u] = ((raw >> 4u) & 0x0F0F0F0Fu) | spread4(qh >> (16u + 4u * k));
                }
            } else {
                // Q8_0
                let o = r * p.row_bytes + b * 34u;
                dw = ldh(o);
                for (var k = 0u; k < 8u; k = k + 1u) {
                    q[k] = ld(o + 2u + 4u * k);
                }
            }
            for (var t = 0u; t < TT; t = t + 1u) {
                if (t < nt) {
                    let ab = ((t0 + t) * p.nb + b) * A32_WORDS;
                    var isum = 0;
                    for (var k = 0u; k < 8u; k = k + 1u) {
                        isum = isum + dot4I8Packed(q[k], a[ab + k]);
                    }
                    let da = bitcast<f32>(a[ab + 8u]);
                    var v = (dw * da) * f32(isum);
                    if (WT == T_Q4_1 || WT == T_Q5_1) {
                        v = v + mw * bitcast<f32>(a[ab + 9u]);
                    }
                    acc[t] = acc[t] + v;
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
