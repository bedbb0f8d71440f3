//! The KV cache: per-layer storage regions, and the cell store that decides
//! which cell each token writes and which cells each query reads.
//!
//! A [`KvRegion`] holds one layer's keys or values for every cell of the
//! context, sized once for the full `n_ctx`. It knows nothing about
//! sequences or positions: a cell is just a row.
//!
//! [`KvCells`] is the bookkeeping on top. Every cell is either free or holds
//! one position and the set of sequences that use it; a prefix shared by
//! several sequences is one set of cells with several sequence bits. The
//! store turns a batch of `(sequence, position)` tokens into a
//! [`BatchPlan`]: the cell each token writes and, for each token, the
//! explicit list of cells its query attends to. Attention reads exactly the
//! cells named there, so whatever sits in a freed or rolled-back cell is
//! never read.

use minfer_kernels::blocks::{BlockQ8_0, QK};
use minfer_kernels::dequant::dequantize_q8_0;
use minfer_kernels::quant::quantize_row_q8_0;
use minfer_kernels::{f16_to_f32_row, f32_to_f16_row, RowKernels};

use crate::error::{GraphError, Result};
use crate::params::KvFormat;

/// The most sequences a [`KvCells`] can track (one bit each).
pub const MAX_SEQS: u32 = 64;

enum Storage {
    F32(Vec<f32>),
    /// Raw IEEE half bits.
    F16(Vec<u16>),
    Q8_0(Vec<BlockQ8_0>),
}

/// A region's storage as it is, for kernels that read rows in place: the
/// values of every cell, row after row, or `Q8_0` for a region whose rows
/// must be decoded (through [`KvRegion::slice`]).
#[derive(Clone, Copy, Debug)]
pub enum KvData<'a> {
    /// F32 values.
    F32(&'a [f32]),
    /// Raw IEEE half bits.
    F16(&'a [u16]),
    /// Q8_0 blocks, read through [`KvRegion::slice`].
    Q8_0,
}

/// One layer's K or V cache: `n_ctx` cells of `row_elems` values
/// (`n_head_kv * head_dim`), stored in a [`KvFormat`].
pub struct KvRegion {
    format: KvFormat,
    row_elems: usize,
    n_ctx: usize,
    data: Storage,
}

impl std::fmt::Debug for KvRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvRegion")
            .field("format", &self.format)
            .field("row_elems", &self.row_elems)
            .field("n_ctx", &self.n_ctx)
            .finish()
    }
}

/// A zero-filled vector of `n` elements, or a typed error when the size
/// overflows or the allocator refuses (a context too large for memory
/// should be reported, not abort the process).
fn zeroed<T: Clone>(n: Option<usize>, zero: T, what: &str) -> Result<Vec<T>> {
    let n =
        n.ok_or_else(|| GraphError::OutOfMemory(format!("a KV region of {what} is too large")))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|e| GraphError::OutOfMemory(format!("KV region ({n} x {what}): {e}")))?;
    v.resize(n, zero);
    Ok(v)
}

impl KvRegion {
    /// A region of `n_ctx` cells of `row_elems` values each, zero-filled.
    ///
    /// # Errors
    /// [`GraphError::BadInput`] when `row_elems` or `n_ctx` is 0, or when
    /// the format is Q8_0 and `row_elems` is not a multiple of 32;
    /// [`GraphError::OutOfMemory`] when the region cannot be allocated.
    pub fn new(format: KvFormat, row_elems: usize, n_ctx: usize) -> Result<Self> {
        if row_elems == 0 || n_ctx == 0 {
            return Err(GraphError::BadInput {
                what: "kv region",
                msg: format!("row_elems ({row_elems}) and n_ctx ({n_ctx}) must be positive"),
            });
        }
        let elems = row_elems.checked_mul(n_ctx);
        let data = match format {
            KvFormat::F32 => Storage::F32(zeroed(elems, 0.0f32, "f32")?),
            KvFormat::F16 => Storage::F16(zeroed(elems, 0u16, "f16")?),
            KvFormat::Q8_0 => {
                if !row_elems.is_multiple_of(QK) {
                    return Err(GraphError::BadInput {
                        what: "kv region",
                        msg: format!(
                            "q8_0 needs a row length that is a multiple of {QK}, got {row_elems}"
                        ),
                    });
                }
                let zero = BlockQ8_0 {
                    d: [0; 2],
                    qs: [0; QK],
                };
                Storage::Q8_0(zeroed(elems.map(|e| e / QK), zero, "q8_0 blocks")?)
            }
        };
        Ok(KvRegion {
            format,
            row_elems,
            n_ctx,
            data,
        })
    }

