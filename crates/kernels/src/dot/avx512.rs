//! AVX-512 dot products, with a VNNI variant of each (`vpdpbusd` replaces
//! the `maddubs` + `madd` pair) chosen once when the CPU has it.
//!
//! Legacy types process two blocks per 512-bit register; the K-quants keep
//! 256-bit registers (their sub-block scales change every 32 quants) and
//! gain from VNNI and the wider register file. Results are bit-exact with
//! the scalar reference for the same reason as on AVX2: the integer sums
//! are exact and the float operations are the reference's.
//!
//! Every function here requires AVX-512 F, BW and VL plus AVX2, FMA and
//! F16C, and the `VNNI = true` forms AVX-512 VNNI too; the dispatcher only
//! hands them out after checking the CPU. None of this can run on a CPU
//! without AVX-512, so on such machines it is compiled but never called.

use std::arch::x86_64::*;

use super::scalar;
use super::x86::{self, block_totals, load32, nibbles, q5_bytes, ScaledDot};
use crate::blocks::*;

/// Unsigned × signed bytes, four neighbouring products per i32 lane.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, and with `VNNI` AVX-512 VNNI.
#[inline(always)]
unsafe fn dot_u8i8_512<const VNNI: bool>(x: __m512i, y: __m512i) -> __m512i {
    // SAFETY: the CPU features are the caller's precondition; registers only.
    unsafe {
        if VNNI {
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y)
        } else {
            _mm512_madd_epi16(_mm512_maddubs_epi16(x, y), _mm512_set1_epi16(1))
        }
    }
}

/// Signed × signed bytes (activations never hold -128).
///
/// # Safety
/// The CPU must support AVX-512 F and BW, and with `VNNI` AVX-512 VNNI.
#[inline(always)]
unsafe fn dot_i8_512<const VNNI: bool>(x: __m512i, y: __m512i) -> __m512i {
    // SAFETY: as in `dot_u8i8_512`, whose preconditions these are.
    unsafe {
        let ax = _mm512_abs_epi8(x);
        let neg = _mm512_movepi8_mask(x);
        let sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
        dot_u8i8_512::<VNNI>(ax, sy)
    }
}

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

/// Two 256-bit halves as one 512-bit register, `lo` first.
///
/// # Safety
/// The CPU must support AVX-512 F.
#[inline(always)]
unsafe fn join(lo: __m256i, hi: __m256i) -> __m512i {
    // SAFETY: AVX-512 F is the caller's precondition; registers only.
    unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
}

/// Exact totals of blocks `i..i + 4` from two registers of two blocks each.
///
/// # Safety
/// The CPU must support AVX-512 F and AVX2.
#[inline(always)]
unsafe fn pair_totals(p01: __m512i, p23: __m512i) -> __m128i {
    // SAFETY: the CPU features are the caller's precondition; registers only.
    unsafe {
        block_totals(
            _mm512_castsi512_si256(p01),
            _mm512_extracti64x4_epi64::<1>(p01),
            _mm512_castsi512_si256(p23),
            _mm512_extracti64x4_epi64::<1>(p23),
        )
    }
}

/// The legacy-type loop; `pair(i)` gives the lanes of blocks `i` and
/// `i + 1` in one register.
///
/// # Safety
/// The CPU must support AVX-512 F, AVX2 and F16C.
#[inline(always)]
unsafe fn legacy(
    nb: usize,
    pair: impl Fn(usize) -> __m512i,
    scales: impl Fn(usize) -> (F16Bits, F16Bits),
    extra: Option<&dyn Fn(usize) -> (F16Bits, F16Bits)>,
    tail: impl Fn(usize) -> f32,
) -> f32 {
    // SAFETY: the CPU features are the caller's precondition, and cover
    // `pair_totals` and `legacy_driver`.
    unsafe {
        x86::legacy_driver(
            nb,
            |i| pair_totals(pair(i), pair(i + 2)),
            scales,
            extra,
            tail,
        )
    }
}

