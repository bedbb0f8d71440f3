// silu(v) = v / (1 + e^-v), as the CPU backend computes it (its exp,
// then one IEEE division). Needs ew_common.wgsl and ew_expf.wgsl.

fn silu(v: f32) -> f32 {
    let d = add(1.0, expf(-v));
    if d == inf() {
        // v < -88.7: v / inf is a zero of v's sign (and WGSL's division
        // is unspecified for such divisors).
        return bitcast<f32>(bitcast<u32>(v) & 0x80000000u);
    }
    if d > 0x1.0p+60f {
        // d > 2^60: both scaled by 2^-64 (exactly) into div_cr's range.
        let s = 0x1.0p-64f;
        return div_cr(mul(v, s), mul(d, s));
    }
    if abs(v) < 0x1.0p-60f {
        // |v| < 2^-60: v scaled by 2^64 and the quotient back.
        return mul(div_cr(mul(v, 0x1.0p+64f), d), 0x1.0p-64f);
    }
    return div_cr(v, d);
}
