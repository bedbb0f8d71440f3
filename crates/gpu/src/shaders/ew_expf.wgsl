// e^x with the bits of the CPU backend's exp (minfer_kernels::activation::
// exp, which is glibc's expf): the same steps, with glibc's f64
// arithmetic carried in double-f32 (about 48 bits), so that the one final
// rounding to f32 sees nearly the value glibc's f64 code rounds. Needs
// ew_common.wgsl.
//
// glibc: k = round(x * 32/ln2), r = x * 32/ln2 - k, s = 2^(k/32) from a
// table and the exponent, y = 1 + C2 r + C1 r^2 + C0 r^3, result f32(y s).
// The constants below are glibc's f64 constants split into f32 parts
// (hi + lo, or hi + mid + lo for 32/ln2, which the three parts hold
// exactly).

// 32/ln2.
const EXP_K1: f32 = 0x1.715476p+5f;
const EXP_K2: f32 = 0x1.4ae0cp-21f;
const EXP_K3: f32 = -0x1.0p-46f;
// The polynomial (glibc's __exp2f_data.poly_scaled).
const EXP_C0H: f32 = 0x1.c6af84p-20f;
const EXP_C0L: f32 = 0x1.722472p-45f;
const EXP_C1H: f32 = 0x1.ebfce6p-13f;
const EXP_C1L: f32 = -0x1.e0a762p-38f;
const EXP_C2H: f32 = 0x1.62e43p-6f;
const EXP_C2L: f32 = -0x1.e75a54p-35f;
// Above this e^x overflows; below the other it rounds to 0 (glibc's).
const EXP_OVERFLOW: f32 = 0x1.62e42ep+6f;
const EXP_UNDERFLOW: f32 = -0x1.9fe368p+6f;

// 2^(i/32) (glibc's table of f64 values), high and low f32 parts.
var<private> EXP_TAB_HI: array<u32, 32> = array<u32, 32>(
    0x3f800000u, 0x3f82cd87u, 0x3f85aac3u, 0x3f88980fu, 0x3f8b95c2u, 0x3f8ea43au, 0x3f91c3d3u,
    0x3f94f4f0u, 0x3f9837f0u, 0x3f9b8d3au, 0x3f9ef532u, 0x3fa27043u, 0x3fa5fed7u, 0x3fa9a15bu,
    0x3fad583fu, 0x3fb123f6u, 0x3fb504f3u, 0x3fb8fbafu, 0x3fbd08a4u, 0x3fc12c4du, 0x3fc5672au,
    0x3fc9b9beu, 0x3fce248cu, 0x3fd2a81eu, 0x3fd744fdu, 0x3fdbfbb8u, 0x3fe0ccdfu, 0x3fe5b907u,
    0x3feac0c7u, 0x3fefe4bau, 0x3ff5257du, 0x3ffa83b3u,
);
var<private> EXP_TAB_LO: array<u32, 32> = array<u32, 32>(
    0x00000000u, 0xb34ea7a9u, 0x334f9891u, 0xb37eda4bu, 0xb260aba1u, 0xb3697465u, 0x33675624u,
    0xb32e0212u, 0x33231b71u, 0xb30c5563u, 0x33412342u, 0x30c3125au, 0xb32c9d5eu, 0xb3162b08u,
    0xb22deaf6u, 0xb37c5aa8u, 0x32cfe77au, 0x330ec5f7u, 0xb3414fe8u, 0xb2d6663eu, 0x320aa837u,
    0xb37323a2u, 0x3228fc24u, 0xb35c1daau, 0xb2d4a58au, 0xb3504a1cu, 0xb21eab59u, 0xb2441be6u,
    0xb24116deu, 0xb348464au, 0x32292436u, 0xb2923758u,
);

fn expf(x: f32) -> f32 {
    let bx = bitcast<u32>(x);
    let abstop = (bx >> 20u) & 0x7ffu;
    if abstop >= 0x42bu {
        // |x| >= 88 (glibc's test for the special cases).
        if bx == 0xff800000u {
            return 0.0;
        }
        if abstop >= 0x7f8u {
            return add(x, x);
        }
        if x > EXP_OVERFLOW {
            return inf();
        }
        if x < EXP_UNDERFLOW {
            return 0.0;
        }
    }
    // z = x * 32/ln2 in parts; k is the integer nearest z, r = z - k.
    let p1 = two_prod(x, EXP_K1);
    let p2 = two_prod(x, EXP_K2);
    let p3 = mul(x, EXP_K3);
    var kd = round(p1.x);
    // p1.x - kd is exact (both are multiples of p1.x's ulp, |diff| <= 0.5).
    var r = two_sum(sub(p1.x, kd), p1.y);
    r = df_add_f(r, p2.x);
    r = df_add_f(r, add(p2.y, p3));
    // The tail can carry z past a half: keep |r| <= 1/2 as glibc's k does.
    if r.x > 0.5 {
        kd = add(kd, 1.0);
        r = df_add_f(r, -1.0);
    } else if r.x < -0.5 {
        kd = sub(kd, 1.0);
        r = df_add_f(r, 1.0);
    }
    var y = df_add(df_mul(vec2<f32>(EXP_C0H, EXP_C0L), r), vec2<f32>(EXP_C1H, EXP_C1L));
    y = df_add(df_mul(y, r), vec2<f32>(EXP_C2H, EXP_C2L));
    y = df_add_f(df_mul(y, r), 1.0);
    let ki = i32(kd);
    let j = u32(ki & 31);
    let m = ki >> 5u;
    let t = vec2<f32>(bitcast<f32>(EXP_TAB_HI[j]), bitcast<f32>(EXP_TAB_LO[j]));
    // v = 2^(j/32) * y, in [0.98, 2.03); hi is v rounded to f32.
    let v = df_mul(t, y);
    if m > 126 {
        // ldexp's exponent stays below 128.
        return mul(ldexp(v.x, m - 1), 2.0);
    }
    if m > -126 {
        return ldexp(v.x, m);
    }
    // Subnormal (or nearly) result: round v * 2^m to a multiple of 2^-149
    // once, from both parts, as glibc rounds its f64 value once.
    let wh = ldexp(v.x, m + 149);
    let wl = ldexp(v.y, m + 149);
    var q = round(wh);
    let f = sub(wh, q);
    // round() breaks a tie of wh to even; the low part decides a false tie.
    if f == 0.5 && wl > 0.0 {
        q = add(q, 1.0);
    } else if f == -0.5 && wl < 0.0 {
        q = sub(q, 1.0);
    }
    // q * 2^-149 in two exact steps (2^-149 itself is subnormal).
    return mul(mul(q, 0x1.0p-100f), 0x1.0p-49f);
}
