//! Blocks of rows widened to f32 once and then read by many queries: the
//! key blocks that a tile of attention queries shares.
//!
//! Scoring a query against f16 rows in place costs a conversion per value
//! and, to keep each row's eight partial sums in the lanes of a register,
//! a transpose of the sums per eight rows. When many queries read the same
//! block, both are better paid once for the block: [`RowKernels::f16_cols`]
//! widens the rows and stores them column by column (value `e` of every
//! row side by side), and [`RowKernels::dot_cols_heads`] then scores
//! sixteen rows per register with no transpose at all: partial sum `l` of
//! sixteen rows is one register, fed the values `l, l + 8, …` of each row
//! in order, and the eight registers are combined lane by lane in the
//! fixed order of [`dot_f32`](super::dot_f32). Every score is bit for bit
//! what the row loops give the same row.
//!
//! On AVX-512 the partial sums are taken one at a time: partial sum `l`
//! of up to eight heads and 48 rows is 21 or 24 registers, built from
//! every eighth column, then put aside in memory while the next is built.
//! That way a column load serves every head and a query value three
//! registers of rows, where holding all eight partial sums in registers
//! allowed three heads and one register of rows, and the loop waited on
//! its loads.

use std::ops::Range;

use super::base::{check_spaced, combine, half_to_f32, RowKernels, Rows};
use crate::error::KernelError;

/// Checks a column block of `hd` values per row, `ld` apart, against a
/// buffer of `len` values, for rows below `end`.
fn check_cols(hd: usize, ld: usize, end: usize, len: usize) -> Result<(), KernelError> {
    if end > ld {
        return Err(KernelError::BadLength {
            what: "rows of a column block",
            expected: ld,
            got: end,
        });
    }
    check_spaced("column block", hd, ld, end, len)
}

/// The scalar form of [`RowKernels::f16_cols`] and its f32 form, from
/// row `from` of the set on.
fn cols_with<T: Copy>(
    rows: &Rows<'_, T>,
    from: usize,
    hd: usize,
    cols: &mut [f32],
    ld: usize,
    conv: impl Fn(T) -> f32,
) -> Result<(), KernelError> {
    for (j, &i) in rows.idx.iter().enumerate().skip(from) {
        for (e, &x) in rows.row(i, hd)?.iter().enumerate() {
            cols[e * ld + j] = conv(x);
        }
    }
    Ok(())
}

/// The scalar score of row `j` of a column block: partial sum `e % 8`
/// takes `q[e] * row[e]` in increasing `e`, as [`dot_f32`](super::dot_f32)
/// does, so the result is that function's bits.
#[inline(always)]
fn dot_col(q: &[f32], cols: &[f32], ld: usize, j: usize) -> f32 {
    let mut acc = [0.0f32; 8];
    for (e, &x) in q.iter().enumerate() {
        acc[e % 8] = x.mul_add(cols[e * ld + j], acc[e % 8]);
    }
    combine(&acc)
}

