//! Row gather from a (possibly quantized) table: the token embedding lookup.

use minfer_kernels::dequant::dequantize_row;
use minfer_kernels::GgmlType;

use minfer_graph::{GraphError, Result};

use crate::check::bad_len;

/// Dequantizes row `ids[i]` of `table` (`n_rows` rows of `ne0` elements of
/// type `ty`) into row `i` of `out`.
///
/// # Errors
/// [`GraphError::BadInput`] when an id is negative or `>= n_rows`, when
/// `table` is not exactly `n_rows` rows or `out` not `ids.len()` rows;
/// [`GraphError::Kernel`] when `ty` cannot be dequantized or `ne0` is not a
/// whole number of its blocks. Ids are checked before anything is written.
pub fn get_rows(
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
    let table_bytes = row_bytes.checked_mul(n_rows);
    if table_bytes != Some(table.len()) {
        return Err(GraphError::BadInput {
            what: "get_rows table",
            msg: format!(
                "{n_rows} rows of {row_bytes} bytes do not match {} bytes",
                table.len()
            ),
        });
    }
    check_output(ids, ne0, out)?;
    if let Some(&bad) = ids
        .iter()
        .find(|&&id| usize::try_from(id).map_or(true, |i| i >= n_rows))
    {
        return Err(GraphError::BadInput {
            what: "get_rows ids",
            msg: format!("row id {bad} is outside the table of {n_rows} rows"),
        });
    }
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(ne0)) {
        let r = id as usize;
        dequantize_row(ty, &table[r * row_bytes..(r + 1) * row_bytes], dst)?;
    }
    Ok(())
}

/// As [`get_rows`], for a table repacked into the interleaved layout (a
/// tied embedding that is also the LM head): each wanted row is unpacked
/// block by block, giving the values the original rows give.
pub fn get_rows_packed(
    ty: GgmlType,
    table: &[u8],
    ne0: usize,
    n_rows: usize,
    ids: &[i32],
    out: &mut [f32],
) -> Result<()> {
    check_output(ids, ne0, out)?;
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(ne0.max(1))) {
        let r = usize::try_from(id).map_err(|_| GraphError::BadInput {
            what: "get_rows ids",
            msg: format!("row id {id} is outside the table of {n_rows} rows"),
        })?;
        minfer_kernels::packed::dequantize_row(ty, n_rows, ne0, table, r, dst).map_err(|e| {
            GraphError::BadInput {
                what: "get_rows ids",
                msg: e.to_string(),
            }
        })?;
    }
    Ok(())
}

/// Both gathers write `ids.len()` rows of `ne0` values: `out` must hold
/// exactly that many.
fn check_output(ids: &[i32], ne0: usize, out: &[f32]) -> Result<()> {
    if ids.len().checked_mul(ne0) != Some(out.len()) {
        return Err(bad_len(
            "get_rows output",
            format_args!("{} x {ne0}", ids.len()),
            out.len(),
        ));
    }
    Ok(())
}