    /// Storage format.
    pub fn format(&self) -> KvFormat {
        self.format
    }

    /// Values per cell.
    pub fn row_elems(&self) -> usize {
        self.row_elems
    }

    /// Number of cells.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    fn check_cell(&self, cell: usize) -> Result<()> {
        if cell >= self.n_ctx {
            return Err(GraphError::CellOutOfRange {
                cell: i64::try_from(cell).unwrap_or(i64::MAX),
                n_ctx: self.n_ctx,
            });
        }
        Ok(())
    }

    fn check_len(&self, len: usize, what: &'static str) -> Result<()> {
        if len != self.row_elems {
            return Err(GraphError::BadInput {
                what,
                msg: format!("expected a row of {} values, got {len}", self.row_elems),
            });
        }
        Ok(())
    }

    /// Writes `src` (one row) into `cell`, converting to the region's
    /// format: F16 rounds to nearest even, Q8_0 quantizes as llama.cpp's
    /// x86 CPU backend does when it copies into a q8_0 cache.
    ///
    /// # Errors
    /// [`GraphError::CellOutOfRange`] for `cell >= n_ctx`,
    /// [`GraphError::BadInput`] when `src` is not one row long. Nothing is
    /// written on error.
    pub fn store_row(&mut self, cell: usize, src: &[f32]) -> Result<()> {
        self.check_cell(cell)?;
        self.check_len(src.len(), "kv store row")?;
        let n = self.row_elems;
        match &mut self.data {
            Storage::F32(d) => d[cell * n..(cell + 1) * n].copy_from_slice(src),
            Storage::F16(d) => f32_to_f16_row(src, &mut d[cell * n..(cell + 1) * n])?,
            Storage::Q8_0(d) => {
                let nb = n / QK;
                quantize_row_q8_0(src, &mut d[cell * nb..(cell + 1) * nb]);
            }
        }
        Ok(())
    }

    /// Reads `cell` back as f32 into `dst` (one row).
    ///
    /// # Errors
    /// As [`store_row`](KvRegion::store_row).
    pub fn read_row(&self, cell: usize, dst: &mut [f32]) -> Result<()> {
        self.check_cell(cell)?;
        self.check_len(dst.len(), "kv read row")?;
        let n = self.row_elems;
        match &self.data {
            Storage::F32(d) => dst.copy_from_slice(&d[cell * n..(cell + 1) * n]),
            Storage::F16(d) => f16_to_f32_row(&d[cell * n..(cell + 1) * n], dst)?,
            Storage::Q8_0(d) => {
                let nb = n / QK;
                dequantize_q8_0(&d[cell * nb..(cell + 1) * nb], dst);
            }
        }
        Ok(())
    }

    /// Bytes of one cell's row in the storage format: 4 per value for
    /// F32, 2 for F16, 34 per block of 32 values for Q8_0.
    pub fn row_bytes(&self) -> usize {
        self.format.row_bytes(self.row_elems)
    }

    /// Appends the row of `cell` to `out` exactly as stored
    /// ([`row_bytes`](KvRegion::row_bytes) bytes, little-endian), so that
    /// [`write_raw_row`](KvRegion::write_raw_row) restores it bit for bit.
    ///
    /// # Errors
    /// [`GraphError::CellOutOfRange`] for `cell >= n_ctx`.
    pub fn read_raw_row(&self, cell: usize, out: &mut Vec<u8>) -> Result<()> {
        self.check_cell(cell)?;
        let n = self.row_elems;
        match &self.data {
            Storage::F32(d) => {
                for v in &d[cell * n..(cell + 1) * n] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Storage::F16(d) => {
                for v in &d[cell * n..(cell + 1) * n] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Storage::Q8_0(d) => {
                let nb = n / QK;
                for b in &d[cell * nb..(cell + 1) * nb] {
                    out.extend_from_slice(&b.d);
                    out.extend(b.qs.iter().map(|&q| q as u8));
                }
            }
        }
        Ok(())
    }

    /// Overwrites the row of `cell` with `src`, a row in the storage
    /// format as [`read_raw_row`](KvRegion::read_raw_row) produced it.
    ///
    /// # Errors
    /// [`GraphError::CellOutOfRange`]; [`GraphError::BadInput`] when `src`
    /// is not [`row_bytes`](KvRegion::row_bytes) long. Nothing is written
    /// on error.
    pub fn write_raw_row(&mut self, cell: usize, src: &[u8]) -> Result<()> {
        self.check_cell(cell)?;
        if src.len() != self.row_bytes() {
            return Err(GraphError::BadInput {
                what: "kv raw row",
                msg: format!("expected {} bytes, got {}", self.row_bytes(), src.len()),
            });
        }
        let n = self.row_elems;
        match &mut self.data {
            Storage::F32(d) => {
                for (v, b) in d[cell * n..(cell + 1) * n]
                    .iter_mut()
                    .zip(src.chunks_exact(4))
                {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            Storage::F16(d) => {
                for (v, b) in d[cell * n..(cell + 1) * n]
                    .iter_mut()
                    .zip(src.chunks_exact(2))
                {
                    *v = u16::from_le_bytes([b[0], b[1]]);
                }
            }
            Storage::Q8_0(d) => {
                let nb = n / QK;
                let size = std::mem::size_of::<BlockQ8_0>();
                for (blk, b) in d[cell * nb..(cell + 1) * nb]
                    .iter_mut()
                    .zip(src.chunks_exact(size))
                {
                    blk.d = [b[0], b[1]];
                    for (q, &x) in blk.qs.iter_mut().zip(&b[2..]) {
                        *q = x as i8;
                    }
                }
            }
        }
        Ok(())
    }

    /// The row of `cell` without copying, when the region is F32 and the
    /// cell exists; `None` otherwise.
    pub fn row_f32(&self, cell: usize) -> Option<&[f32]> {
        match &self.data {
            Storage::F32(d) if cell < self.n_ctx => {
                Some(&d[cell * self.row_elems..(cell + 1) * self.row_elems])
            }
            _ => None,
        }
    }

    /// Every cell's values as stored (cell `c` is the `row_elems` values
    /// from `c * row_elems`), or [`KvData::Q8_0`].
    #[inline]
    pub fn data(&self) -> KvData<'_> {
        match &self.data {
            Storage::F32(d) => KvData::F32(d),
            Storage::F16(d) => KvData::F16(d),
            Storage::Q8_0(_) => KvData::Q8_0,
        }
    }

    /// Values `start..start + len` of `cell` as f32: borrowed from the
    /// region when it is F32, otherwise decoded into `buf`. Q8_0 decodes
    /// whole blocks, so `buf` needs `len + 2 * 31` values in the worst case.
    /// `None` when the range or the cell is out of bounds or `buf` is too
    /// small; callers validate beforehand, so this is the hot-path accessor.
    #[inline]
    pub fn slice<'a>(
        &'a self,
        cell: usize,
        start: usize,
        len: usize,
        buf: &'a mut [f32],
    ) -> Option<&'a [f32]> {
        if cell >= self.n_ctx || start.checked_add(len)? > self.row_elems {
            return None;
        }
        let base = cell * self.row_elems + start;
        match &self.data {
            Storage::F32(d) => Some(&d[base..base + len]),
            Storage::F16(d) => {
                let out = buf.get_mut(..len)?;
                f16_to_f32_row(&d[base..base + len], out).ok()?;
                Some(out)
            }
            Storage::Q8_0(d) => {
                let b0 = base / QK;
                let b1 = (base + len).div_ceil(QK);
                let out = buf.get_mut(..(b1 - b0) * QK)?;
                dequantize_q8_0(&d[b0..b1], out);
                let skip = base - b0 * QK;
                Some(&out[skip..skip + len])
            }
        }
    }

    /// Values `start..start + len` of each cell of `cells` as f32, row
    /// after row from the start of `out` (`len` values each): the values
    /// [`slice`](KvRegion::slice) gives, for a block of cells at once,
    /// converted on the path of `rk`. `None` when a cell or the range is
    /// out of bounds or `out` is too short; callers validate beforehand.
    pub fn decode_rows(
        &self,
        rk: RowKernels,
        cells: &[i32],
        start: usize,
        len: usize,
        out: &mut [f32],
    ) -> Option<()> {
        let rows = out.get_mut(..cells.len().checked_mul(len)?)?;
        if len == 0 {
            return Some(());
        }
        if start.checked_add(len)? > self.row_elems {
            return None;
        }
        // Q8_0 blocks that the range covers whole decode straight into the
        // row (heads start and end on block edges in every shipped model);
        // another range goes through `slice`, a piece of a block at a time.
        let whole = start.is_multiple_of(QK) && len.is_multiple_of(QK);
        let mut part = [0.0f32; 2 * QK];
        for (&cell, row) in cells.iter().zip(rows.chunks_exact_mut(len)) {
            let cell = usize::try_from(cell).ok().filter(|&c| c < self.n_ctx)?;
            let base = cell * self.row_elems + start;
            match &self.data {
                Storage::F32(d) => row.copy_from_slice(&d[base..base + len]),
                Storage::F16(d) => rk.f16_to_f32(&d[base..base + len], row).ok()?,
                Storage::Q8_0(d) if whole => {
                    rk.q8_0_to_f32(&d[base / QK..(base + len) / QK], row);
                }
                Storage::Q8_0(_) => {
                    for (k, chunk) in row.chunks_mut(QK).enumerate() {
                        let got = self.slice(cell, start + k * QK, chunk.len(), &mut part)?;
                        chunk.copy_from_slice(got);
                    }
                }
            }
        }
        Some(())
    }
}

