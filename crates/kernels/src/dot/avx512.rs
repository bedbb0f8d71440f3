//! AVX-512 dot products, with a VNNI variant of each (`vpdpbusd` replaces
//! the `maddubs` + `madd` pair) chosen once when the CPU has it.
//!
//! The K-quants have AVX-512 forms: they keep 256-bit registers (their
//! sub-block scales change every 32 quants) and gain 6–15 % from VNNI and
//! the wider register file. So do the grid types but IQ3_XXS (see
//! `x86_iq`): they gain 2–25 % from `vpdpwssd` and, for IQ2_S and IQ3_S,
//! from applying sign bits as a mask register; IQ3_XXS measured 7 % slower
//! in its AVX-512 form and runs its AVX2 kernel at this level. The legacy
//! types (Q4_0, Q4_1, Q5_0, Q8_0) use the AVX2 kernels at this level too:
//! two-blocks-per-register AVX-512 forms measured no faster on whole groups
//! of blocks, and slower on rows whose block count leaves a tail, which the
//! AVX2 kernels keep in SIMD.
//! Results are bit-exact with the scalar reference for the same reason as
//! on AVX2: the integer sums are exact and the float operations are the
//! reference's.
//!
//! Every function here requires AVX-512 F, BW and VL plus AVX2, FMA and
//! F16C, and the `VNNI = true` forms AVX-512 VNNI too; the dispatcher only
//! hands them out after checking the CPU. None of this can run on a CPU
//! without AVX-512, so on such machines it is compiled but never called.

use std::arch::x86_64::*;

use super::x86::{self, ScaledDot};
use super::x86_iq::{self, IqLevel};
use crate::blocks::*;

/// Unsigned × signed bytes in 256-bit registers, four neighbouring
/// products per i32 lane.
///
/// # Safety
/// The CPU must support AVX2, and with `VNNI` AVX-512 VNNI and VL.
#[inline(always)]
unsafe fn dot_u8i8_256<const VNNI: bool>(x: __m256i, y: __m256i) -> __m256i {
    // SAFETY: the CPU features are the caller's precondition; registers only.
    unsafe {
        if VNNI {
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y)
        } else {
            _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
        }
    }
}

/// The AVX-512 scaled run product: `vpdpbusd` (or `maddubs` + `madd`
/// without VNNI), then a multiply by the per-half scales.
struct Avx512<const V: bool>;

impl<const V: bool> ScaledDot for Avx512<V> {
    /// # Safety
    /// The CPU must support AVX2, and with `V` AVX-512 VNNI and VL.
    #[inline(always)]
    unsafe fn scaled(q: __m256i, y: __m256i, lo: i32, hi: i32) -> __m256i {
        // SAFETY: the CPU features are the caller's precondition; registers
        // only.
        unsafe {
            // Lanes 0-3 cover the first 16 quants, lanes 4-7 the last 16.
            let s = _mm256_set_m128i(_mm_set1_epi32(hi), _mm_set1_epi32(lo));
            _mm256_mullo_epi32(dot_u8i8_256::<V>(q, y), s)
        }
    }
}

/// Q4_K × Q8_K, one activation row.
///
/// # Safety
/// The CPU must support AVX2, and with `V` AVX-512 VNNI and VL.
#[inline(always)]
unsafe fn q4_k<const V: bool>(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: these are the preconditions of the generic body with
    // `Avx512<V>`.
    unsafe { x86::q4_k::<Avx512<V>, 1>(w, [a])[0] }
}

/// Q5_K × Q8_K, one activation row.
///
/// # Safety
/// The CPU must support AVX2, and with `V` AVX-512 VNNI and VL.
#[inline(always)]
unsafe fn q5_k<const V: bool>(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: these are the preconditions of the generic body with
    // `Avx512<V>`.
    unsafe { x86::q5_k::<Avx512<V>, 1>(w, [a])[0] }
}

/// Q6_K × Q8_K, one activation row.
///
/// # Safety
/// The CPU must support AVX2, and with `V` AVX-512 VNNI and VL.
#[inline(always)]
unsafe fn q6_k<const V: bool>(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    // SAFETY: these are the preconditions of the generic body with
    // `Avx512<V>`.
    unsafe { x86::q6_k::<Avx512<V>, 1>(w, [a])[0] }
}

