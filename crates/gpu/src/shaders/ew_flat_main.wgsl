// The entry point of every flat elementwise kernel: one invocation per
// value, over a grid of workgroups spread on x and y, each calling the
// kernel's own `apply(i)` for the values inside the dispatch. Appended
// after the kernel's file, which defines `apply`.

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_index(wid, nwg, lid);
    if i < P.n {
        apply(i);
    }
}
