// x = x * s over n values (s = P.f). Needs ew_common.wgsl.

@group(0) @binding(1) var<storage, read_write> x: array<f32>;

// Value i of the dispatch (the entry point is ew_flat_main.wgsl).
fn apply(i: u32) {
    x[i] = x[i] * bitcast<f32>(P.f);
}
