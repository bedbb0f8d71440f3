//! The AVX-512 form of the weighted sum over rows (attention's `Σ p_j v_j`):
//! sixteen f32 lanes per instruction instead of eight, with the same
//! fused multiply-add per element and row, in row order, so the bits are
//! those of the scalar and AVX2 loops.

use std::arch::x86_64::*;

use super::base::Rows;
use super::x86::{far, prefetch_row, AHEAD};

/// Sixteen row elements as f32.
pub(super) trait Load16: Sized {
    /// # Safety
    /// The CPU has AVX-512 F (and F16C for halves); `x` points at sixteen
    /// readable values.
    unsafe fn load16(x: *const Self) -> __m512;
}

impl Load16 for f32 {
    #[inline(always)]
    unsafe fn load16(x: *const f32) -> __m512 {
        // SAFETY: the caller's contract; the load is unaligned.
        unsafe { _mm512_loadu_ps(x) }
    }
}

impl Load16 for u16 {
    #[inline(always)]
    unsafe fn load16(x: *const u16) -> __m512 {
        // SAFETY: the caller's contract; sixteen halves are 32 bytes,
        // converted exactly.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(x.cast())) }
    }
}

/// `$acc += $x · *$w`, with the f32 at `$w` broadcast from memory inside
/// the multiply: a macro, so that the asm sits in the AVX-512 function
/// that uses it (an inlined helper would not have the feature).
///
/// Written out because LLVM, when one weight serves several registers,
/// broadcasts it once into a register, and on Zen 4 that broadcast costs
/// a vector-unit slot per head and row: the sums over V ran 14 % slower
/// that way. The operation is the IEEE fused multiply-add of
/// `_mm512_fmadd_ps(_mm512_set1_ps(*w), x, acc)`.
///
/// The caller's function has AVX-512 F, and `$w` points at a readable
/// f32; the asm reads those four bytes, writes only its register
/// operands and touches neither the stack nor the flags.
macro_rules! add_mul_bcast {
    ($acc:expr, $x:expr, $w:expr) => {
        std::arch::asm!(
            "vfmadd231ps {a}, {x}, dword ptr [{w}]{{1to16}}",
            w = in(reg) $w,
            x = in(zmm_reg) $x,
            a = inout(zmm_reg) $acc,
            options(nostack, readonly, preserves_flags, pure),
        )
    };
}

/// Whether [`axpy64`] can take the call: outputs a whole number of 64
/// values, one weight per row, every row readable.
pub(super) fn fits<T>(weights: &[f32], rows: &Rows<'_, T>, n: usize) -> bool {
    n > 0 && n.is_multiple_of(64) && weights.len() == rows.idx.len() && rows.all_readable(n)
}

/// `out += Σ_j weights[j] · row_j`, 64 outputs at a time held in four
/// registers over all the rows.
///
/// # Safety
/// The CPU has AVX-512 F and F16C, and [`fits`] holds for the call.
#[target_feature(enable = "avx512f,avx,f16c")]
pub(super) unsafe fn axpy64<T: Load16>(weights: &[f32], rows: Rows<'_, T>, out: &mut [f32]) {
    let n = out.len();
    let mut c0 = 0;
    while c0 < n {
        // SAFETY: the features are the caller's; loads and stores touch
        // sixteen values at `c0 + 16 v < n` of `out` and of each row, which
        // `fits` showed to hold `n` values.
        unsafe {
            let at = |v: usize| c0 + 16 * v;
            let mut acc: [__m512; 4] =
                std::array::from_fn(|v| _mm512_loadu_ps(out.as_ptr().add(at(v))));
            for (&w, &i) in weights.iter().zip(rows.idx) {
                let Ok(r) = rows.row(i, n) else {
                    // Checked by `fits`.
                    continue;
                };
                for (v, a) in acc.iter_mut().enumerate() {
                    add_mul_bcast!(*a, T::load16(r.as_ptr().add(at(v))), &raw const w);
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(at(v)), *a);
            }
        }
        c0 += 64;
    }
}

/// Eight row elements at `a` in lanes `0..8` and eight at `b` in lanes
/// `8..16`, as f32: two rows' chunks side by side.
pub(super) trait LoadPair: Sized {
    /// # Safety
    /// The CPU has AVX-512 F (and F16C for halves); `a` and `b` point at
    /// eight readable values each.
    unsafe fn load_pair(a: *const Self, b: *const Self) -> __m512;
}