/// The cells a batch writes and the windows its queries read, as filled by
/// [`KvCells::plan_batch`]. The vectors keep their capacity between
/// batches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchPlan {
    /// The cell token `t` writes its K/V into.
    pub kv_cells: Vec<i32>,
    /// Token `t` attends to `window_cells[window_offsets[t]..window_offsets[t + 1]]`;
    /// `n_tokens + 1` entries, starting at 0.
    pub window_offsets: Vec<i32>,
    /// Every token's window, concatenated; each window is ordered by
    /// position.
    pub window_cells: Vec<i32>,
    /// The position of each cell of `window_cells` (parallel to it), for
    /// sliding-window attention.
    pub window_positions: Vec<i32>,
}

/// Position marking a free cell.
const FREE: i32 = -1;
/// Marks a position a sequence holds no cell for.
const NO_CELL: i32 = -1;

/// The cell store of a context: which cell holds which position for which
/// sequences. Sequence ids are `0..64`.
///
/// Besides the per-cell state it keeps, for every sequence that was ever
/// used, a table position → cell, so a window is built by walking positions
/// in order rather than by scanning and sorting cells. A sequence holds at
/// most one cell per position.
#[derive(Clone, Debug)]
pub struct KvCells {
    /// Position of each cell, [`FREE`] when unused.
    pos: Vec<i32>,
    /// Sequences using each cell, one bit per sequence.
    seqs: Vec<u64>,
    /// Per sequence: cell of each position, or [`NO_CELL`]. Empty until the
    /// sequence first gets a cell.
    by_pos: Vec<Vec<i32>>,
    /// Per sequence: one past its highest position holding a cell (0 when
    /// it holds none).
    seq_end: Vec<usize>,
    /// Per sequence: cells it alone holds (kept up to date on every
    /// change, so that asking costs nothing).
    exclusive: Vec<usize>,
    used: usize,
    /// Every cell below this index is in use; the free-cell search starts
    /// here.
    low_free: usize,
}

