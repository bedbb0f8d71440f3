// gate = silu(gate) * up over n values. Needs ew_common, ew_expf,
// ew_silu_fn.

@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;

// Value i of the dispatch (the entry point is ew_flat_main.wgsl).
fn apply(i: u32) {
    gate[i] = mul(silu(gate[i]), up[i]);
}