impl LoadPair for f32 {
    #[inline(always)]
    unsafe fn load_pair(a: *const f32, b: *const f32) -> __m512 {
        // SAFETY: the caller's contract; two unaligned 32-byte loads.
        unsafe {
            let lo = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(a)));
            let hi = _mm256_castps_pd(_mm256_loadu_ps(b));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(lo, hi))
        }
    }
}

impl LoadPair for u16 {
    #[inline(always)]
    unsafe fn load_pair(a: *const u16, b: *const u16) -> __m512 {
        // SAFETY: the caller's contract; two unaligned 16-byte loads,
        // converted exactly.
        unsafe {
            let lo = _mm256_castsi128_si256(_mm_loadu_si128(a.cast()));
            _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(lo, _mm_loadu_si128(b.cast())))
        }
    }
}

/// Scores of `H` query heads (`qs`, `hd` values each, one after another)
/// against the rows of `rows`, eight rows at a time: head `g`'s score of
/// row `j` goes to `scores[g * stride + j]`. Each score is the one-head
/// loop's: per row, lane `l` sums `q[c + l] * row[c + l]` over `c` in
/// steps of eight (one fused multiply-add each), and the lanes are
/// combined by the shared tree; here two rows share a 512-bit register and
/// the rows' loads and conversions serve all the heads. Returns how many rows (a
/// multiple of eight) it scored; the caller scores the rest.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2 and F16C; `hd` is a positive multiple of
/// eight, `qs` holds `H * hd` values, every row of `rows` is readable with
/// `hd` values, and `scores` holds
/// `(H - 1) * stride + rows.idx.len()` values.
#[target_feature(enable = "avx512f,avx,avx2,f16c")]
pub(super) unsafe fn dot_heads<T: LoadPair, const H: usize>(
    qs: &[f32],
    hd: usize,
    rows: &Rows<'_, T>,
    scale: f32,
    scores: &mut [f32],
    stride: usize,
) -> usize {
    let n8 = rows.idx.len() / 8 * 8;
    for j0 in (0..n8).step_by(8) {
        // SAFETY: the features are the caller's; every row is readable
        // with `hd` values and the loads read eight values at `c < hd`
        // (a multiple of eight) of a row or of a head of `qs`; the stores
        // write eight scores at `g * stride + j0 + 8 <= (H - 1) * stride +
        // n8`, inside `scores`.
        unsafe {
            let r: [*const T; 8] = std::array::from_fn(|k| {
                rows.row(rows.idx[j0 + k], hd)
                    .map_or(std::ptr::null(), <[T]>::as_ptr)
            });
            if far(rows) {
                for k in 0..8 {
                    prefetch_row(rows, j0 + AHEAD + k, hd);
                }
            }
            let mut acc = [[_mm512_setzero_ps(); 4]; H];
            let mut c = 0;
            while c < hd {
                let k: [__m512; 4] =
                    std::array::from_fn(|p| T::load_pair(r[p].add(c), r[p + 4].add(c)));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let q = _mm512_castps256_ps512(_mm256_loadu_ps(qs.as_ptr().add(g * hd + c)));
                    let q = _mm512_shuffle_f32x4::<0x44>(q, q);
                    for (a, k) in acc.iter_mut().zip(&k) {
                        *a = _mm512_fmadd_ps(q, *k, *a);
                    }
                }
                c += 8;
            }
            for (g, acc) in acc.iter().enumerate() {
                let lo = |p: usize| _mm512_castps512_ps256(acc[p]);
                let hi = |p: usize| {
                    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[p])))
                };
                let v =
                    super::x86::combine8([lo(0), lo(1), lo(2), lo(3), hi(0), hi(1), hi(2), hi(3)]);
                let v = _mm256_mul_ps(_mm256_set1_ps(scale), v);
                _mm256_storeu_ps(scores.as_mut_ptr().add(g * stride + j0), v);
            }
        }
    }
    n8
}