impl KvCells {
    /// A store of `n_ctx` free cells. Positions and cells are `i32` in a
    /// [`BatchPlan`], so `n_ctx` is capped at `i32::MAX`.
    pub fn new(n_ctx: usize) -> Self {
        let n_ctx = n_ctx.min(i32::MAX as usize);
        KvCells {
            pos: vec![FREE; n_ctx],
            seqs: vec![0; n_ctx],
            by_pos: vec![Vec::new(); MAX_SEQS as usize],
            seq_end: vec![0; MAX_SEQS as usize],
            exclusive: vec![0; MAX_SEQS as usize],
            used: 0,
            low_free: 0,
        }
    }

    /// Number of cells.
    pub fn n_ctx(&self) -> usize {
        self.pos.len()
    }

    /// Number of cells in use by at least one sequence.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Position held by `cell`, `None` when the cell is free or out of range.
    pub fn cell_pos(&self, cell: usize) -> Option<i32> {
        self.pos.get(cell).copied().filter(|&p| p != FREE)
    }

    /// Sequences using `cell`, one bit per sequence id (0 when free or out
    /// of range).
    pub fn cell_seqs(&self, cell: usize) -> u64 {
        self.seqs.get(cell).copied().unwrap_or(0)
    }

    /// The cell `seq` holds for `pos`, if any.
    pub fn cell_of(&self, seq: u32, pos: i32) -> Option<u32> {
        let table = self.by_pos.get(seq as usize)?;
        let c = *table.get(usize::try_from(pos).ok()?)?;
        u32::try_from(c).ok()
    }