impl RowKernels {
    /// Widens the rows of `rows` (`hd` halves each) to f32 and stores them
    /// column by column: value `e` of row `j` of the set at
    /// `cols[e * ld + j]`. Exact.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when the set has more than `ld` rows or
    /// `cols` cannot hold `hd` columns of them; [`KernelError::RowOutOfRange`]
    /// when a row is negative or reaches past `rows.data`.
    pub fn f16_cols(
        self,
        rows: Rows<'_, u16>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> Result<(), KernelError> {
        check_cols(hd, ld, rows.idx.len(), cols.len())?;
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is only set when the CPU has AVX2 and F16C;
            // the block's shape was checked above.
            done = unsafe { x86::cols::<u16>(&rows, hd, cols, ld) };
        }
        cols_with(&rows, done, hd, cols, ld, half_to_f32)
    }

    /// [`f16_cols`](RowKernels::f16_cols) for rows of f32 values.
    ///
    /// # Errors
    /// As [`f16_cols`](RowKernels::f16_cols).
    pub fn f32_cols(
        self,
        rows: Rows<'_, f32>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> Result<(), KernelError> {
        check_cols(hd, ld, rows.idx.len(), cols.len())?;
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: as in `f16_cols`.
            done = unsafe { x86::cols::<f32>(&rows, hd, cols, ld) };
        }
        cols_with(&rows, done, hd, cols, ld, |x| x)
    }

    /// Scores of several query heads against the rows `rows` of a column
    /// block (as [`f16_cols`](RowKernels::f16_cols) stores them, `hd`
    /// values per row, columns `ld` apart): for head `g` of `qs` (heads of
    /// `hd` values, one after another), `scores[g * stride + j -
    /// rows.start] = scale * dot(q_g, row_j)`, bit for bit what
    /// [`dot_rows_f32`](RowKernels::dot_rows_f32) gives that head and row.
    /// On AVX-512 each column load serves up to eight heads and each query
    /// value three registers of rows.
    ///
    /// # Errors
    /// [`KernelError::BadLength`] when `qs` is not whole heads, `rows`
    /// reaches past `ld`, `cols` cannot hold the columns, `stride` is
    /// shorter than `rows` or `scores` cannot hold every head's.
    #[allow(clippy::too_many_arguments)]
    pub fn dot_cols_heads(
        self,
        qs: &[f32],
        hd: usize,
        cols: &[f32],
        ld: usize,
        rows: Range<usize>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) -> Result<(), KernelError> {
        check_cols(hd, ld, rows.end, cols.len())?;
        let n = rows.end.saturating_sub(rows.start);
        let heads = super::heads::check_heads(qs.len(), hd, n, stride, scores.len())?;
        #[cfg(target_arch = "x86_64")]
        if self.wide && hd > 0 {
            // SAFETY: `wide` is only set when the CPU has AVX-512 F besides
            // AVX2; the shapes were checked above.
            unsafe { x86::dot_cols16(qs, hd, cols, ld, rows, scale, scores, stride) };
            return Ok(());
        }
        for g in 0..heads {
            let q = &qs[g * hd..(g + 1) * hd];
            let s = &mut scores[g * stride..g * stride + n];
            #[cfg(target_arch = "x86_64")]
            if self.simd {
                // SAFETY: `simd` is only set when the CPU has AVX2 and
                // FMA; the shapes were checked above.
                unsafe { x86::dot_cols8(q, cols, ld, rows.clone(), scale, s) };
                continue;
            }
            for (s, j) in s.iter_mut().zip(rows.clone()) {
                *s = scale * dot_col(q, cols, ld, j);
            }
        }
        Ok(())
    }
}