/// Defines the two entry points of one type, without and with VNNI, on its
/// generic body.
macro_rules! variants {
    ($name:ident, $vnni:ident, $body:ident, $wt:ty, $at:ty) => {
        /// One weight row against one activation row.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW and VL, AVX2, FMA and F16C.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$wt], a: &[$at]) -> f32 {
            // SAFETY: this function's features cover the body's.
            unsafe { $body::<false>(w, a) }
        }

        /// As the form without VNNI, with `vpdpbusd`.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and
        /// F16C.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub unsafe fn $vnni(w: &[$wt], a: &[$at]) -> f32 {
            // SAFETY: this function's features cover the body's.
            unsafe { $body::<true>(w, a) }
        }
    };
}

variants!(dot_q4_k, dot_q4_k_vnni, q4_k, BlockQ4K, BlockQ8K);
variants!(dot_q5_k, dot_q5_k_vnni, q5_k, BlockQ5K, BlockQ8K);
variants!(dot_q6_k, dot_q6_k_vnni, q6_k, BlockQ6K, BlockQ8K);

impl<const V: bool> IqLevel for Avx512<V> {
    /// `vpmaddubsw`, then the scales: with VNNI one `vpdpwssd` multiplies
    /// and accumulates, without it `vpmaddwd` and an add, as on AVX2. (The
    /// `vpdpbusd` + `vpmulld` of [`ScaledDot::scaled`] costs more here,
    /// where every 32 weights have their own scale.)
    ///
    /// # Safety
    /// The CPU must support AVX2, and with `V` AVX-512 VNNI and VL.
    #[inline(always)]
    unsafe fn dot_acc(acc: __m256i, q: __m256i, y: __m256i, scales: __m256i) -> __m256i {
        // SAFETY: the CPU features are the caller's precondition; registers
        // only.
        unsafe {
            let p16 = _mm256_maddubs_epi16(q, y);
            if V {
                _mm256_dpwssd_epi32(acc, p16, scales)
            } else {
                _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scales))
            }
        }
    }

    /// # Safety
    /// The CPU must support AVX-512 BW and VL.
    #[inline(always)]
    unsafe fn negate_where(y: __m256i, bits: u32) -> __m256i {
        // SAFETY: AVX-512 BW and VL are the caller's precondition; registers
        // only. The sign bits are the byte mask as they are.
        unsafe { _mm256_mask_sub_epi8(y, bits, _mm256_setzero_si256(), y) }
    }
}

/// Defines the two entry points of each grid type, without and with VNNI,
/// on its generic body in `x86_iq`.
macro_rules! iq_variants {
    ($($body:ident, $name:ident, $vnni:ident, $wt:ty;)*) => {$(
        /// One weight row against one activation row, bit-exact with the
        /// scalar reference of the type.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW and VL, AVX2, FMA and F16C.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$wt], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's features cover the body's.
            unsafe { x86_iq::$body::<Avx512<false>>(w, a) }
        }

        /// As the form without VNNI, with `vpdpbusd`.
        ///
        /// # Safety
        /// The CPU must support AVX-512 F, BW, VL and VNNI, AVX2, FMA and
        /// F16C.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub unsafe fn $vnni(w: &[$wt], a: &[BlockQ8K]) -> f32 {
            // SAFETY: this function's features cover the body's.
            unsafe { x86_iq::$body::<Avx512<true>>(w, a) }
        }
    )*};
}

iq_variants! {
    iq2_xxs, dot_iq2_xxs, dot_iq2_xxs_vnni, BlockIQ2XXS;
    iq2_xs, dot_iq2_xs, dot_iq2_xs_vnni, BlockIQ2XS;
    iq2_s, dot_iq2_s, dot_iq2_s_vnni, BlockIQ2S;
    iq3_s, dot_iq3_s, dot_iq3_s_vnni, BlockIQ3S;
    iq1_s, dot_iq1_s, dot_iq1_s_vnni, BlockIQ1S;
}
