// tanh(x) with the bits of the CPU backend's (Rust's f32::tanh, which is
// the C library's tanhf; glibc's is fdlibm's float code, over its
// expm1f). fdlibm computes in f32 alone, so the same operations in the
// same order, each rounded once (the helpers of ew_common.wgsl) and with
// the divisions corrected to IEEE quotients, give the same bits. Needs
// ew_common.wgsl.

const EM1_O_THRESHOLD: f32 = 0x1.62e3p+6f;
const EM1_LN2_HI: f32 = 0x1.62e3p-1f;
const EM1_LN2_LO: f32 = 0x1.2fefa2p-17f;
const EM1_INVLN2: f32 = 0x1.715476p+0f;
const EM1_Q1: f32 = -0x1.111112p-5f;
const EM1_Q2: f32 = 0x1.a01a02p-10f;
const EM1_Q3: f32 = -0x1.4ce19ap-14f;
const EM1_Q4: f32 = 0x1.0cfca8p-18f;
const EM1_Q5: f32 = -0x1.afdb76p-23f;

// fdlibm's s_expm1f.c, branch for branch.
fn expm1f(x_in: f32) -> f32 {
    var x = x_in;
    let bits = bitcast<u32>(x);
    let neg = (bits & 0x80000000u) != 0u;
    let hx = bits & 0x7fffffffu;
    // Huge and non-finite arguments.
    if hx >= 0x4195b844u {
        if hx >= 0x42b17218u {
            if hx > 0x7f800000u {
                return add(x, x);
            }
            if hx == 0x7f800000u {
                return select(x, -1.0, neg);
            }
            if x > EM1_O_THRESHOLD {
                return inf();
            }
        }
        if neg {
            return -1.0;
        }
    }
    // Argument reduction: x = k ln2 + (hi - lo), c the rounding of hi - lo.
    var k = 0;
    var c = 0.0;
    if hx > 0x3eb17218u {
        var hi: f32;
        var lo: f32;
        if hx < 0x3f851592u {
            if !neg {
                hi = sub(x, EM1_LN2_HI);
                lo = EM1_LN2_LO;
                k = 1;
            } else {
                hi = add(x, EM1_LN2_HI);
                lo = -EM1_LN2_LO;
                k = -1;
            }
        } else {
            // C's float-to-int conversion truncates, as WGSL's does.
            k = i32(add(mul(EM1_INVLN2, x), select(0.5, -0.5, neg)));
            let t = f32(k);
            hi = sub(x, mul(t, EM1_LN2_HI));
            lo = mul(t, EM1_LN2_LO);
        }
        x = sub(hi, lo);
        c = sub(sub(hi, x), lo);
    } else if hx < 0x33000000u {
        // |x| < 2^-25: fdlibm returns x (its extra terms only raise flags).
        return x;
    }
    let hfx = mul(0.5, x);
    let hxs = mul(x, hfx);
    let r1 = add(1.0, mul(hxs, add(EM1_Q1, mul(hxs, add(EM1_Q2, mul(hxs, add(EM1_Q3,
        mul(hxs, add(EM1_Q4, mul(hxs, EM1_Q5))))))))));
    let t = sub(3.0, mul(r1, hfx));
    var e = mul(hxs, div_cr(sub(r1, t), sub(6.0, mul(x, t))));
    if k == 0 {
        return sub(x, sub(mul(x, e), hxs));
    }
    e = sub(mul(x, sub(e, c)), c);
    e = sub(e, hxs);
    if k == -1 {
        return sub(mul(0.5, sub(x, e)), 0.5);
    }
    if k == 1 {
        if x < -0.25 {
            return mul(-2.0, sub(e, add(x, 0.5)));
        }
        return add(1.0, mul(2.0, sub(x, e)));
    }
    if k <= -2 || k > 56 {
        // exp(x) - 1 is exp(x) here; k is added to y's exponent.
        var y = sub(1.0, sub(e, x));
        y = bitcast<f32>(bitcast<i32>(y) + (k << 23u));
        return sub(y, 1.0);
    }
    var y: f32;
    if k < 23 {
        // t = 1 - 2^-k.
        let t1 = bitcast<f32>(0x3f800000u - (0x1000000u >> u32(k)));
        y = sub(t1, sub(e, x));
    } else {
        // t = 2^-k.
        let t2 = bitcast<f32>(u32(0x7f - k) << 23u);
        y = sub(x, add(e, t2));
        y = add(y, 1.0);
    }
    return bitcast<f32>(bitcast<i32>(y) + (k << 23u));
}

// fdlibm's s_tanhf.c.
fn tanhf(x: f32) -> f32 {
    let jx = bitcast<u32>(x);
    let ix = jx & 0x7fffffffu;
    if ix >= 0x7f800000u {
        // tanh(+-inf) = +-1, tanh(NaN) = NaN.
        if ix == 0x7f800000u {
            return select(1.0, -1.0, jx != ix);
        }
        return x;
    }
    var z: f32;
    if ix < 0x41b00000u {
        // |x| < 22.
        if ix == 0u {
            return x;
        }
        if ix < 0x24000000u {
            // |x| < 2^-55.
            return mul(x, add(1.0, x));
        }
        let ax = bitcast<f32>(ix);
        if ix >= 0x3f800000u {
            let t = expm1f(mul(2.0, ax));
            z = sub(1.0, div_cr(2.0, add(t, 2.0)));
        } else {
            let t = expm1f(mul(-2.0, ax));
            z = div_cr(-t, add(t, 2.0));
        }
    } else {
        // 1 - 1e-30 rounds to 1.
        z = 1.0;
    }
    return select(z, -z, jx != ix);
}
