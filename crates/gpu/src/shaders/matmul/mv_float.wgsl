// Products of F32 or F16 weights (WT) with f32 activations, f32 FMA sums.
//
// A workgroup of 64 lanes computes ROWS_WG rows for up to TT tokens. Lane
// l of a row takes elements l, l + LANES, ... in order (neighbouring lanes
// read neighbouring weights), one sum per token, and a fixed tree adds a
// row's LANES sums: the same order for a (token, row) whatever the number
// of tokens.

struct Params {
    rows: u32,       // rows of this weight chunk
    cols: u32,
    row_bytes: u32,
    n_tok: u32,      // tokens in the whole product
    out_stride: u32, // values per output row (all the weight's rows)
    row0: u32,       // the chunk's first row in the whole weight
    t_base: u32,     // the first token of this dispatch
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const LANES: u32 = 32u;
const ROWS_WG: u32 = 2u;
const TT: u32 = 8u;

var<workgroup> red: array<f32, 512>; // TT x 64

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
        let o = r * p.row_bytes;
        for (var i = lane; i < p.cols; i = i + LANES) {
            var wv: f32;
            if (WT == T_F32) {
                wv = bitcast<f32>(w[(o >> 2u) + i]);
            } else {
                let at = o + 2u * i;
                wv = f16_to_f32((w[at >> 2u] >> ((at & 2u) * 8u)) & 0xFFFFu);
            }
            for (var t = 0u; t < TT; t = t + 1u) {
                if (t < nt) {
                    acc[t] = fma(wv, x[(t0 + t) * p.cols + i], acc[t]);
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
