// Shared by every ew_* kernel: the uniform block, the flat index over a
// 2-D grid of workgroups, and exact f32 arithmetic helpers.
//
// Why the helpers exist: WGSL leaves the compiler free to fuse a multiply
// into a following add and (through the SPIR-V it becomes) lets drivers
// apply algebra that is exact only over the reals. Mesa's NIR, for one,
// rewrites `(a + b) - a` into `b`, which turns every compensated sum into
// a plain one. Passing a result through `opq` (an OR with a uniform word
// that is always 0) hides where a value came from, so the next operation
// sees an opaque operand: no fusion, no rewrite, one IEEE rounding per
// operation as on the CPU. It costs one integer OR.

struct Params {
    // Values the dispatch covers (elementwise kernels).
    n: u32,
    // Row length.
    ne0: u32,
    // Rows (row kernels), or the rows of the second operand (binary).
    rows: u32,
    // Kernel variant (binary: 0 add, 1 mul).
    op: u32,
    // A scalar as f32 bits (scale factor, RMS norm epsilon).
    f: u32,
    // Always 0: the operand of `opq`.
    zero: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> P: Params;

// Lanes per workgroup of every ew kernel (the host side plans with it).
const WG: u32 = 256u;

// The flat invocation index of a grid spread over x and y (ops::groups_for).
fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid;
}

// The flat workgroup index (one row per workgroup).
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

fn opq(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | P.zero);
}

// One rounded operation each, never fused or rewritten (see above).
fn add(a: f32, b: f32) -> f32 { return opq(a + b); }
fn sub(a: f32, b: f32) -> f32 { return opq(a - b); }
fn mul(a: f32, b: f32) -> f32 { return opq(a * b); }

// +infinity, built at run time (a constant infinity does not compile).
fn inf() -> f32 {
    return bitcast<f32>(0x7f800000u | P.zero);
}

// Error-free transforms (Knuth's two-sum; Dekker's product with the
// factors split by masking, so that no multiply by 4097 can overflow and
// every partial product is exact, fused or not). A vec2 holds (hi, lo).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = add(a, b);
    let bb = sub(s, a);
    let e = add(sub(a, sub(s, bb)), sub(b, bb));
    return vec2<f32>(s, e);
}

// |a| >= |b| (or a == 0).
fn fast_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = add(a, b);
    return vec2<f32>(s, sub(b, sub(s, a)));
}

fn split(a: f32) -> vec2<f32> {
    let hi = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
    return vec2<f32>(hi, sub(a, hi));
}

fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = mul(a, b);
    let x = split(a);
    let y = split(b);
    let e = add(add(add(sub(mul(x.x, y.x), p), mul(x.x, y.y)), mul(x.y, y.x)), mul(x.y, y.y));
    return vec2<f32>(p, e);
}

// Double-f32 ("double-float", about 48 bits) sums and products.
fn df_add(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let s = two_sum(a.x, b.x);
    return fast_two_sum(s.x, add(s.y, add(a.y, b.y)));
}

fn df_add_f(a: vec2<f32>, b: f32) -> vec2<f32> {
    let s = two_sum(a.x, b);
    return fast_two_sum(s.x, add(s.y, a.y));
}

fn df_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let p = two_prod(a.x, b.x);
    return fast_two_sum(p.x, add(p.y, add(mul(a.x, b.y), mul(a.y, b.x))));
}

fn df_mul_f(a: vec2<f32>, b: f32) -> vec2<f32> {
    let p = two_prod(a.x, b);
    return fast_two_sum(p.x, add(p.y, mul(a.y, b)));
}

fn in_range(x: f32, lo_exp: u32, hi_exp: u32) -> bool {
    let e = (bitcast<u32>(x) >> 23u) & 0xffu;
    return e >= lo_exp && e <= hi_exp;
}

// Magnitudes from 2^-70 to 2^100 (biased exponents): where the residuals
// below are exact (no product or half-ulp term leaves the normal range).
const SAFE_LO: u32 = 57u;
const SAFE_HI: u32 = 227u;

