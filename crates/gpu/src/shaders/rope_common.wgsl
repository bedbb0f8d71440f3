// RoPE angles as the CPU computes them, and an accurate sine and cosine.
//
// The CPU builds theta_i = pos * theta_scale^i by repeated f32
// multiplication from theta = pos and takes angle = freq_scale * theta;
// f32 products are correctly rounded in WGSL, so the angles here are the
// CPU's to the bit. WGSL's sin and cos only promise an absolute error of
// 2^-11 on [-pi, pi] (and nothing beyond), while angles reach the
// position count in radians, so they are computed here: a Cody-Waite
// reduction by pi/2 and the single-precision minimax polynomials of
// Cephes' sinf/cosf.

// pi/2 = C1 + C2 + C3 + C4: the first three have at most 7 significant
// bits, so k * Ci is exact for |k| < 2^17 (angles up to ~205,000) and
// the reduction loses nothing before the last term.
const PIO2_1: f32 = 0x1.94p0f;
const PIO2_2: f32 = -0x1.ep-8f;
const PIO2_3: f32 = -0x1.2cp-18f;
const PIO2_4: f32 = 0x1.110b46p-26f;
const TWO_OVER_PI: f32 = 0.63661975f;

// (cos a, sin a).
fn cos_sin(a: f32) -> vec2<f32> {
    let k = round(a * TWO_OVER_PI);
    let r = (((a - k * PIO2_1) - k * PIO2_2) - k * PIO2_3) - k * PIO2_4;
    let z = r * r;
    let s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
    let c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
        - 0.5 * z + 1.0;
    switch (i32(k) & 3) {
        case 0: {
            return vec2<f32>(c, s);
        }
        case 1: {
            return vec2<f32>(-s, c);
        }
        case 2: {
            return vec2<f32>(-c, -s);
        }
        default: {
            return vec2<f32>(s, -c);
        }
    }
}

// (cos, sin) of every rotated pair of the workgroup's row. Heads longer
// than 512 rotated dimensions are refused on the host.
var<workgroup> rope_cs: array<vec2<f32>, 256>;

// Fills `rope_cs` for position `pos`: pair i's angle is
// freq_scale * (pos * theta_scale^i), the running product taken in the
// CPU's order. Ends with a barrier (call from uniform control flow).
fn rope_table(lid: u32, pos: i32, half: u32, theta_scale: f32, freq_scale: f32) {
    var theta = f32(pos);
    var k = 0u;
    for (var i = lid; i < half; i += 64u) {
        for (; k < i; k++) {
            theta = theta * theta_scale;
        }
        rope_cs[i] = cos_sin(freq_scale * theta);
    }
    workgroupBarrier();
}

// Where dimension `e` (< n_rot) of a head finds its pair: (pair index,
// first element, second element), head-relative.
fn rope_pair(e: u32, n_rot: u32, style: u32) -> vec3<u32> {
    if (style == 0u) {
        let a = e & ~1u;
        return vec3<u32>(e >> 1u, a, a + 1u);
    }
    let half = n_rot >> 1u;
    let i = e % half;
    return vec3<u32>(i, i, i + half);
}