/// The x86 forms. Lengths are checked by the callers.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;
    use std::ops::Range;

    use super::Rows;

    /// Eight row values at `p` as f32.
    pub(super) trait Load8: Sized {
        /// # Safety
        /// The CPU has AVX and F16C; eight values are readable at `p`.
        unsafe fn load8(p: *const Self) -> __m256;
    }

    impl Load8 for u16 {
        #[inline(always)]
        unsafe fn load8(p: *const u16) -> __m256 {
            // SAFETY: the caller's contract; widened exactly.
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
        }
    }

    impl Load8 for f32 {
        #[inline(always)]
        unsafe fn load8(p: *const f32) -> __m256 {
            // SAFETY: the caller's contract.
            unsafe { _mm256_loadu_ps(p) }
        }
    }

    /// Widens and transposes eight rows by eight values at a time into the
    /// column block; returns how many rows (a multiple of eight) it stored,
    /// all `hd` values of each when `hd` is a multiple of eight. With
    /// another `hd` it stores nothing and leaves every row to the caller.
    ///
    /// # Safety
    /// The CPU has AVX and F16C; the set has at most `ld` rows and `cols`
    /// holds `hd` columns of `ld` values (the last one as far as the set
    /// reaches).
    #[target_feature(enable = "avx,avx2,f16c")]
    pub(super) unsafe fn cols<T: Load8>(
        rows: &Rows<'_, T>,
        hd: usize,
        cols: &mut [f32],
        ld: usize,
    ) -> usize {
        if !hd.is_multiple_of(8) || !rows.all_readable(hd) {
            return 0;
        }
        let n8 = rows.idx.len() / 8 * 8;
        let out = cols.as_mut_ptr();
        for j0 in (0..n8).step_by(8) {
            let mut r = [std::ptr::null::<T>(); 8];
            for (k, r) in r.iter_mut().enumerate() {
                *r = rows
                    .row(rows.idx[j0 + k], hd)
                    .map_or(std::ptr::null(), <[T]>::as_ptr);
            }
            for c in (0..hd).step_by(8) {
                // SAFETY: every row was checked readable with `hd` values
                // and `c + 8 <= hd`; the stores write eight values at
                // `(c + k) * ld + j0`, with `j0 + 8 <= n8 <= ld`, inside the
                // block.
                unsafe {
                    let x = [
                        T::load8(r[0].add(c)),
                        T::load8(r[1].add(c)),
                        T::load8(r[2].add(c)),
                        T::load8(r[3].add(c)),
                        T::load8(r[4].add(c)),
                        T::load8(r[5].add(c)),
                        T::load8(r[6].add(c)),
                        T::load8(r[7].add(c)),
                    ];
                    let t = super::super::x86::transpose8(x);
                    for (k, t) in t.iter().enumerate() {
                        _mm256_storeu_ps(out.add((c + k) * ld + j0), *t);
                    }
                }
            }
        }
        n8
    }

    /// Scores of eight rows from `j0` on (AVX2): register `l` of `acc`
    /// holds partial sum `l` of the eight rows.
    ///
    /// # Safety
    /// The CPU has AVX2; `q.len()` columns of `ld` values hold rows
    /// `j0..j0 + 8`; eight scores are writable at `s`.
    #[inline(always)]
    unsafe fn dot8_at(q: &[f32], cols: *const f32, ld: usize, j0: usize, scale: f32, s: *mut f32) {
        // SAFETY: the caller's contract: every load reads eight values of
        // column `e < q.len()` from row `j0`.
        unsafe {
            let hd = q.len();
            let mut acc = [_mm256_setzero_ps(); 8];
            let mut e = 0;
            while e + 8 <= hd {
                for (l, a) in acc.iter_mut().enumerate() {
                    let k = _mm256_loadu_ps(cols.add((e + l) * ld + j0));
                    let qv = _mm256_set1_ps(*q.get_unchecked(e + l));
                    *a = _mm256_fmadd_ps(qv, k, *a);
                }
                e += 8;
            }
            for (l, a) in acc.iter_mut().enumerate().take(hd - e) {
                let k = _mm256_loadu_ps(cols.add((e + l) * ld + j0));
                let qv = _mm256_set1_ps(*q.get_unchecked(e + l));
                *a = _mm256_fmadd_ps(qv, k, *a);
            }
            let [a0, a1, a2, a3, a4, a5, a6, a7] = acc;
            let v = _mm256_add_ps(
                _mm256_add_ps(_mm256_add_ps(a0, a4), _mm256_add_ps(a2, a6)),
                _mm256_add_ps(_mm256_add_ps(a1, a5), _mm256_add_ps(a3, a7)),
            );
            _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(scale), v));
        }
    }

    /// Scores of every row of `rows` (AVX2): eight at a time, the last
    /// few one at a time by the scalar loop, compiled here with FMA
    /// (outside, its `mul_add` would be a libm call per value).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `q.len()` columns of `ld` values hold the
    /// rows, and `scores` holds one value per row.
    #[target_feature(enable = "avx,avx2,fma")]
    pub(super) unsafe fn dot_cols8(
        q: &[f32],
        cols: &[f32],
        ld: usize,
        rows: Range<usize>,
        scale: f32,
        scores: &mut [f32],
    ) {
        let n8 = (rows.end - rows.start) / 8 * 8;
        for d in (0..n8).step_by(8) {
            // SAFETY: rows `rows.start + d..+ 8` lie inside `rows`, and
            // scores `d..d + 8` inside `scores`.
            unsafe {
                let s = scores.as_mut_ptr().add(d);
                dot8_at(q, cols.as_ptr(), ld, rows.start + d, scale, s);
            }
        }
        for (s, j) in scores[n8..].iter_mut().zip(rows.start + n8..rows.end) {
            *s = scale * super::dot_col(q, cols, ld, j);
        }
    }

    /// Scores of every row of `rows` for every head of `qs` (AVX-512):
    /// the heads up to eight at a time, the rows 48 at a time (three
    /// registers), the last ones sixteen at a time and under a lane mask,
    /// so nothing past the rows is read or written.
    ///
    /// # Safety
    /// The CPU has AVX-512 F; `hd` columns of `ld` values hold the rows,
    /// `qs` is whole heads of `hd > 0` values and `scores` holds every
    /// head's scores, `stride` apart.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx,avx2,fma")]
    pub(super) unsafe fn dot_cols16(
        qs: &[f32],
        hd: usize,
        cols: &[f32],
        ld: usize,
        rows: Range<usize>,
        scale: f32,
        scores: &mut [f32],
        stride: usize,
    ) {
        let heads = qs.len() / hd;
        let mut g = 0;
        while g < heads {
            // As even a split into groups of at most eight as there is:
            // 12 heads go 6 + 6, not 8 + 4.
            let left = heads - g;
            let h = left.div_ceil(left.div_ceil(MAX_HEADS));
            let at = Group {
                q: qs.as_ptr().wrapping_add(g * hd),
                hd,
                cols: cols.as_ptr().wrapping_add(rows.start),
                ld,
                n: rows.end - rows.start,
                scale,
                s: scores.as_mut_ptr().wrapping_add(g * stride),
                stride,
            };
            // SAFETY: heads `g..g + h` lie inside `qs` and their scores
            // inside `scores`; the columns hold the rows (the caller's
            // contract).
            unsafe {
                match h {
                    1 => group::<1>(&at),
                    2 => group::<2>(&at),
                    3 => group::<3>(&at),
                    4 => group::<4>(&at),
                    5 => group::<5>(&at),
                    6 => group::<6>(&at),
                    7 => group::<7>(&at),
                    _ => group::<8>(&at),
                }
            }
            g += h;
        }
    }

    /// The most query heads one pass over a run of columns scores: with
    /// three registers of rows that is 24 accumulators and three loads.
    const MAX_HEADS: usize = 8;

    /// A group of heads over every row of a call: the first head's query
    /// and scores, the column block from the first row, `n` rows.
    struct Group {
        q: *const f32,
        hd: usize,
        cols: *const f32,
        ld: usize,
        n: usize,
        scale: f32,
        s: *mut f32,
        stride: usize,
    }

    /// `H` heads of `at` over its rows: 48 rows a pass, then sixteen.
    ///
    /// # Safety
    /// As [`dot_cols16`], for the `H` heads of `at`.
    #[inline(always)]
    unsafe fn group<const H: usize>(at: &Group) {
        let mut d = 0;
        // SAFETY: each pass reads and writes rows `d..` below `at.n`, all
        // sixteen lanes of a register only when sixteen rows are left.
        unsafe {
            while d + 48 <= at.n {
                dot16::<H, 3, false>(at, d, u16::MAX);
                d += 48;
            }
            if d + 32 <= at.n {
                dot16::<H, 2, false>(at, d, u16::MAX);
                d += 32;
            }
            while d < at.n {
                let mask = ((1u32 << (at.n - d).min(16)) - 1) as __mmask16;
                if mask == u16::MAX {
                    dot16::<H, 1, false>(at, d, mask);
                } else {
                    dot16::<H, 1, true>(at, d, mask);
                }
                d += 16;
            }
        }
    }

    /// The lanes of `mask` at `p`: a plain load when all sixteen are
    /// wanted (`masked` false), which needs no mask operation.
    ///
    /// # Safety
    /// The CPU has AVX-512 F; the lanes of `mask` at `p` are readable, and
    /// all sixteen when `masked` is false.
    #[inline(always)]
    unsafe fn load(mask: __mmask16, p: *const f32, masked: bool) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe {
            if masked {
                _mm512_maskz_loadu_ps(mask, p)
            } else {
                _mm512_loadu_ps(p)
            }
        }
    }

    /// `H` heads of `at` against `R` registers of rows from row `d` (the
    /// lanes of `mask` in each): partial sum `l` of a head and register
    /// takes the columns `l, l + 8, …` in order, one partial sum at a time
    /// for every head and register, so that each column load serves `H`
    /// heads and each query value `R` registers; the eight partial sums
    /// wait in memory until all are done, and are then combined in
    /// [`dot_f32`](super::super::dot_f32)'s order and scaled. `MASKED`
    /// false says the mask has all sixteen lanes.
    ///
    /// # Safety
    /// The CPU has AVX-512 F; `H` heads of `at.hd` values are readable at
    /// `at.q`, the masked lanes of `R` registers from row `d` of every
    /// column, and the scores of those lanes are writable for each head.
    #[inline(always)]
    unsafe fn dot16<const H: usize, const R: usize, const MASKED: bool>(
        at: &Group,
        d: usize,
        mask: __mmask16,
    ) {
        let hd = at.hd;
        // SAFETY: the caller's contract: every load reads the masked lanes
        // of a column below `hd` from row `d + 16 r`, or a value of a head
        // below `H`; every store writes masked lanes of a head's scores.
        unsafe {
            // Every partial sum is written before any is read; left
            // uninitialised, so that no memset precedes each call.
            let mut part = [[[MaybeUninit::<__m512>::uninit(); R]; H]; 8];
            let q: [*const f32; H] = std::array::from_fn(|g| at.q.add(g * hd));
            let step = 8 * at.ld;
            for (l, part) in part.iter_mut().enumerate() {
                let mut acc = [[_mm512_setzero_ps(); R]; H];
                let mut e = l;
                // Wrapping: past the last column (or for `l >= hd`) the
                // pointer is formed but never read.
                let mut col = at.cols.wrapping_add(l * at.ld + d);
                while e < hd {
                    let k: [__m512; R] =
                        std::array::from_fn(|r| load(mask, col.add(16 * r), MASKED));
                    for (acc, q) in acc.iter_mut().zip(&q) {
                        let qv = _mm512_set1_ps(*q.add(e));
                        for (a, k) in acc.iter_mut().zip(&k) {
                            *a = _mm512_fmadd_ps(qv, *k, *a);
                        }
                    }
                    e += 8;
                    col = col.wrapping_add(step);
                }
                for (p, a) in part.iter_mut().zip(&acc) {
                    for (p, a) in p.iter_mut().zip(a) {
                        p.write(*a);
                    }
                }
            }
            let sc = _mm512_set1_ps(at.scale);
            #[allow(clippy::needless_range_loop)]
            for g in 0..H {
                for r in 0..R {
                    // SAFETY: the loop above wrote all eight.
                    let a = |l: usize| part[l][g][r].assume_init();
                    let v = _mm512_add_ps(
                        _mm512_add_ps(_mm512_add_ps(a(0), a(4)), _mm512_add_ps(a(2), a(6))),
                        _mm512_add_ps(_mm512_add_ps(a(1), a(5)), _mm512_add_ps(a(3), a(7))),
                    );
                    let s = at.s.add(g * at.stride + d + 16 * r);
                    _mm512_mask_storeu_ps(s, mask, _mm512_mul_ps(sc, v));
                }
            }
        }
    }
}
