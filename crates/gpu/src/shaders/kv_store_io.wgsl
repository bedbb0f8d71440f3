// Bindings, parameters and entry point of the KV store kernels (plain and
// fused with RoPE): one workgroup per row of `x`, stored into cell
// `cells[row]`. The source (`prepare`, `value_bits`) and the format's
// `store_row` come from the files compiled with this one.

struct Params {
    n_rows: u32,
    // Values per row (and per cell).
    row_elems: u32,
    // Bytes from one cell to the next (a multiple of 4).
    stride: u32,
    n_ctx: u32,
    // RoPE only: head size, rotated dimensions, 0 normal / 1 neox, and
    // the f32 bits of theta_scale and freq_scale.
    head_dim: u32,
    n_rot: u32,
    style: u32,
    theta_scale: u32,
    freq_scale: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
// The rows as raw bits: values that are stored unchanged keep every bit.
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> cells: array<i32>;
@group(0) @binding(3) var<storage, read_write> kv: array<u32>;

const WG: u32 = 64u;

// The row's first word in `kv`, or 0xffffffff when its cell is out of
// range (the graph validates cells; this only keeps writes in bounds).
fn cell_word(row: u32) -> u32 {
    let c = cells[row];
    if (c < 0 || u32(c) >= P.n_ctx) {
        return 0xffffffffu;
    }
    return u32(c) * (P.stride >> 2u);
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= P.n_rows) {
        return;
    }
    // Every lane prepares (the RoPE table is shared by the workgroup)
    // before any may leave for an out-of-range cell.
    prepare(row, lid);
    let base = cell_word(row);
    if (base == 0xffffffffu) {
        return;
    }
    store_row(row, base, lid);
}
