//! GELU and GeGLU as ggml's CPU backend computes them on f32 data.
//!
//! ggml applies GELU to f32 through a table indexed by f16 bits: the input
//! is rounded to f16, looked up, and the f16 result widened; beyond ±10 the
//! function is taken as 0 and the identity. Matching that rounding is what
//! keeps gemma's FFN on llama.cpp's bits, and the table is also what makes
//! it cheap: one conversion and one load per value instead of a `tanhf`.
//!
//! [`gelu_f16`] is the reference, computed directly; [`geglu_scalar`] and
//! the SIMD form read a table built from that same function, so all three
//! agree bit for bit (the tests check every f16 input).

use std::sync::OnceLock;

use crate::blocks::{f16_to_f32, f32_to_f16};

/// GELU with the tanh approximation, in f32 as ggml's `ggml_gelu_f32`:
/// `0.5 x (1 + tanh(sqrt(2/π) x (1 + 0.044715 x²)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

/// Below this GELU is taken as 0, from it on as the identity.
const CUT: f32 = 10.0;

/// GELU as ggml's CPU backend applies it to an f32 value: rounded to f16,
/// [`gelu_tanh`] of that, rounded to f16 again; 0 at or below -10 and `x`
/// itself at or above 10. The reference the table paths are checked on.
pub fn gelu_f16(x: f32) -> f32 {
    if x <= -CUT {
        0.0
    } else if x >= CUT {
        x
    } else {
        let xh = f16_to_f32(f32_to_f16(x));
        f16_to_f32(f32_to_f16(gelu_tanh(xh)))
    }
}

/// `gelu_f16` of every f16 value, indexed by its bits (256 KiB, built on
/// first use).
fn table() -> &'static [f32] {
    static TABLE: OnceLock<Box<[f32]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|h| {
                let x = f16_to_f32(h.to_le_bytes());
                f16_to_f32(f32_to_f16(gelu_tanh(x)))
            })
            .collect()
    })
}

/// Builds the GELU table now, so that no forward step pays for it.
pub fn warm_up() {
    table();
}

/// [`gelu_f16`] through the table.
#[inline]
fn gelu_lookup(t: &[f32], x: f32) -> f32 {
    if x <= -CUT {
        0.0
    } else if x >= CUT {
        x
    } else {
        t[usize::from(u16::from_le_bytes(f32_to_f16(x)))]
    }
}

/// `gate = gelu_f16(gate) · up`, element by element, as far as the shorter
/// slice reaches.
pub fn geglu_scalar(gate: &mut [f32], up: &[f32]) {
    let t = table();
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = gelu_lookup(t, *g) * u;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    /// [`geglu_scalar`](super::geglu_scalar), eight at a time: F16C rounds
    /// to f16 (nearest even, as the scalar conversion), a gather reads the
    /// table, and two blends apply the cut-offs.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn geglu(gate: &mut [f32], up: &[f32]) {
        let t = super::table();
        let n = gate.len().min(up.len());
        let lo = _mm256_set1_ps(-super::CUT);
        let hi = _mm256_set1_ps(super::CUT);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `i + 8 <= n` for both slices (unaligned accesses);
            // the gather's indices are f16 bits, below the table's 65536
            // entries.
            unsafe {
                let x = _mm256_loadu_ps(gate.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                let idx = _mm256_cvtepu16_epi32(h);
                let y = _mm256_i32gather_ps::<4>(t.as_ptr(), idx);
                let y = _mm256_blendv_ps(y, x, _mm256_cmp_ps::<_CMP_GE_OQ>(x, hi));
                let y =
                    _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps::<_CMP_LE_OQ>(x, lo));
                let u = _mm256_loadu_ps(up.as_ptr().add(i));
                _mm256_storeu_ps(gate.as_mut_ptr().add(i), _mm256_mul_ps(y, u));
            }
            i += 8;
        }
        super::geglu_scalar(&mut gate[i..n], &up[i..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 value, the cut-offs and their neighbours, values that
    /// round across f16 boundaries, infinities.
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..=u16::MAX)
            .map(|h| f16_to_f32(h.to_le_bytes()))
            .filter(|x| !x.is_nan())
            .collect();
        for c in [CUT, -CUT] {
            xs.extend([c, c.next_up(), c.next_down()]);
        }
        let mut s = 0x2545_f491u32;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            xs.push((s as f32 / u32::MAX as f32 - 0.5) * 30.0);
        }
        xs
    }

    #[test]
    fn table_matches_the_direct_reference_on_every_input() {
        let xs = inputs();
        let up: Vec<f32> = xs.iter().map(|&x| 0.5 + x.abs().fract()).collect();
        let mut got = xs.clone();
        geglu_scalar(&mut got, &up);
        for ((&x, &u), &g) in xs.iter().zip(&up).zip(&got) {
            let want = gelu_f16(x) * u;
            assert_eq!(g.to_bits(), want.to_bits(), "geglu at {x}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_matches_scalar_bit_for_bit() {
        if !(is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c"))
        {
            eprintln!("no AVX2/FMA/F16C here: only the scalar path exists");
            return;
        }
        let xs = inputs();
        let up: Vec<f32> = xs.iter().map(|&x| 1.0 - x.abs().fract()).collect();
        let mut want = xs.clone();
        geglu_scalar(&mut want, &up);
        // Odd lengths exercise the scalar tail.
        for len in [xs.len(), xs.len() - 3, 7] {
            let mut got = xs[..len].to_vec();
            // SAFETY: the features were detected above.
            unsafe { x86::geglu(&mut got, &up[..len]) };
            for (k, (g, w)) in got.iter().zip(&want[..len]).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "geglu at {}", xs[k]);
            }
        }
    }

    #[test]
    fn nan_stays_nan() {
        let mut g = [f32::NAN; 9];
        geglu_scalar(&mut g, &[1.0; 9]);
        assert!(g.iter().all(|v| v.is_nan()));
    }
}
