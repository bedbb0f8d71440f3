//! AVX2 dot products. Each reproduces the arithmetic of its scalar
//! reference in `scalar.rs` exactly (see the module doc there): integer
//! sums per block, then the same float operations in the same order.
//!
//! Every function here requires AVX2, FMA and F16C; the dispatcher only
//! hands them out after checking the CPU.

use std::arch::x86_64::*;

use super::scalar::{self, k_combine};
use super::x86::{self, hsum_i32, load32, nibbles, q5_bytes, ScaledDot};
use super::x86_iq::{self, IqLevel};
use crate::blocks::*;

/// Signed × signed byte dot into eight i32 lanes (each lane the sum of four
/// neighbouring products). `y` must not hold -128, which activations never
/// do: the quantizers produce values in [-127, 127]. (A -128 gives a wrong
/// sum, not undefined behaviour.)
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        let p16 = _mm256_maddubs_epi16(ax, sy);
        _mm256_madd_epi16(p16, _mm256_set1_epi16(1))
    }
}

/// Unsigned × signed byte dot into eight i32 lanes.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn dot_u8i8(x: __m256i, y: __m256i) -> __m256i {
    // SAFETY: AVX2 is the caller's precondition; registers only.
    unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)) }
}

/// Defines the AVX2 kernels of one legacy type: a generic `$rows` body
/// (one weight row against `T` activation rows) and the two entry points,
/// `$one` (one activation row, scales read from its blocks) and `$four`
/// (four rows sharing the unpacking of every weight block, their scales
/// read as f32 from the table the caller made: per row, the `d` of every
/// block, then for Q8_1 the `s` of every block).
///
/// The `unpack` and `pair` expressions run inside `$rows`, with its target
/// features; they may call the `unsafe` helpers of this module and of
/// `x86`, in `unsafe` blocks of their own.
macro_rules! legacy_kernels {
    ($rows:ident, $one:ident, $four:ident, $wt:ty, $at:ty, $min:expr,
     |$w:ident, $a:ident| { $($setup:stmt;)* }
     d: |$di:ident| $d:expr,
     unpack: |$ui:ident| $unpack:expr,
     pair: |$px:ident, $pt:ident, $pi:ident| $pair:expr,
     m: |$mi:ident| $m:expr,
     s: |$st:ident, $si:ident| $s:expr $(,)?) => {
        /// One weight row against `T` activation rows; with `TABLE` the
        /// activation scales come from `table` (see the four-row form),
        /// otherwise from the blocks. Short activation rows or tables panic.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        //
        // The closures below must be compiled with AVX2 enabled, or their
        // intrinsics become out-of-line calls; they inherit the features
        // of the function they are written in.
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $rows<const T: usize, const TABLE: bool>(
            $w: &[$wt],
            $a: [&[$at]; T],
            table: [&[f32]; T],
        ) -> [f32; T] {
            const MIN: bool = $min;
            $($setup)*
            let nb = $w.len();
            let s_of = |$st: usize, $si: usize| -> F16Bits { $s };
            let unpack = |$ui: usize| $unpack;
            let pair = |$px: __m256i, $pt: usize, $pi: usize| $pair;
            let dw = |$di: usize| $d;
            let m = |$mi: usize| -> F16Bits { $m };
            let act4 = |t: usize, i: usize| {
                if TABLE {
                    let d = &table[t][i..i + 4];
                    // SAFETY: the bounds-checked slice `d` holds the four f32
                    // values loaded.
                    let d = unsafe { _mm_loadu_ps(d.as_ptr()) };
                    let s = if MIN {
                        let s = &table[t][nb + i..nb + i + 4];
                        // SAFETY: as for `d`.
                        unsafe { _mm_loadu_ps(s.as_ptr()) }
                    } else {
                        _mm_setzero_ps()
                    };
                    (d, s)
                } else {
                    let a = $a[t];
                    // SAFETY: F16C is this function's precondition.
                    let d = unsafe { x86::f16x4(a[i].d, a[i + 1].d, a[i + 2].d, a[i + 3].d) };
                    let s = if MIN {
                        // SAFETY: as above.
                        unsafe {
                            x86::f16x4(s_of(t, i), s_of(t, i + 1), s_of(t, i + 2), s_of(t, i + 3))
                        }
                    } else {
                        _mm_setzero_ps()
                    };
                    (d, s)
                }
            };
            let act1 = |t: usize, i: usize| {
                if TABLE {
                    (table[t][i], if MIN { table[t][nb + i] } else { 0.0 })
                } else {
                    let s = if MIN { f16_to_f32(s_of(t, i)) } else { 0.0 };
                    (f16_to_f32($a[t][i].d), s)
                }
            };
            // SAFETY: AVX2 and F16C, `legacy_rows`' preconditions, are this
            // function's.
            unsafe { x86::legacy_rows::<T, MIN, __m256i, _>(nb, unpack, pair, dw, m, act4, act1) }
        }

        /// One weight row against one activation row.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $one(w: &[$wt], a: &[$at]) -> f32 {
            // SAFETY: same preconditions.
            unsafe { $rows::<1, false>(w, [a], [&[]])[0] }
        }

        /// One weight row against four activation rows, their scales read
        /// from `table` (per row as `dot::scale_table` lays it out).
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $four(w: &[$wt], a: [&[$at]; 4], table: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: same preconditions.
            unsafe { $rows::<4, true>(w, a, table) }
        }
    };
}