/// `outs[g] += Σ_j weights[g * stride + j] · row_j` for `H` heads
/// (`outs` holds `H` heads of `hd` values, one after another): each row is
/// loaded and converted once for all the heads, and each output element
/// gets the one-head loop's fused multiply-add per row, in row order.
///
/// # Safety
/// The CPU has AVX-512 F and F16C; `hd` is a positive multiple of 64,
/// every row of `rows` is readable with `hd` values,
/// `outs` holds `H * hd` values and `weights` holds
/// `(H - 1) * stride + rows.idx.len()`.
#[target_feature(enable = "avx512f,avx,f16c")]
pub(super) unsafe fn axpy_heads<T: Load16, const H: usize>(
    weights: &[f32],
    stride: usize,
    rows: &Rows<'_, T>,
    outs: &mut [f32],
    hd: usize,
) {
    let mut c0 = 0;
    while c0 < hd {
        // SAFETY: the features are the caller's; loads and stores touch
        // sixteen values at `c0 + 16 v < hd` of a row or of a head of
        // `outs`; the weight reads at `g * stride + j` lie inside `weights`.
        unsafe {
            let at = |g: usize, v: usize| g * hd + c0 + 16 * v;
            let mut acc: [[__m512; 4]; H] = std::array::from_fn(|g| {
                std::array::from_fn(|v| _mm512_loadu_ps(outs.as_ptr().add(at(g, v))))
            });
            // The first pass over the rows asks for the rows ahead.
            let ahead = c0 == 0 && far(rows);
            for (j, &i) in rows.idx.iter().enumerate() {
                if ahead {
                    prefetch_row(rows, j + AHEAD, hd);
                }
                let Ok(r) = rows.row(i, hd) else {
                    // Checked by the caller.
                    continue;
                };
                let x: [__m512; 4] =
                    std::array::from_fn(|v| T::load16(r.as_ptr().add(c0 + 16 * v)));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let w = weights.as_ptr().add(g * stride + j);
                    for (a, x) in acc.iter_mut().zip(&x) {
                        add_mul_bcast!(*a, *x, w);
                    }
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                for (v, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(outs.as_mut_ptr().add(at(g, v)), *a);
                }
            }
        }
        c0 += 64;
    }
}

/// [`axpy_heads`] for up to eight heads at once, 32 outputs of each per
/// pass over the rows (two registers a head), so that each row chunk is
/// loaded and converted once for all of them: a group of seven heads
/// shares every conversion instead of splitting into four and three.
/// Each output element gets the same fused multiply-add per row, in row
/// order.
///
/// # Safety
/// As [`axpy_heads`], with `hd` a positive multiple of 32.
#[target_feature(enable = "avx512f,avx,f16c")]
pub(super) unsafe fn axpy_heads32<T: Load16, const H: usize>(
    weights: &[f32],
    stride: usize,
    rows: &Rows<'_, T>,
    outs: &mut [f32],
    hd: usize,
) {
    let mut c0 = 0;
    while c0 < hd {
        // SAFETY: the features are the caller's; loads and stores touch
        // sixteen values at `c0 + 16 v < hd` of a row or of a head of
        // `outs`; the weight reads at `g * stride + j` lie inside `weights`.
        unsafe {
            let at = |g: usize, v: usize| g * hd + c0 + 16 * v;
            let mut acc = [[_mm512_setzero_ps(); 2]; H];
            for (g, acc) in acc.iter_mut().enumerate() {
                for (v, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_loadu_ps(outs.as_ptr().add(at(g, v)));
                }
            }
            // The first pass over the rows asks for the rows ahead.
            let ahead = c0 == 0 && far(rows);
            for (j, &i) in rows.idx.iter().enumerate() {
                if ahead {
                    prefetch_row(rows, j + AHEAD, hd);
                }
                // Every row is readable with `hd` values (the caller's
                // contract), so its index is non-negative and its start
                // in bounds: no per-row check in the loop.
                let r = rows
                    .data
                    .as_ptr()
                    .add(i as usize * rows.stride + rows.offset + c0);
                let x0 = T::load16(r);
                let x1 = T::load16(r.add(16));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let w = weights.as_ptr().add(g * stride + j);
                    add_mul_bcast!(acc[0], x0, w);
                    add_mul_bcast!(acc[1], x1, w);
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                for (v, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(outs.as_mut_ptr().add(at(g, v)), *a);
                }
            }
        }
        c0 += 32;
    }
}