    fn check_seq(seq: u32) -> Result<usize> {
        if seq >= MAX_SEQS {
            return Err(GraphError::BadSequence(seq));
        }
        Ok(seq as usize)
    }

    fn check_pos(&self, pos: i32) -> Result<usize> {
        match usize::try_from(pos) {
            Ok(p) if p < self.n_ctx() => Ok(p),
            _ => Err(GraphError::PositionOutOfRange {
                pos: pos.into(),
                n_ctx: self.n_ctx(),
            }),
        }
    }

    /// Highest position `seq` holds a cell for, `None` when it holds none
    /// (or the id is out of range).
    pub fn max_pos(&self, seq: u32) -> Option<i32> {
        let end = *self.seq_end.get(seq as usize)?;
        // Positions are below n_ctx, which `new` caps at i32::MAX.
        end.checked_sub(1).and_then(|p| i32::try_from(p).ok())
    }

    /// Takes a free cell for `(seq, pos)` and returns it. The lowest free
    /// cell is chosen, so a single sequence written in order stays
    /// contiguous. A sequence's first cell allocates its position table
    /// (`n_ctx` entries), which is kept from then on.
    ///
    /// # Errors
    /// [`GraphError::BadSequence`] for `seq >= 64`,
    /// [`GraphError::PositionOutOfRange`] for `pos < 0` or `pos >= n_ctx`,
    /// [`GraphError::BadInput`] when `seq` already holds a cell at `pos`,
    /// [`GraphError::CacheFull`] when no cell is free. Nothing changes on
    /// error.
    pub fn allocate(&mut self, seq: u32, pos: i32) -> Result<u32> {
        let s = Self::check_seq(seq)?;
        let p = self.check_pos(pos)?;
        if self.by_pos[s].get(p).is_some_and(|&c| c != NO_CELL) {
            return Err(GraphError::BadInput {
                what: "kv cells",
                msg: format!("sequence {seq} already holds a cell at position {pos}"),
            });
        }
        let n_ctx = self.n_ctx();
        let cell = (self.low_free..n_ctx)
            .find(|&c| self.pos[c] == FREE)
            .ok_or(GraphError::CacheFull { n_ctx })?;
        if self.by_pos[s].is_empty() {
            // The sequence's first cell: its table is created once and kept.
            self.by_pos[s] = vec![NO_CELL; n_ctx];
        }
        self.pos[cell] = pos;
        self.seqs[cell] = 1 << s;
        self.exclusive[s] += 1;
        // `cell < n_ctx <= i32::MAX` (see `new`).
        self.by_pos[s][p] = cell as i32;
        self.seq_end[s] = self.seq_end[s].max(p + 1);
        self.used += 1;
        self.low_free = cell + 1;
        Ok(cell as u32)
    }

