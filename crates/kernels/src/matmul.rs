//! Matrix products of a weight matrix with rows of f32 activations, the
//! entry point the graph's mat_mul calls.
//!
//! Activations are quantized once per call into the weight type's
//! activation format (Q8_0, Q8_1 or Q8_K; float weights take f32 as is),
//! then weight rows are split across the pool's threads, each row dotted
//! with every activation row. A call allocates nothing once its scratch
//! buffer has reached the size it needs.

use std::ops::Range;

use minfer_gguf::GgmlType;

use crate::dot::{DotKernel, Kernels};
use crate::error::KernelError;
use crate::operand::{bytes_mut, quantize_rows, Product, MAX_PRODUCTS};
pub use crate::operand::{row_bytes, ActScratch, Layout, MatRef};
use crate::pool::{SharedMut, ThreadPool};

impl ActScratch {
    /// Grows the scratch so that row-wise products of `n_tok` activation
    /// rows of `cols` values against a weight of type `ty` allocate
    /// nothing (the quantized rows and their widened scale table).
    pub fn reserve_rows(&mut self, ty: GgmlType, cols: usize, n_tok: usize) {
        let Some(act) = crate::dot::act_type(ty).filter(|&a| a != GgmlType::F32) else {
            return;
        };
        let Some(a_row) = row_bytes(act, cols) else {
            return;
        };
        let words = (n_tok * a_row).div_ceil(8);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        let t_len = n_tok * crate::dot::scale_table_len(act, cols);
        if self.table.len() < t_len {
            self.table.resize(t_len, 0.0);
        }
    }

    /// Grows the scratch so that products over interleaved weights with up
    /// to `values` activation values (values per row × rows) allocate
    /// nothing.
    pub fn reserve_packed(&mut self, values: usize) {
        let blocks = values.div_ceil(crate::blocks::QK);
        // Q8_K, the largest of the activation formats per value (292 bytes
        // per 256; Q8_1's 36 per 32 is less), plus a word per product for
        // the products run together (`matmul_many`), each rounded up.
        let words = (values.div_ceil(crate::blocks::QK_K) * 292).div_ceil(8) + MAX_PRODUCTS;
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        if self.table.len() < 2 * blocks {
            self.table.resize(2 * blocks, 0.0);
        }
        // Q6_K keeps one start value per 16 values.
        let inits = values.div_ceil(16);
        if self.init.len() < inits {
            self.init.resize(inits, 0);
        }
    }
}

/// Validated shape of one product.
struct Plan {
    kernel: DotKernel,
    w_row: usize,
    a_row: usize,
}

fn plan(
    kernels: &Kernels,
    w: &MatRef,
    x_len: usize,
    n_tok: usize,
    out_len: usize,
) -> Result<Plan, KernelError> {
    let kernel = kernels.dot(w.ty)?;
    let not_aligned = |ty: GgmlType| KernelError::NotBlockAligned {
        ty,
        n: w.cols,
        block: ty.block_size() as usize,
    };
    let w_row = row_bytes(w.ty, w.cols).ok_or_else(|| not_aligned(w.ty))?;
    let a_row = row_bytes(kernel.act, w.cols).ok_or_else(|| not_aligned(kernel.act))?;
    let check = |what, expected: Option<usize>, got: usize| match expected {
        Some(e) if e == got => Ok(()),
        e => Err(KernelError::BadLength {
            what,
            expected: e.unwrap_or(usize::MAX),
            got,
        }),
    };
    check("weight bytes", w.rows.checked_mul(w_row), w.data.len())?;
    check("activations", n_tok.checked_mul(w.cols), x_len)?;
    check("output", n_tok.checked_mul(w.rows), out_len)?;
    Ok(Plan {
        kernel,
        w_row,
        a_row,
    })
}

