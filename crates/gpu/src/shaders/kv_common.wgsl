// Bit-level number conversions shared by the KV kernels. They work on raw
// bits, never through float instructions, so the results do not depend on
// how a device rounds, flushes subnormals or treats infinities, and they
// equal the CPU's conversions bit for bit.

// f32 bits -> f16 bits, rounded to nearest even (the `half` crate's
// algorithm, which F16C hardware agrees with). NaN keeps its top payload
// bits and gets the quiet bit.
fn f32_to_f16(x: u32) -> u32 {
    let sign = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xffu;
    let man = x & 0x7fffffu;
    if (e == 0xffu) {
        var nan = 0u;
        if (man != 0u) {
            nan = 0x200u;
        }
        return sign | 0x7c00u | nan | (man >> 13u);
    }
    let he = i32(e) - 112;
    if (he >= 31) {
        return sign | 0x7c00u;
    }
    if (he <= 0) {
        // A subnormal half (or zero): shift the significand, implicit bit
        // included, by 14 - he bits and round on the bits shifted out.
        if (14 - he > 24) {
            return sign;
        }
        let m = man | 0x800000u;
        let sh = u32(14 - he);
        let rb = 1u << (sh - 1u);
        var hm = m >> sh;
        if ((m & rb) != 0u && (m & (3u * rb - 1u)) != 0u) {
            hm += 1u;
        }
        return sign | hm;
    }
    // A carry out of the mantissa correctly bumps the exponent (to
    // infinity at the top).
    let base = sign | (u32(he) << 10u) | (man >> 13u);
    if ((man & 0x1000u) != 0u && (man & 0x2fffu) != 0u) {
        return base + 1u;
    }
    return base;
}

// f16 bits (low 16 of `h`) -> f32, exactly, with integer operations only.
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        if (m == 0u) {
            return bitcast<f32>(sign);
        }
        // m * 2^-24: normal as an f32; the leading bit becomes implicit.
        let p = firstLeadingBit(m);
        return bitcast<f32>(sign | ((p + 103u) << 23u) | ((m << (23u - p)) & 0x7fffffu));
    }
    if (e == 31u) {
        var q = 0u;
        if (m != 0u) {
            q = 0x400000u;
        }
        return bitcast<f32>(sign | 0x7f800000u | q | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