    /// Takes `seq` out of the cell it holds at position `p` (if any); the
    /// cell becomes free when no sequence is left in it.
    fn leave(&mut self, s: usize, p: usize) {
        let Some(slot) = self.by_pos[s].get_mut(p) else {
            return;
        };
        let Ok(cell) = usize::try_from(*slot) else {
            return;
        };
        *slot = NO_CELL;
        self.seqs[cell] &= !(1u64 << s);
        match self.seqs[cell] {
            0 => self.exclusive[s] -= 1,
            // The one sequence left now holds the cell alone.
            m if m.is_power_of_two() => self.exclusive[m.trailing_zeros() as usize] += 1,
            _ => {}
        }
        if self.seqs[cell] == 0 {
            self.pos[cell] = FREE;
            self.used -= 1;
            self.low_free = self.low_free.min(cell);
        }
        if p + 1 == self.seq_end[s] {
            let table = &self.by_pos[s];
            let mut end = p;
            while end > 0 && table[end - 1] == NO_CELL {
                end -= 1;
            }
            self.seq_end[s] = end;
        }
    }

    /// Removes `seq` from its cells at positions `>= from_pos` (every cell
    /// when `from_pos <= 0`); cells no sequence uses any more become free.
    /// This is rollback: the contents stay in the regions but no window
    /// names them again.
    ///
    /// # Errors
    /// [`GraphError::BadSequence`] for `seq >= 64`.
    pub fn remove(&mut self, seq: u32, from_pos: i32) -> Result<()> {
        let s = Self::check_seq(seq)?;
        let from = usize::try_from(from_pos).unwrap_or(0);
        for p in (from..self.seq_end[s]).rev() {
            self.leave(s, p);
        }
        Ok(())
    }

    /// Makes `dst` use the cells `src` holds at positions `< below_pos`
    /// (prefix sharing, nothing is copied). Cells `dst` held at those
    /// positions are left first (all of them, also where `src` has none),
    /// so `dst` keeps one cell per position.
    ///
    /// # Errors
    /// [`GraphError::BadSequence`] when either id is `>= 64`.
    pub fn share(&mut self, src: u32, dst: u32, below_pos: i32) -> Result<()> {
        let s = Self::check_seq(src)?;
        let d = Self::check_seq(dst)?;
        if s == d {
            return Ok(());
        }
        let below = usize::try_from(below_pos).unwrap_or(0);
        for p in (0..below.min(self.seq_end[d])).rev() {
            self.leave(d, p);
        }
        let end = below.min(self.seq_end[s]);
        if end == 0 {
            return Ok(());
        }
        if self.by_pos[d].is_empty() {
            self.by_pos[d] = vec![NO_CELL; self.n_ctx()];
        }
        for p in 0..end {
            let c = self.by_pos[s][p];
            if let Ok(cell) = usize::try_from(c) {
                let m = self.seqs[cell];
                if m.is_power_of_two() {
                    // Its one holder no longer holds it alone.
                    self.exclusive[m.trailing_zeros() as usize] -= 1;
                }
                self.seqs[cell] |= 1 << d;
                self.by_pos[d][p] = c;
                self.seq_end[d] = self.seq_end[d].max(p + 1);
            }
        }
        Ok(())
    }

    /// Cells that `seq` alone holds: those its removal would free.
    pub fn exclusive_cells(&self, seq: u32) -> usize {
        self.exclusive.get(seq as usize).copied().unwrap_or(0)
    }