// In the invocations below, the helpers need AVX2, which the generated
// kernels enable and the dispatcher checked before handing them out.

legacy_kernels!(q4_0_rows, dot_q4_0, dot4_q4_0, BlockQ4_0, BlockQ8_0, false,
    |w, a| { let eight = _mm256_set1_epi8(8); }
    d: |i| w[i].d,
    // SAFETY: AVX2 (see above); `nibbles` reads the block's 16 bytes.
    unpack: |i| unsafe { _mm256_sub_epi8(nibbles(&w[i].qs), eight) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_i8(x, load32(&a[t][i].qs)) },
    m: |_i| [0; 2],
    s: |_t, _i| [0; 2],
);

legacy_kernels!(q4_1_rows, dot_q4_1, dot4_q4_1, BlockQ4_1, BlockQ8_1, true,
    |w, a| {}
    d: |i| w[i].d,
    // SAFETY: AVX2; `nibbles` reads the block's 16 bytes.
    unpack: |i| unsafe { nibbles(&w[i].qs) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_u8i8(x, load32(&a[t][i].qs)) },
    m: |i| w[i].m,
    s: |t, i| a[t][i].s,
);

legacy_kernels!(q5_0_rows, dot_q5_0, dot4_q5_0, BlockQ5_0, BlockQ8_0, false,
    |w, a| { let sixteen = _mm256_set1_epi8(16); }
    d: |i| w[i].d,
    // SAFETY: AVX2; `q5_bytes` reads the block's 16 bytes of nibbles.
    unpack: |i| unsafe { _mm256_sub_epi8(q5_bytes(&w[i].qs, w[i].qh), sixteen) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_i8(x, load32(&a[t][i].qs)) },
    m: |_i| [0; 2],
    s: |_t, _i| [0; 2],
);

legacy_kernels!(q5_1_rows, dot_q5_1, dot4_q5_1, BlockQ5_1, BlockQ8_1, true,
    |w, a| {}
    d: |i| w[i].d,
    // SAFETY: AVX2; `q5_bytes` reads the block's 16 bytes of nibbles.
    unpack: |i| unsafe { q5_bytes(&w[i].qs, w[i].qh) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_u8i8(x, load32(&a[t][i].qs)) },
    m: |i| w[i].m,
    s: |t, i| a[t][i].s,
);

legacy_kernels!(q8_0_rows, dot_q8_0, dot4_q8_0, BlockQ8_0, BlockQ8_0, false,
    |w, a| {}
    d: |i| w[i].d,
    // SAFETY: AVX2; `load32` reads the 32 quants of the weight block.
    unpack: |i| unsafe { load32(&w[i].qs) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_i8(x, load32(&a[t][i].qs)) },
    m: |_i| [0; 2],
    s: |_t, _i| [0; 2],
);