/// Computes `out[t][r] = dot(w[r], x[t])` for `n_tok` activation rows `x`
/// (each `w.cols` long) and every weight row `r`. `out` holds `n_tok` rows
/// of `w.rows` values.
pub fn matmul(
    kernels: &Kernels,
    pool: &ThreadPool,
    w: &MatRef,
    x: &[f32],
    n_tok: usize,
    out: &mut [f32],
    scratch: &mut ActScratch,
) -> Result<(), KernelError> {
    if w.layout == Layout::Packed {
        return crate::packed::matmul(&kernels.packed_tiles(), pool, w, x, n_tok, out, scratch);
    }
    let p = plan(kernels, w, x.len(), n_tok, out.len())?;
    if n_tok == 0 || w.rows == 0 {
        return Ok(());
    }
    let four = p.kernel.dot4.is_some() && n_tok >= 4;
    let t_len = crate::dot::scale_table_len(p.kernel.act, w.cols);
    let (act, table): (&[u8], &[f32]) = if p.kernel.act == GgmlType::F32 {
        (bytemuck::cast_slice(x), &[])
    } else {
        let ActScratch { words, table, .. } = scratch;
        let buf = bytes_mut(words, n_tok * p.a_row);
        quantize_rows(pool, kernels.isa(), p.kernel.act, x, w.cols, buf, p.a_row)?;
        if four && t_len > 0 {
            if table.len() < n_tok * t_len {
                table.resize(n_tok * t_len, 0.0);
            }
            for (a, t) in buf.chunks_exact(p.a_row).zip(table.chunks_exact_mut(t_len)) {
                crate::dot::scale_table(p.kernel.act, a, t);
            }
        }
        (buf, table.as_slice())
    };
    let out_ptr = SharedMut::new(out.as_mut_ptr());
    let rows = w.rows;
    // Rows are taken a few at a time, small enough to stay in L1 while every
    // activation row streams past them; tokens go four at a time through the
    // four-row kernel, the remainder one at a time.
    let row_tile = (TILE_BYTES / p.w_row).max(1);
    // Rows are claimed in chunks, a few per thread, so that a core slowed
    // by other work does not hold the others up.
    pool.for_chunks(rows, 4, 4, |range: Range<usize>| {
        let a_at = |t: usize| &act[t * p.a_row..(t + 1) * p.a_row];
        let table_at = |t: usize| {
            if t_len == 0 {
                &[][..]
            } else {
                &table[t * t_len..(t + 1) * t_len]
            }
        };
        let mut r0 = range.start;
        while r0 < range.end {
            let r1 = (r0 + row_tile).min(range.end);
            let mut t = 0;
            if let (Some(dot4), true) = (p.kernel.dot4, four) {
                while t + 4 <= n_tok {
                    let a4 = [a_at(t), a_at(t + 1), a_at(t + 2), a_at(t + 3)];
                    let t4 = [
                        table_at(t),
                        table_at(t + 1),
                        table_at(t + 2),
                        table_at(t + 3),
                    ];
                    for r in r0..r1 {
                        let wr = &w.data[r * p.w_row..(r + 1) * p.w_row];
                        let v = dot4(w.cols, wr, a4, t4);
                        for (k, v) in v.into_iter().enumerate() {
                            // SAFETY: `r` lies in this thread's row range and
                            // `t + k < n_tok` (checked in `plan`), so no two
                            // threads write the same element and every write
                            // is inside `out`.
                            unsafe { *out_ptr.get().add((t + k) * rows + r) = v };
                        }
                    }
                    t += 4;
                }
            }
            for t in t..n_tok {
                let a = a_at(t);
                for r in r0..r1 {
                    let wr = &w.data[r * p.w_row..(r + 1) * p.w_row];
                    let v = (p.kernel.dot)(w.cols, wr, a);
                    // SAFETY: as above.
                    unsafe { *out_ptr.get().add(t * rows + r) = v };
                }
            }
            r0 = r1;
        }
    });
    Ok(())
}

/// Every product of `products`: as [`matmul`] on each, with the same bits,
/// but those over interleaved weights ([`Layout::Packed`]) run as one job
/// on the pool (per [`MAX_PRODUCTS`]), their activations side by side in
/// `scratch`, so that many small products (the chosen experts of a
/// mixture-of-experts layer in a decode step) wait once instead of once
/// each, with the threads balanced over all of them.
///
/// # Errors
/// As [`matmul`], for the first product at fault; the products before it
/// may have been computed.
pub fn matmul_many<'a>(
    kernels: &Kernels,
    pool: &ThreadPool,
    products: impl IntoIterator<Item = Product<'a>>,
    scratch: &mut ActScratch,
) -> Result<(), KernelError> {
    let tiles = kernels.packed_tiles();
    let mut products = products.into_iter();
    loop {
        let mut batch: [Option<Product>; MAX_PRODUCTS] = std::array::from_fn(|_| None);
        let mut k = 0;
        while k < MAX_PRODUCTS {
            let Some(p) = products.next() else { break };
            if p.w.layout == Layout::Packed {
                batch[k] = Some(p);
                k += 1;
            } else {
                matmul(kernels, pool, &p.w, p.x, p.n_tok, p.out, scratch)?;
            }
        }
        crate::packed::matmul_many(&tiles, pool, &mut batch[..k], scratch)?;
        if k < MAX_PRODUCTS {
            return Ok(());
        }
    }
}

/// Weight bytes per row tile: a quarter of a typical 32 KiB L1 data cache,
/// leaving room for the activations streaming through.
const TILE_BYTES: usize = 8 * 1024;

/// Single-threaded reference: dequantize each weight row and take an f64
/// dot with the raw activations. Used by tests to bound the error of the
/// quantized path.
pub fn matmul_reference(w: &MatRef, x: &[f32], n_tok: usize) -> Result<Vec<f32>, KernelError> {
    let w_row = row_bytes(w.ty, w.cols).ok_or(KernelError::NotBlockAligned {
        ty: w.ty,
        n: w.cols,
        block: w.ty.block_size() as usize,
    })?;
    let mut row = vec![0f32; w.cols];
    let mut out = vec![0f32; n_tok * w.rows];
    for r in 0..w.rows {
        crate::dequant::dequantize_row(w.ty, &w.data[r * w_row..(r + 1) * w_row], &mut row)?;
        for t in 0..n_tok {
            let xs = &x[t * w.cols..(t + 1) * w.cols];
            let s: f64 = row.iter().zip(xs).map(|(&a, &b)| a as f64 * b as f64).sum();
            out[t * w.rows + r] = s as f32;
        }
    }
    Ok(out)
}
