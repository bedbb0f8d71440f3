// Conversions and division shared by the matmul kernels, done in integer
// arithmetic so that every device gives the CPU's exact bits: WGSL lets
// f32 division be off by 2.5 ulp, lets f16 packing round either way and
// may flush f16 subnormals, none of which the CPU backend does.

// ggml type ids (the GGUF numbering) that the kernels specialize on.
const T_F32: u32 = 0u;
const T_F16: u32 = 1u;
const T_Q4_0: u32 = 2u;
const T_Q4_1: u32 = 3u;
const T_Q5_0: u32 = 6u;
const T_Q5_1: u32 = 7u;
const T_Q8_0: u32 = 8u;
const T_Q4_K: u32 = 12u;
const T_Q5_K: u32 = 13u;
const T_Q6_K: u32 = 14u;

// Words per quantized activation block in the scratch buffer: for the
// 32-element formats 8 words of packed i8 quants, the scale and (Q8_1)
// the scaled sum, both as f32 holding the f16 value; for Q8_K 64 words of
// quants, the f32 scale and the exact sum of each 32 quants.
const A32_WORDS: u32 = 10u;
const AK_WORDS: u32 = 73u;

// f16 bits (low 16 bits of h) to f32, exact, subnormals included.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1Fu;
    let m = h & 0x3FFu;
    if (e == 0u) {
        // m * 2^-24: both factors exact, the product a normal f32.
        let v = f32(m) * 5.9604644775390625e-8;
        return bitcast<f32>(bitcast<u32>(v) | sign);
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7F800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// f32 to f16 bits, rounding to nearest even (as the `half` crate does).
fn f32_to_f16(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    let sign = (u >> 16u) & 0x8000u;
    let e = i32((u >> 23u) & 0xFFu);
    let m = u & 0x7FFFFFu;
    if (e == 255) {
        return sign | 0x7C00u | select(0u, 0x200u, m != 0u);
    }
    let e16 = e - 112;
    if (e16 >= 31) {
        return sign | 0x7C00u;
    }
    if (e16 <= 0) {
        // A subnormal f16 (or zero): shift the full mantissa down.
        let shift = u32(14 - e16);
        if (shift > 24u) {
            return sign;
        }
        let mant = m | 0x800000u;
        var q = mant >> shift;
        let rem = mant & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u) == 1u)) {
            q = q + 1u;
        }
        return sign | q;
    }
    var q = (u32(e16) << 10u) | (m >> 13u);
    let rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u) == 1u)) {
        // A carry out of the mantissa bumps the exponent, to infinity at
        // the top, which is what rounding asks for.
        q = q + 1u;
    }
    return sign | q;
}

// The f16 rounding of x, as f32.
fn round_f16(x: f32) -> f32 {
    return f16_to_f32(f32_to_f16(x));
}

// a / b correctly rounded (to nearest even) by long division of the
// mantissas. Zeros, subnormals, infinities and results outside the normal
// range fall back to the device's division; the quantizers never meet them
// with real data (they divide by a block's nonzero maximum).
fn div_rn(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = (ua >> 23u) & 0xFFu;
    let eb = (ub >> 23u) & 0xFFu;
    if (ea == 0u || ea == 255u || eb == 0u || eb == 255u) {
        return a / b;
    }
    let sign = (ua ^ ub) & 0x80000000u;
    var r = (ua & 0x7FFFFFu) | 0x800000u;
    let mb = (ub & 0x7FFFFFu) | 0x800000u;
    var e = i32(ea) - i32(eb) + 127;
    if (r < mb) {
        r = r << 1u;
        e = e - 1;
    }
    // r / mb is in [1, 2): 24 quotient bits, then round on the remainder.
    var q = 0u;
    for (var i = 0u; i < 24u; i = i + 1u) {
        let bit = r >= mb;
        if (bit) {
            r = r - mb;
        }
        q = (q << 1u) | select(0u, 1u, bit);
        r = r << 1u;
    }
    if (r > mb || (r == mb && (q & 1u) == 1u)) {
        q = q + 1u;
    }
    if (q == 0x1000000u) {
        q = 0x800000u;
        e = e + 1;
    }
    if (e <= 0 || e >= 255) {
        return a / b;
    }
    return bitcast<f32>(sign | (u32(e) << 23u) | (q & 0x7FFFFFu));
}