/// Q4_0 × Q8_0, two blocks per 512-bit register.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, AVX2 and F16C, and with `V`
/// AVX-512 VNNI.
#[inline(always)]
unsafe fn q4_0<const V: bool>(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition, and cover every
    // helper. Blocks are reached by bounds-checked indexing; `nibbles` and
    // `load32` read a block's 16 or 32 quant bytes through references.
    unsafe {
        let eight = _mm512_set1_epi8(8);
        legacy(
            w.len(),
            |i| {
                let x = _mm512_sub_epi8(join(nibbles(&w[i].qs), nibbles(&w[i + 1].qs)), eight);
                dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
            },
            |i| (w[i].d, a[i].d),
            None,
            |i| scalar::dot_q4_0(&w[i..i + 1], &a[i..i + 1]),
        )
    }
}

/// Q4_1 × Q8_1, two blocks per 512-bit register.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, AVX2 and F16C, and with `V`
/// AVX-512 VNNI.
#[inline(always)]
unsafe fn q4_1<const V: bool>(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition, and cover every
    // helper. Blocks are reached by bounds-checked indexing; `nibbles` and
    // `load32` read a block's 16 or 32 quant bytes through references.
    unsafe {
        legacy(
            w.len(),
            |i| {
                let x = join(nibbles(&w[i].qs), nibbles(&w[i + 1].qs));
                dot_u8i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
            },
            |i| (w[i].d, a[i].d),
            Some(&|i| (w[i].m, a[i].s)),
            |i| scalar::dot_q4_1(&w[i..i + 1], &a[i..i + 1]),
        )
    }
}

/// Q5_0 × Q8_0, two blocks per 512-bit register.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, AVX2 and F16C, and with `V`
/// AVX-512 VNNI.
#[inline(always)]
unsafe fn q5_0<const V: bool>(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition, and cover every
    // helper. Blocks are reached by bounds-checked indexing; `nibbles`, `q5_bytes` and
    // `load32` read a block's 16 or 32 quant bytes through references.
    unsafe {
        let sixteen = _mm512_set1_epi8(16);
        legacy(
            w.len(),
            |i| {
                let x = join(
                    q5_bytes(&w[i].qs, w[i].qh),
                    q5_bytes(&w[i + 1].qs, w[i + 1].qh),
                );
                let x = _mm512_sub_epi8(x, sixteen);
                dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
            },
            |i| (w[i].d, a[i].d),
            None,
            |i| scalar::dot_q5_0(&w[i..i + 1], &a[i..i + 1]),
        )
    }
}

/// Q8_0 × Q8_0, two blocks per 512-bit register.
///
/// # Safety
/// The CPU must support AVX-512 F and BW, AVX2 and F16C, and with `V`
/// AVX-512 VNNI.
#[inline(always)]
unsafe fn q8_0<const V: bool>(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    // SAFETY: the CPU features are the caller's precondition, and cover every
    // helper. Blocks are reached by bounds-checked indexing; `nibbles` and
    // `load32` read a block's 16 or 32 quant bytes through references.
    unsafe {
        legacy(
            w.len(),
            |i| {
                let x = join(load32(&w[i].qs), load32(&w[i + 1].qs));
                dot_i8_512::<V>(x, join(load32(&a[i].qs), load32(&a[i + 1].qs)))
            },
            |i| (w[i].d, a[i].d),
            None,
            |i| scalar::dot_q8_0(&w[i..i + 1], &a[i..i + 1]),
        )
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

variants!(dot_q4_0, dot_q4_0_vnni, q4_0, BlockQ4_0, BlockQ8_0);
variants!(dot_q4_1, dot_q4_1_vnni, q4_1, BlockQ4_1, BlockQ8_1);
variants!(dot_q5_0, dot_q5_0_vnni, q5_0, BlockQ5_0, BlockQ8_0);
variants!(dot_q8_0, dot_q8_0_vnni, q8_0, BlockQ8_0, BlockQ8_0);
variants!(dot_q4_k, dot_q4_k_vnni, q4_k, BlockQ4K, BlockQ8K);
variants!(dot_q5_k, dot_q5_k_vnni, q5_k, BlockQ5K, BlockQ8K);
variants!(dot_q6_k, dot_q6_k_vnni, q6_k, BlockQ6K, BlockQ8K);