// a - q b for double-f32 a and b, as a double-f32 that is exact to about
// 2^-48 of ulp(a): q b is taken exactly (two products), and a.x - q b.x
// is exact when q is within a few ulp of a / b (Sterbenz).
fn residual(a: vec2<f32>, q: f32, b: vec2<f32>) -> vec2<f32> {
    let p = two_prod(q, b.x);
    let t = two_prod(q, b.y);
    var r = two_sum(sub(a.x, p.x), a.y);
    r = df_add_f(r, -p.y);
    r = df_add_f(r, -t.x);
    return df_add_f(r, -t.y);
}

// The f32 nearest a / b (ties to even) for positive double-f32 a and b in
// the safe range, from q0 within a few ulp of it (a hardware quotient:
// Vulkan allows 2.5 ulp). One Newton step brings q within about half an
// ulp; then the side of the midpoint to the neighbour is decided from the
// sign of the exact residual a - mid b = (a - q b) -+ (ulp / 2) b, so no
// rounding of a correction term can pick the wrong neighbour (the softmax
// sum 2 - 2^-23, whose reciprocal lies 2^-49 above a midpoint, needs it).
fn quot_round(a: vec2<f32>, b: vec2<f32>, q0: f32) -> f32 {
    let q = add(q0, opq(residual(a, q0, b).x / b.x));
    let r = residual(a, q, b);
    if r.x > 0.0 {
        let up = bitcast<f32>(bitcast<u32>(q) + 1u);
        let h = mul(sub(up, q), 0.5);
        let d = df_add(r, vec2<f32>(-mul(h, b.x), -mul(h, b.y)));
        if d.x > 0.0 || (d.x == 0.0 && (bitcast<u32>(q) & 1u) != 0u) {
            return up;
        }
    } else if r.x < 0.0 {
        let down = bitcast<f32>(bitcast<u32>(q) - 1u);
        let h = mul(sub(q, down), 0.5);
        let d = df_add(r, vec2<f32>(mul(h, b.x), mul(h, b.y)));
        if d.x < 0.0 || (d.x == 0.0 && (bitcast<u32>(q) & 1u) != 0u) {
            return down;
        }
    }
    return q;
}

// a / b rounded to nearest even, as the CPU's division. Outside the safe
// range the hardware quotient is returned as is.
fn div_cr(a: f32, b: f32) -> f32 {
    let q = opq(a / b);
    let aa = abs(a);
    let ab = abs(b);
    let aq = abs(q);
    if !(in_range(aa, SAFE_LO, SAFE_HI) && in_range(ab, SAFE_LO, SAFE_HI)
        && in_range(aq, SAFE_LO, SAFE_HI)) {
        return q;
    }
    let m = quot_round(vec2<f32>(aa, 0.0), vec2<f32>(ab, 0.0), aq);
    return bitcast<f32>(bitcast<u32>(m) | (bitcast<u32>(q) & 0x80000000u));
}

// sqrt(a) rounded to nearest, as the CPU's (Vulkan's sqrt is only as
// accurate as 1 / inversesqrt). Outside the safe range the hardware root
// is returned as is.
fn sqrt_cr(a: f32) -> f32 {
    let s0 = opq(sqrt(a));
    if !(in_range(a, SAFE_LO, SAFE_HI)) {
        return s0;
    }
    return sqrt_round(a, s0);
}

// The f32 nearest sqrt(a) for positive a in the safe range, from s0
// within a few ulp of it: a Newton step, then the side of the midpoint
// m = s +- h (h half an ulp) from the sign of a - m^2 = (a - s^2) -+ 2 s h - h^2,
// every term exact.
fn sqrt_round(a: f32, s0: f32) -> f32 {
    let p0 = two_prod(s0, s0);
    let s = add(s0, opq(sub(sub(a, p0.x), p0.y) / (2.0 * s0)));
    let p = two_prod(s, s);
    let r = two_sum(sub(a, p.x), -p.y);
    if r.x > 0.0 {
        let up = bitcast<f32>(bitcast<u32>(s) + 1u);
        let h = mul(sub(up, s), 0.5);
        let d = df_add_f(df_add_f(r, -mul(s, mul(h, 2.0))), -mul(h, h));
        if d.x > 0.0 {
            return up;
        }
    } else if r.x < 0.0 {
        let down = bitcast<f32>(bitcast<u32>(s) - 1u);
        let h = mul(sub(s, down), 0.5);
        let d = df_add_f(df_add_f(r, mul(s, mul(h, 2.0))), -mul(h, h));
        if d.x < 0.0 {
            return down;
        }
    }
    return s;
}
