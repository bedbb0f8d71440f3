// x = silu(x) over n values. Needs ew_common, ew_expf, ew_silu_fn.

@group(0) @binding(1) var<storage, read_write> x: array<f32>;

// Value i of the dispatch (the entry point is ew_flat_main.wgsl).
fn apply(i: u32) {
    x[i] = silu(x[i]);
}
