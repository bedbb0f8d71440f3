// a = a + b (op 0) or a * b (op 1) over n values; b holds one row of ne0
// repeated over a's rows when P.rows (b's rows) is 1, else as many values
// as a. Needs ew_common.wgsl.

@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;

// Value i of the dispatch (the entry point is ew_flat_main.wgsl).
fn apply(i: u32) {
    var j = i;
    if P.rows == 1u {
        j = i % P.ne0;
    }
    if P.op == 0u {
        a[i] = a[i] + b[j];
    } else {
        a[i] = a[i] * b[j];
    }
}
