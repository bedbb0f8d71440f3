//! Row gather from a (possibly quantized) table: the token embedding lookup.

use minfer_kernels::dequant::dequantize_row;
use minfer_kernels::GgmlType;

use minfer_graph::{GraphError, Result};

use crate::check::bad_len;

/// The table a gather reads: rows as stored in the file, or repacked into
/// the interleaved layout of the matmul kernels (a tied embedding that is
/// also the LM head), whose rows are unpacked block by block to the values
/// the stored rows give.
#[derive(Clone, Copy)]
pub enum RowTable<'a> {
    /// `n_rows` rows as the file stores them.
    Stored(&'a [u8]),
    /// The same rows, repacked.
    Packed(&'a [u8]),
}

/// Dequantizes row `ids[i]` of `table` (`n_rows` rows of `ne0` elements of
/// type `ty`) into row `i` of `out`.
///
/// # Errors
/// [`GraphError::BadInput`] when an id is negative or `>= n_rows`, when a
/// stored table is not exactly `n_rows` rows or `out` not `ids.len()` rows;
/// [`GraphError::Kernel`] when `ty` cannot be dequantized or `ne0` is not a
/// whole number of its blocks. Ids are checked before anything is written.
pub fn get_rows(
    ty: GgmlType,
    table: RowTable,
    ne0: usize,
    n_rows: usize,
    ids: &[i32],
    out: &mut [f32],
) -> Result<()> {
    if ids.len().checked_mul(ne0) != Some(out.len()) {
        return Err(bad_len(
            "get_rows output",
            format_args!("{} x {ne0}", ids.len()),
            out.len(),
        ));
    }
    if let Some(&bad) = ids
        .iter()
        .find(|&&id| usize::try_from(id).map_or(true, |i| i >= n_rows))
    {
        return Err(GraphError::BadInput {
            what: "get_rows ids",
            msg: format!("row id {bad} is outside the table of {n_rows} rows"),
        });
    }
    match table {
        RowTable::Stored(t) => gather_stored(ty, t, ne0, n_rows, ids, out),
        RowTable::Packed(t) => {
            for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(ne0.max(1))) {
                minfer_kernels::packed::dequantize_row(ty, n_rows, ne0, t, id as usize, dst)
                    .map_err(|e| GraphError::BadInput {
                        what: "get_rows table",
                        msg: e.to_string(),
                    })?;
            }
            Ok(())
        }
    }
}

/// The gather from rows as stored, after the ids and `out` were checked.
fn gather_stored(
    ty: GgmlType,
    table: &[u8],
    ne0: usize,
    n_rows: usize,
    ids: &[i32],
    out: &mut [f32],
) -> Result<()> {
    let block = ty.block_size() as usize;
    if ne0 == 0 || block == 0 || !ne0.is_multiple_of(block) {
        return Err(GraphError::BadInput {
            what: "get_rows table",
            msg: format!("rows of {ne0} elements are not whole {ty} blocks of {block}"),
        });
    }
    let row_bytes = (ne0 / block)
        .checked_mul(ty.type_size() as usize)
        .ok_or_else(|| bad_len("get_rows table", "a smaller row", ne0))?;
    if row_bytes.checked_mul(n_rows) != Some(table.len()) {
        return Err(GraphError::BadInput {
            what: "get_rows table",
            msg: format!(
                "{n_rows} rows of {row_bytes} bytes do not match {} bytes",
                table.len()
            ),
        });
    }
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(ne0)) {
        let r = id as usize;
        dequantize_row(ty, &table[r * row_bytes..(r + 1) * row_bytes], dst)?;
    }
    Ok(())
}
