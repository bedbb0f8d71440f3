// attention.wgsl's attention without barriers, for devices with subgroups
// of at least 8 invocations: eight lanes per (query row, query head), HD
// (the head size, a multiple of 16) set by the host. The window is walked
// in blocks of 64 keys from its first cell, as attention.wgsl walks it,
// and every sum is taken in its order: lane l scores keys l, l + 8, ...
// of a block (each score in the CPU's dot-product order) and sums their
// weights, which is attention.wgsl's partial l of the block's sum; the
// block's max and the eight partials are gathered by shuffles; each lane
// then accumulates HD / 8 output dimensions over the block's keys in
// window order. A row's result depends only on its own window.

const DPL: u32 = HD / 8u;

// Elements 8i .. 8i + 7 of q·k into the eight partial sums.
fn score_part(a: ptr<function, array<f32, 8>>, qv: ptr<function, array<vec4<f32>, HD / 4u>>, cell: u32, ko: u32, i: u32) {
    let q0 = (*qv)[2u * i];
    let q1 = (*qv)[2u * i + 1u];
    let k0 = k_at2(cell, ko + 8u * i);
    let k1 = k_at2(cell, ko + 8u * i + 2u);
    let k2 = k_at2(cell, ko + 8u * i + 4u);
    let k3 = k_at2(cell, ko + 8u * i + 6u);
    (*a)[0] += q0.x * k0.x;
    (*a)[1] += q0.y * k0.y;
    (*a)[2] += q0.z * k1.x;
    (*a)[3] += q0.w * k1.y;
    (*a)[4] += q1.x * k2.x;
    (*a)[5] += q1.y * k2.y;
    (*a)[6] += q1.z * k3.x;
    (*a)[7] += q1.w * k3.y;
}

// scale * q·k for cell `cell`, kv head starting at `ko`: eight partial
// sums, partial l taking elements l, l + 8, ..., combined as the CPU's
// dot_f32 combines them. (Repeated statements rather than loops: see
// expand_repeats in kernel.rs.)
fn score(qv: ptr<function, array<vec4<f32>, HD / 4u>>, cell: u32, ko: u32) -> f32 {
    var a: array<f32, 8>;
    // @repeat HD8: score_part(&a, qv, cell, ko, @u);
    return P.scale * (((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])));
}

// Key j of a block (its weight pj, its cell cj, `on` when it is in the
// window) into this lane's output dimensions o, from dimension d0 of the
// KV head.
fn vkey(o: ptr<function, array<f32, DPL>>, pj: f32, cj: u32, d0: u32, on: bool) {
    // @repeat DPL2: vpair(o, pj, cj, d0, on, @u);
}

fn vpair(o: ptr<function, array<f32, DPL>>, pj: f32, cj: u32, d0: u32, on: bool, k2: u32) {
    let k = 2u * k2;
    let vv = v_at2(cj, d0 + k);
    (*o)[k] = select((*o)[k], (*o)[k] + pj * vv.x, on);
    (*o)[k + 1u] = select((*o)[k + 1u], (*o)[k + 1u] + pj * vv.y, on);
}