legacy_kernels!(mxfp4_rows, dot_mxfp4, dot4_mxfp4, BlockMXFP4, BlockQ8_0, false,
    |w, a| {
        // SAFETY: the load reads the 16 bytes of the table.
        let table = _mm256_broadcastsi128_si256(unsafe {
            _mm_loadu_si128(KVALUES_MXFP4.as_ptr() as *const __m128i)
        });
    }
    d: |i| x86::E8M0(w[i].e),
    // SAFETY: AVX2; `nibbles` reads the block's 16 bytes.
    unpack: |i| unsafe { _mm256_shuffle_epi8(table, nibbles(&w[i].qs)) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_i8(x, load32(&a[t][i].qs)) },
    m: |_i| [0; 2],
    s: |_t, _i| [0; 2],
);

legacy_kernels!(iq4_nl_rows, dot_iq4_nl, dot4_iq4_nl, BlockIQ4NL, BlockQ8_0, false,
    |w, a| {
        // SAFETY: the load reads the 16 bytes of the codebook.
        let table = _mm256_broadcastsi128_si256(unsafe {
            _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i)
        });
    }
    d: |i| w[i].d,
    // SAFETY: AVX2; `nibbles` reads the block's 16 bytes.
    unpack: |i| unsafe { _mm256_shuffle_epi8(table, nibbles(&w[i].qs)) },
    // SAFETY: AVX2; `load32` reads the 32 quants of the activation block.
    pair: |x, t, i| unsafe { dot_i8(x, load32(&a[t][i].qs)) },
    m: |_i| [0; 2],
    s: |_t, _i| [0; 2],
);

/// The AVX2 scaled run product: `maddubs` pairs, then `madd` with the
/// per-half scales.
struct Avx2;

impl ScaledDot for Avx2 {
    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn scaled(q: __m256i, y: __m256i, lo: i32, hi: i32) -> __m256i {
        // SAFETY: AVX2 is the caller's precondition; registers only.
        unsafe {
            let s = _mm256_set_m128i(_mm_set1_epi16(hi as i16), _mm_set1_epi16(lo as i16));
            _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s)
        }
    }
}

/// Defines the one-row and four-row AVX2 entry points of a K-quant type on
/// its generic body in `x86`.
macro_rules! k_kernels {
    ($body:ident, $one:ident, $four:ident, $wt:ty) => {
        /// One weight row against one activation row.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $one(w: &[$wt], a: &[BlockQ8K]) -> f32 {
            // SAFETY: the body needs AVX2 (`Avx2::scaled` too), which this
            // function's precondition covers.
            unsafe { x86::$body::<Avx2, 1>(w, [a])[0] }
        }

        /// One weight row against four activation rows. The scale table is
        /// unused: Q8_K keeps its scales in f32.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $four(w: &[$wt], a: [&[BlockQ8K]; 4], _table: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: as in the one-row form.
            unsafe { x86::$body::<Avx2, 4>(w, a) }
        }
    };
}

k_kernels!(q4_k, dot_q4_k, dot4_q4_k, BlockQ4K);
k_kernels!(q5_k, dot_q5_k, dot4_q5_k, BlockQ5K);
k_kernels!(q6_k, dot_q6_k, dot4_q6_k, BlockQ6K);

impl IqLevel for Avx2 {
    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn dot_acc(acc: __m256i, q: __m256i, y: __m256i, scales: __m256i) -> __m256i {
        // SAFETY: AVX2 is the caller's precondition; registers only.
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), scales)) }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn negate_where(y: __m256i, bits: u32) -> __m256i {
        // SAFETY: AVX2 is the caller's precondition; registers only.
        unsafe {
            // Two's complement negation where the mask is all ones:
            // (y ^ -1) - (-1) = -y; (y ^ 0) - 0 = y.
            let m = x86::bits_to_bytes(bits);
            _mm256_sub_epi8(_mm256_xor_si256(y, m), m)
        }
    }
}

/// Defines the AVX2 entry point of each grid type on its generic body in
/// `x86_iq`.
macro_rules! iq_kernels {
    ($($body:ident, $one:ident, $wt:ty;)*) => {$(
        /// One weight row against one activation row, bit-exact with the
        /// scalar reference of the type.
        ///
        /// # Safety
        /// The CPU must support AVX2, FMA and F16C.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $one(w: &[$wt], a: &[BlockQ8K]) -> f32 {
            // SAFETY: the body needs AVX2 (`Avx2`'s primitives too), which
            // this function's precondition covers.
            unsafe { x86_iq::$body::<Avx2>(w, a) }
        }
    )*};
}

