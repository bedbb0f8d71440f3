// The Q8_0 quantizer of the KV store kernels, on integer bits where the
// CPU's result depends on rounding (the block scale), so that stored
// blocks equal the CPU's bit for bit. Needs kv_common.wgsl and a
// `value_bits(row, j)` source of values.

// The significand of non-negative finite non-zero f32 bits `x` with its
// implicit bit (in [2^23, 2^24)) and the unbiased-plus-127 exponent it
// goes with (subnormals normalised, so the exponent may be < 1).
fn split_f32(x: u32) -> vec2<i32> {
    let e = i32(x >> 23u);
    let m = x & 0x7fffffu;
    if (e == 0) {
        let s = 23u - firstLeadingBit(m);
        return vec2<i32>(i32(m << s), 1 - i32(s));
    }
    return vec2<i32>(i32(m | 0x800000u), e);
}

// a / b correctly rounded (to nearest even), for non-negative, non-NaN
// f32 bits: a long division on the significands. WGSL allows 2.5 ulp for
// `/`, and the quantizer's scale must be the CPU's to the bit.
fn div_rn(a: u32, b: u32) -> u32 {
    if (a == 0u || b >= 0x7f800000u) {
        return 0u;
    }
    if (a >= 0x7f800000u || b == 0u) {
        return 0x7f800000u;
    }
    let sa = split_f32(a);
    let sb = split_f32(b);
    var ma = u32(sa.x);
    let mb = u32(sb.x);
    var e = sa.y - sb.y + 127;
    if (ma < mb) {
        ma = ma << 1u;
        e -= 1;
    }
    // ma / mb is in [1, 2): 26 quotient bits, the 24 of the significand
    // then a guard and a round bit; the remainder is the sticky bit.
    var q = 0u;
    var r = ma;
    for (var i = 0u; i < 26u; i++) {
        q = q << 1u;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r = r << 1u;
    }
    var sticky = r != 0u;
    if (e >= 255) {
        return 0x7f800000u;
    }
    if (e <= 0) {
        // A subnormal quotient: shift into place, keeping what falls out.
        let sh = u32(min(1 - e, 27));
        sticky = sticky || (q & ((1u << sh) - 1u)) != 0u;
        q = q >> sh;
        e = 0;
    }
    let sig = q >> 2u;
    var bits = (u32(max(e - 1, 0)) << 23u) + sig;
    let guard = (q >> 1u) & 1u;
    if (guard == 1u && ((q & 1u) == 1u || sticky || (sig & 1u) == 1u)) {
        bits += 1u;
    }
    return bits;
}

// 127.0 as f32 bits.
const F32_127: u32 = 0x42fe0000u;

// The quants of one Q8_0 block, each an i8 in the low byte of a word.
var<private> qb: array<u32, 32>;

// Quantizes the 32 values `value_bits(row, j0 ..)` as the CPU's
// `quantize_row_q8_0`: d = amax / 127 stored as f16, q = round half even
// (x * (127 / amax)) saturated to i8, all zeros for an all-zero (or
// infinite) block. Fills `qb`; returns the f16 bits of d.
fn q8_block(row: u32, j0: u32) -> u32 {
    var vals: array<u32, 32>;
    var amax = 0u;
    for (var e = 0u; e < 32u; e++) {
        let v = value_bits(row, j0 + e);
        vals[e] = v;
        let a = v & 0x7fffffffu;
        // Ordered as integers, like the floats; NaN is skipped, as
        // `f32::max` skips it.
        if (a <= 0x7f800000u) {
            amax = max(amax, a);
        }
    }
    let d = div_rn(amax, F32_127);
    var id = 0u;
    if (amax != 0u) {
        id = div_rn(F32_127, amax);
    }
    let idf = bitcast<f32>(id);
    for (var e = 0u; e < 32u; e++) {
        var q = 0;
        if (id != 0u && (vals[e] & 0x7fffffffu) <= 0x7f800000u) {
            // round() is round half to even in WGSL; no add is left for
            // the compiler to fuse with the product.
            q = i32(clamp(round(bitcast<f32>(vals[e]) * idf), -128.0, 127.0));
        }
        qb[e] = u32(q) & 0xffu;
    }
    return f32_to_f16(d);
}

// Four quant bytes of `qb` from `i` as one little-endian word.
fn qb_word(i: u32) -> u32 {
    return qb[i] | (qb[i + 1u] << 8u) | (qb[i + 2u] << 16u) | (qb[i + 3u] << 24u);
}
