// gate = silu(gate) * up over n values. Needs ew_common, ew_expf,
// ew_silu_fn.

@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if i >= P.n {
        return;
    }
    gate[i] = mul(silu(gate[i]), up[i]);
}