    /// Frees every cell.
    pub fn clear(&mut self) {
        self.pos.fill(FREE);
        self.seqs.fill(0);
        for table in &mut self.by_pos {
            table.fill(NO_CELL);
        }
        self.seq_end.fill(0);
        self.exclusive.fill(0);
        self.used = 0;
        self.low_free = 0;
    }

    /// Appends to `out` the cells `seq` holds at positions `<= pos`, in
    /// position order: the explicit list a query of `seq` at `pos` attends
    /// to. Does not allocate when `out` has the capacity.
    ///
    /// # Errors
    /// [`GraphError::BadSequence`] for `seq >= 64`.
    pub fn window(&self, seq: u32, pos: i32, out: &mut Vec<i32>) -> Result<()> {
        let s = Self::check_seq(seq)?;
        let Ok(last) = usize::try_from(pos) else {
            return Ok(());
        };
        let end = self.seq_end[s].min(last.saturating_add(1));
        out.extend(
            self.by_pos[s][..end]
                .iter()
                .copied()
                .filter(|&c| c != NO_CELL),
        );
        Ok(())
    }

    /// Allocates a cell for every `(seq, pos)` token of `batch` and fills
    /// `plan` with those cells and every token's window. All cells are
    /// taken before any window is built, so a token's window includes the
    /// cells written earlier in the same batch by its sequence (causal by
    /// position). `plan`'s vectors are cleared and refilled; once they have
    /// grown to the batch's size nothing is allocated.
    ///
    /// # Errors
    /// As [`allocate`](KvCells::allocate), including when the batch holds
    /// the same `(seq, pos)` twice, and [`GraphError::CacheFull`] when the
    /// batch needs more cells than are free. On error the cells taken by
    /// this call are released again, so the store is as before.
    pub fn plan_batch(&mut self, batch: &[(u32, i32)], plan: &mut BatchPlan) -> Result<()> {
        plan.kv_cells.clear();
        plan.window_offsets.clear();
        plan.window_cells.clear();
        plan.window_positions.clear();
        if batch.len() > self.n_ctx() - self.used {
            return Err(GraphError::CacheFull {
                n_ctx: self.n_ctx(),
            });
        }
        for &(seq, pos) in batch {
            match self.allocate(seq, pos) {
                // Cells are below n_ctx, which fits an i32 (see `new`).
                Ok(cell) => plan.kv_cells.push(cell as i32),
                Err(e) => {
                    self.undo_batch(batch, plan);
                    return Err(e);
                }
            }
        }
        plan.window_offsets.push(0);
        for &(seq, pos) in batch {
            // Cannot fail: every id was checked by `allocate`.
            let start = plan.window_cells.len();
            self.window(seq, pos, &mut plan.window_cells)?;
            let cells = &plan.window_cells[start..];
            plan.window_positions
                .extend(cells.iter().map(|&c| self.pos[c as usize]));
            let Ok(len) = i32::try_from(plan.window_cells.len()) else {
                self.undo_batch(batch, plan);
                return Err(GraphError::BadInput {
                    what: "kv cells",
                    msg: "the batch's windows exceed i32 offsets".into(),
                });
            };
            plan.window_offsets.push(len);
        }
        Ok(())
    }

    /// Releases the cells `plan_batch` took for the first
    /// `plan.kv_cells.len()` tokens of `batch` and empties `plan`. Each of
    /// those cells belongs to its token's sequence alone, so leaving it
    /// frees it.
    fn undo_batch(&mut self, batch: &[(u32, i32)], plan: &mut BatchPlan) {
        for &(seq, pos) in batch[..plan.kv_cells.len()].iter().rev() {
            self.leave(seq as usize, pos as usize);
        }
        plan.kv_cells.clear();
        plan.window_offsets.clear();
        plan.window_cells.clear();
        plan.window_positions.clear();
    }
}

/// Bytes one region of `row` values per cell takes over `n_ctx` cells.
pub(crate) fn region_bytes(format: KvFormat, row: usize, n_ctx: usize) -> usize {
    format.row_bytes(row) * n_ctx
}
