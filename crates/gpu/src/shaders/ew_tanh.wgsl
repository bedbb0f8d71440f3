// x = tanh(x) over n values. Needs ew_common, ew_tanhf.

@group(0) @binding(1) var<storage, read_write> x: array<f32>;

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
    x[i] = tanhf(x[i]);
}