// Key 8kk + src of the block, which lane src of the eight holds.
fn vsrc(
    o: ptr<function, array<f32, DPL>>,
    pw: ptr<function, array<f32, 8>>,
    c: ptr<function, array<u32, 8>>,
    kk: u32,
    src: u32,
    sl: u32,
    cnt: u32,
    d0: u32,
) {
    let lane_j = (sl & ~7u) + src;
    let pj = subgroupShuffle((*pw)[kk], lane_j);
    let cj = subgroupShuffle((*c)[kk], lane_j);
    vkey(o, pj, cj, d0, 8u * kk + src < cnt);
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_invocation_id) sl: u32,
) {
    let lane = sl & 7u;
    let id = (wg.x + wg.y * nwg.x) * 8u + (sg * sg_size + sl) / 8u;
    let total = P.n_rows * P.n_head;
    // Lanes past the last (row, head) redo the last one and store nothing:
    // every lane takes part in the shuffles.
    let idc = min(id, total - 1u);
    let t = idc / P.n_head;
    let h = idc % P.n_head;
    let ko = (h / (P.n_head / P.n_head_kv)) * HD;
    let qo = (t * P.n_head + h) * HD;
    var qv: array<vec4<f32>, HD / 4u>;
    for (var d = 0u; d < HD / 4u; d++) {
        qv[d] = vec4<f32>(q[qo + 4u * d], q[qo + 4u * d + 1u], q[qo + 4u * d + 2u], q[qo + 4u * d + 3u]);
    }
    let r = window(t);
    let n = r.y - r.x;
    let nblk = (n + 63u) / 64u;
    // The subgroup walks the most blocks any of its rows has; a row past
    // its own last block keeps its state.
    let nblk_all = subgroupMax(nblk);
    var m = 0.0;
    var l = 0.0;
    var acc: array<f32, DPL>;
    for (var b = 0u; b < nblk_all; b++) {
        let live = b < nblk;
        let at = r.x + b * 64u;
        let cnt = select(0u, min(64u, r.y - min(at, r.y)), live);
        var s: array<f32, 8>;
        var c: array<u32, 8>;
        // Groups of eight keys the subgroup's rows have in this block.
        let groups = (subgroupMax(cnt) + 7u) / 8u;
        // -inf: the max of the block's scores, as attention.wgsl's.
        var bmax = bitcast<f32>(0xff800000u);
        for (var kk = 0u; kk < groups; kk++) {
            let j = 8u * kk + lane;
            if (j < cnt) {
                let cell = u32(clamp(cells[at + j], 0, i32(P.n_ctx) - 1));
                c[kk] = cell;
                s[kk] = score(&qv, cell, ko);
                bmax = max(bmax, s[kk]);
            }
        }
        bmax = max(bmax, subgroupShuffleXor(bmax, 1u));
        bmax = max(bmax, subgroupShuffleXor(bmax, 2u));
        bmax = max(bmax, subgroupShuffleXor(bmax, 4u));
        var alpha = 0.0;
        var m_new = bmax;
        if (b > 0u) {
            m_new = max(m, bmax);
            alpha = exp_f32(m - m_new);
        }
        // This lane's weights and its partial of the block's sum.
        var pw: array<f32, 8>;
        var ps = 0.0;
        for (var kk = 0u; kk < 8u; kk++) {
            if (8u * kk + lane < cnt) {
                pw[kk] = exp_f32(s[kk] - m_new);
                ps += pw[kk];
            }
        }
        let p0 = subgroupShuffle(ps, (sl & ~7u));
        let p1 = subgroupShuffle(ps, (sl & ~7u) + 1u);
        let p2 = subgroupShuffle(ps, (sl & ~7u) + 2u);
        let p3 = subgroupShuffle(ps, (sl & ~7u) + 3u);
        let p4 = subgroupShuffle(ps, (sl & ~7u) + 4u);
        let p5 = subgroupShuffle(ps, (sl & ~7u) + 5u);
        let p6 = subgroupShuffle(ps, (sl & ~7u) + 6u);
        let p7 = subgroupShuffle(ps, (sl & ~7u) + 7u);
        let bsum = ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7));
        var o: array<f32, DPL>;
        // @repeat DPL: o[@u] = acc[@u] * alpha;
        // The block's keys in window order: key 8kk + src is lane src's.
        for (var kk = 0u; kk < groups; kk++) {
            for (var src = 0u; src < 8u; src++) {
                vsrc(&o, &pw, &c, kk, src, sl, cnt, ko + lane * DPL);
            }
        }
        if (live) {
            l = l * alpha + bsum;
            m = m_new;
            acc = o;
        }
    }
    let ms = sink_fold(h, n, &m, &l);
    for (var k = 0u; k < DPL; k++) {
        acc[k] = acc[k] * ms;
    }
    // An empty window gives zeros, as on the CPU.
    var inv = 0.0;
    if (n > 0u) {
        inv = 1.0 / l;
    }
    if (id < total) {
        for (var k = 0u; k < DPL; k++) {
            out[qo + lane * DPL + k] = acc[k] * inv;
        }
    }
}
