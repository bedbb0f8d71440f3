// Causal GQA attention over explicit windows of cells: one workgroup per
// (query row, query head). The window is walked in blocks of 64 keys from
// its first cell: thread j scores key j of the block, every thread takes
// the block's max and sum in the same sequential order, and each thread
// accumulates its own output dimensions over the block's keys in window
// order, rescaling by exp(m_old - m_new) when the max grows (online
// softmax). Every order depends only on the query's own window, so a row
// gets the same bits in any batch.

const WG: u32 = 64u;
// Largest head; each thread owns PER of its output dimensions.
const MAX_HD: u32 = 512u;
const PER: u32 = 8u;

var<workgroup> q_sh: array<f32, MAX_HD>;
var<workgroup> s_sh: array<f32, WG>;
var<workgroup> p_sh: array<f32, WG>;
var<workgroup> c_sh: array<u32, WG>;
var<workgroup> range_sh: vec2<u32>;

// scale * q·k for cell `cell`, kv head starting at `ko`: eight partial
// sums, lane l taking elements l, l + 8, ..., combined as the CPU's
// dot_f32 combines them.
fn score(cell: u32, ko: u32, hd: u32) -> f32 {
    var a: array<f32, 8>;
    for (var i = 0u; i < hd; i += 8u) {
        for (var l = 0u; l < 8u; l++) {
            if (i + l < hd) {
                a[l] += q_sh[i + l] * k_at(cell, ko + i + l);
            }
        }
    }
    return P.scale * (((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])));
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = wg.x + wg.y * nwg.x;
    let t = id / P.n_head;
    let h = id % P.n_head;
    if (t >= P.n_rows) {
        return;
    }
    let hd = P.head_dim;
    let ko = (h / (P.n_head / P.n_head_kv)) * hd;
    let qo = (t * P.n_head + h) * hd;
    for (var d = lid; d < hd; d += WG) {
        q_sh[d] = q[qo + d];
    }
    if (lid == 0u) {
        range_sh = window(t);
    }
    // Also the barrier that publishes q_sh.
    let r = workgroupUniformLoad(&range_sh);
    let n = r.y - r.x;
    var m = 0.0;
    var l = 0.0;
    var acc: array<f32, PER>;
    let nblk = (n + WG - 1u) / WG;
    for (var b = 0u; b < nblk; b++) {
        let at = r.x + b * WG;
        let cnt = min(WG, r.y - at);
        if (lid < cnt) {
            let cell = u32(clamp(cells[at + lid], 0, i32(P.n_ctx) - 1));
            c_sh[lid] = cell;
            s_sh[lid] = score(cell, ko, hd);
        }
        workgroupBarrier();
        var bmax = s_sh[0];
        for (var j = 1u; j < cnt; j++) {
            bmax = max(bmax, s_sh[j]);
        }
        var alpha = 0.0;
        var m_new = bmax;
        if (b > 0u) {
            m_new = max(m, bmax);
            alpha = exp_f32(m - m_new);
        }
        if (lid < cnt) {
            p_sh[lid] = exp_f32(s_sh[lid] - m_new);
        }
        workgroupBarrier();
        // The block's sum in eight lanes, combined as the scores are.
        var ps: array<f32, 8>;
        for (var j = 0u; j < cnt; j++) {
            ps[j & 7u] += p_sh[j];
        }
        l = l * alpha + (((ps[0] + ps[4]) + (ps[2] + ps[6])) + ((ps[1] + ps[5]) + (ps[3] + ps[7])));
        for (var k = 0u; k < PER; k++) {
            let d = lid + k * WG;
            if (d < hd) {
                var o = acc[k] * alpha;
                for (var j = 0u; j < cnt; j++) {
                    o += p_sh[j] * v_at(c_sh[j], ko + d);
                }
                acc[k] = o;
            }
        }
        m = m_new;
        // The next block overwrites the scores and weights.
        workgroupBarrier();
    }
    let ms = sink_fold(h, n, &m, &l);
    for (var k = 0u; k < PER; k++) {
        acc[k] = acc[k] * ms;
    }
    // An empty window gives zeros, as on the CPU.
    var inv = 0.0;
    if (n > 0u) {
        inv = 1.0 / l;
    }
    for (var k = 0u; k < PER; k++) {
        let d = lid + k * WG;
        if (d < hd) {
            out[qo + d] = acc[k] * inv;
        }
    }
}
