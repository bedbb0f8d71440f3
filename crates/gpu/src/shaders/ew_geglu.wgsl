// gate = gelu(gate) * up over n values, GELU as the CPU backend applies
// it (ggml's f16 table): 0 at or below -10, the identity at or above 10,
// otherwise the tanh form evaluated in f32 on the input rounded to f16,
// the result rounded to f16. Needs ew_common, ew_tanhf.

@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;

// f32 -> f16 -> f32, rounding to nearest even (subnormal halves included),
// by bits: WGSL's quantizeToF16 may flush subnormals.
fn round_f16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let sign = b & 0x80000000u;
    let a = b & 0x7fffffffu;
    if a >= 0x7f800000u {
        return x;
    }
    if a >= 0x38800000u {
        // Normal half: keep 10 fraction bits, ties to even; the carry may
        // step the exponent, and from 65520 on the result is infinite.
        let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
        if r >= 0x47800000u {
            return bitcast<f32>(sign | bitcast<u32>(inf()));
        }
        return bitcast<f32>(sign | r);
    }
    // Subnormal half: a multiple of 2^-24 (the scalings are exact).
    let q = round(bitcast<f32>(a) * 16777216.0) * 0x1.0p-24f;
    return bitcast<f32>(sign | bitcast<u32>(q));
}

// The CPU's gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))),
// in its order of operations.
fn gelu_tanh(x: f32) -> f32 {
    let sqrt_2_over_pi = 0x1.988454p-1f;
    let coef_a = 0x1.6e4e26p-5f;
    let inner = mul(mul(sqrt_2_over_pi, x), add(1.0, mul(mul(coef_a, x), x)));
    return mul(mul(0.5, x), add(1.0, tanhf(inner)));
}

// Value i of the dispatch (the entry point is ew_flat_main.wgsl).
fn apply(i: u32) {
    let g = gate[i];
    var y: f32;
    if g <= -10.0 {
        y = 0.0;
    } else if g >= 10.0 {
        y = g;
    } else {
        y = round_f16(gelu_tanh(round_f16(g)));
    }
    gate[i] = mul(y, up[i]);
}