iq_kernels! {
    iq2_xxs, dot_iq2_xxs, BlockIQ2XXS;
    iq2_xs, dot_iq2_xs, BlockIQ2XS;
    iq2_s, dot_iq2_s, BlockIQ2S;
    iq3_xxs, dot_iq3_xxs, BlockIQ3XXS;
    iq3_s, dot_iq3_s, BlockIQ3S;
    iq1_s, dot_iq1_s, BlockIQ1S;
}

/// IQ4_XS × Q8_K, bit-exact with [`scalar::dot_iq4_xs`].
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_iq4_xs(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
    // SAFETY: the load reads the 16 bytes of the codebook.
    let table = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i) };
    let table = _mm256_broadcastsi128_si256(table);
    let mut acc = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = _mm256_setzero_si256();
        for ib in 0..8 {
            // SAFETY: the slice is 16 bytes long (`ib < 8` keeps it inside
            // the 128 of `x.qs`), so the conversion cannot fail.
            let qs: &[u8; 16] =
                unsafe { x.qs[16 * ib..16 * ib + 16].try_into().unwrap_unchecked() };
            // SAFETY: AVX2 is this function's precondition; `nibbles` reads
            // `qs`. The load reads activation quants `32 * ib..32 * ib + 32`,
            // inside the 256 of `y.qs` for `ib < 8`.
            let (v, yv) = unsafe {
                (
                    _mm256_shuffle_epi8(table, nibbles(qs)),
                    _mm256_loadu_si256(y.qs.as_ptr().add(32 * ib) as *const __m256i),
                )
            };
            // SAFETY: AVX2 is this function's precondition.
            let p = unsafe { dot_i8(v, yv) };
            let s = _mm256_set1_epi32(scalar::iq4xs_scale(x, ib));
            sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, s));
        }
        let d = f16_to_f32(x.d) * y.d;
        // SAFETY: AVX2 is this function's precondition.
        let isum = unsafe { hsum_i32(sumi) };
        acc = k_combine(acc, d, isum, 0.0, 0);
    }
    acc
}

/// Float dot with eight FMA lanes (not bit-exact with the scalar order),
/// over the first `min(w.len(), a.len())` elements.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f32(w: &[f32], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: elements `i + 8 * k..i + 8 * k + 8` end at most at
            // `i + 32 <= n`, inside both slices.
            let (x, y) = unsafe {
                (
                    _mm256_loadu_ps(w.as_ptr().add(i + 8 * k)),
                    _mm256_loadu_ps(a.as_ptr().add(i + 8 * k)),
                )
            };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    let total = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    // SAFETY: AVX is this function's precondition.
    let mut sum = unsafe { hsum_f32(total) };
    for j in i..n {
        sum += w[j] * a[j];
    }
    sum
}

/// f16 weights × f32 activations with FMA lanes, over the first
/// `min(w.len(), a.len())` elements.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f16(w: &[F16Bits], a: &[f32]) -> f32 {
    let n = w.len().min(a.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: elements `i + 8 * k..i + 8 * k + 8` end at most at
            // `i + 16 <= n`, inside both slices (eight 2-byte halves are
            // the 16 bytes loaded from `w`).
            let (h, y) = unsafe {
                (
                    _mm_loadu_si128(w.as_ptr().add(i + 8 * k) as *const __m128i),
                    _mm256_loadu_ps(a.as_ptr().add(i + 8 * k)),
                )
            };
            let x = _mm256_cvtph_ps(h);
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 16;
    }
    // SAFETY: AVX is this function's precondition.
    let mut sum = unsafe { hsum_f32(_mm256_add_ps(acc[0], acc[1])) };
    for j in i..n {
        sum += f16_to_f32(w[j]) * a[j];
    }
    sum
}

/// Horizontal sum of eight f32 lanes.
///
/// # Safety
/// The CPU must support AVX.
#[inline(always)]
unsafe fn hsum_f32(v: __m256) -> f32 {
    // SAFETY: AVX is the caller's precondition; registers only.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}
