// Row lookup: out[i] = w[ids[i]] dequantized to f32 (WT picks the type),
// one lane per output value. Each formula is the CPU's dequantize_* one,
// operation for operation, so the values are bit-identical. Where the CPU
// computes a * b + c, the product passes through `opaque` so that the
// compiler cannot fuse it into an FMA (which would round once, not twice).
//
// A weight split into chunks gets one dispatch per chunk, each writing the
// ids its rows hold; the first chunk's dispatch also writes zeros for ids
// outside the weight, so nothing reads out of bounds.

struct Params {
    n_ids: u32,
    cols: u32,
    row_bytes: u32,
    row0: u32,      // the chunk's first row
    rows: u32,      // rows of the chunk
    total: u32,     // rows of the whole weight
    first: u32,     // 1 for the first chunk's dispatch
    zero: u32,      // always 0; the compiler cannot know it
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn opaque(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
}

// Element j of chunk row r.
fn deq(r: u32, j: u32) -> f32 {
    let ro = r * p.row_bytes;
    if (WT == T_F32) {
        return bitcast<f32>(w[(ro >> 2u) + j]);
    }
    if (WT == T_F16) {
        return ldh(ro + 2u * j);
    }
    if (WT == T_Q4_K || WT == T_Q5_K || WT == T_Q6_K) {
        let e = j % 256u;
        if (WT == T_Q6_K) {
            let o = ro + (j / 256u) * 210u;
            let d = ldh(o + 208u);
            let half = e / 128u;
            let l = e % 32u;
            let quad = (e % 128u) / 32u;
            let qlb = ld8(o + 64u * half + l + 32u * (quad & 1u));
            let qhb = ld8(o + 128u + 32u * half + l);
            let q = i32(((qlb >> (4u * (quad >> 1u))) & 0x0Fu) | (((qhb >> (2u * quad)) & 3u) << 4u)) - 32;
            let sc = ld8s(o + 192u + 8u * half + l / 16u + 2u * quad);
            return d * f32(sc) * f32(q);
        }
        var o: u32;
        var qs: u32;
        if (WT == T_Q4_K) {
            o = ro + (j / 256u) * 144u;
            qs = o + 16u;
        } else {
            o = ro + (j / 256u) * 176u;
            qs = o + 48u;
        }
        let c = e / 64u;
        let hi = (e % 64u) / 32u;
        let l = e % 32u;
        let sm = k_scale_min(o + 4u, 2u * c + hi);
        let d1 = ldh(o) * f32(sm.x);
        let m1 = ldh(o + 2u) * f32(sm.y);
        var q = (ld8(qs + 32u * c + l) >> (4u * hi)) & 0x0Fu;
        if (WT == T_Q5_K) {
            if ((ld8(o + 16u + l) & (1u << (2u * c + hi))) != 0u) {
                q = q + 16u;
            }
        }
        return opaque(d1 * f32(q)) - m1;
    }
    // The legacy blocks of 32: element e of block b.
    let b = j / 32u;
    let e = j % 32u;
    let jj = e % 16u;
    let sh = 4u * (e / 16u);
    if (WT == T_Q4_0) {
        let o = ro + b * 18u;
        let q = (ld8(o + 2u + jj) >> sh) & 0x0Fu;
        return f32(i32(q) - 8) * ldh(o);
    }
    if (WT == T_Q4_1) {
        let o = ro + b * 20u;
        let q = (ld8(o + 4u + jj) >> sh) & 0x0Fu;
        return opaque(f32(q) * ldh(o)) + ldh(o + 2u);
    }
    if (WT == T_Q5_0) {
        let o = ro + b * 22u;
        let h = ((ld(o + 2u) >> e) & 1u) << 4u;
        let q = ((ld8(o + 6u + jj) >> sh) & 0x0Fu) | h;
        return f32(i32(q) - 16) * ldh(o);
    }
    if (WT == T_Q5_1) {
        let o = ro + b * 24u;
        let h = ((ld(o + 4u) >> e) & 1u) << 4u;
        let q = ((ld8(o + 8u + jj) >> sh) & 0x0Fu) | h;
        return opaque(f32(q) * ldh(o)) + ldh(o + 2u);
    }
    // Q8_0
    let o = ro + b * 34u;
    return f32(ld8s(o + 2u + e)) * ldh(o);
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let gi = (wid.x + wid.y * nwg.x) * 256u + lid;
    let i = gi / p.cols;
    if (i >= p.n_ids) {
        return;
    }
    let j = gi - i * p.cols;
    let id = ids[i];
    if (id >= i32(p.row0) && id < i32(p.row0 + p.rows)) {
        out[gi] = deq(u32(id) - p.row0, j);
    } else if (p.first != 0u && (id < 0 || id >= i32(p.total))) {
        out[gi] = 0.0;
    }
}
