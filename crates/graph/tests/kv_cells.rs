//! The KV cell store (allocation, rollback, windows, sharing, batch plans)
//! and the KV regions (formats, bounds).

use minfer_graph::kv::{BatchPlan, KvCells, KvRegion};
use minfer_graph::{GraphError, KvFormat};
use minfer_kernels::blocks::{f16_to_f32, f32_to_f16, BlockQ8_0};
use minfer_kernels::dequant::dequantize_q8_0;
use minfer_kernels::quant::quantize_row_q8_0;
use proptest::prelude::*;

fn window(c: &KvCells, seq: u32, pos: i32) -> Vec<i32> {
    let mut w = Vec::new();
    c.window(seq, pos, &mut w).unwrap();
    w
}

#[test]
fn allocate_rollback_and_reuse() {
    let mut c = KvCells::new(8);
    assert_eq!((c.n_ctx(), c.used(), c.max_pos(0)), (8, 0, None));
    for p in 0..5 {
        assert_eq!(
            c.allocate(0, p).unwrap(),
            p as u32,
            "a lone sequence stays contiguous"
        );
    }
    assert_eq!((c.used(), c.max_pos(0)), (5, Some(4)));
    assert_eq!(window(&c, 0, 10), vec![0, 1, 2, 3, 4]);

    // Rollback to position 3: cells 3 and 4 are free again and reused.
    c.remove(0, 3).unwrap();
    assert_eq!((c.used(), c.max_pos(0)), (3, Some(2)));
    assert_eq!(c.cell_pos(3), None);
    assert_eq!(window(&c, 0, 10), vec![0, 1, 2]);
    assert_eq!(c.allocate(0, 3).unwrap(), 3);
    assert_eq!(c.allocate(0, 4).unwrap(), 4);
    assert_eq!(window(&c, 0, 4), vec![0, 1, 2, 3, 4]);

    // Removing from a position <= 0 drops the whole sequence.
    c.remove(0, -5).unwrap();
    assert_eq!((c.used(), c.max_pos(0)), (0, None));
    assert_eq!(window(&c, 0, 7), Vec::<i32>::new());
    assert_eq!(c.allocate(0, 0).unwrap(), 0);
}

#[test]
fn windows_are_causal_and_per_sequence() {
    let mut c = KvCells::new(16);
    // Interleaved: seq 0 gets cells 0, 2, 4; seq 1 gets 1, 3.
    for (s, p) in [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)] {
        c.allocate(s, p).unwrap();
    }
    assert_eq!(window(&c, 0, 0), vec![0]);
    assert_eq!(window(&c, 0, 1), vec![0, 2]);
    assert_eq!(window(&c, 0, 2), vec![0, 2, 4]);
    assert_eq!(window(&c, 1, 1), vec![1, 3]);
    assert_eq!(window(&c, 1, 9), vec![1, 3]);
    assert_eq!(window(&c, 1, -1), Vec::<i32>::new());
    assert_eq!(window(&c, 2, 9), Vec::<i32>::new());
    assert_eq!(c.cell_seqs(3), 1 << 1);
    assert_eq!(c.cell_of(0, 2), Some(4));
    assert_eq!(c.cell_of(1, 2), None);

    // Windows are ordered by position, not by cell: free cell 0 (seq 0,
    // pos 0) by rolling seq 0 back, then write positions out of order.
    c.remove(0, 0).unwrap();
    c.allocate(0, 1).unwrap(); // cell 0
    c.allocate(0, 0).unwrap(); // cell 2
    assert_eq!(window(&c, 0, 5), vec![2, 0]);

    // `window` appends.
    let mut w = vec![99];
    c.window(1, 0, &mut w).unwrap();
    assert_eq!(w, vec![99, 1]);
}

#[test]
fn batch_with_two_sequences() {
    let mut c = KvCells::new(16);
    let mut plan = BatchPlan::default();
    let batch = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)];
    c.plan_batch(&batch, &mut plan).unwrap();
    assert_eq!(plan.kv_cells, vec![0, 1, 2, 3, 4]);
    assert_eq!(plan.window_offsets, vec![0, 1, 2, 4, 6, 9]);
    assert_eq!(plan.window_cells, vec![0, 1, 0, 2, 1, 3, 0, 2, 4]);

    // The next decode step of both sequences sees their whole history.
    c.plan_batch(&[(1, 2), (0, 3)], &mut plan).unwrap();
    assert_eq!(plan.kv_cells, vec![5, 6]);
    assert_eq!(plan.window_offsets, vec![0, 3, 7]);
    assert_eq!(plan.window_cells, vec![1, 3, 5, 0, 2, 4, 6]);
    assert_eq!(c.used(), 7);
}

#[test]
fn batch_windows_are_causal_by_position() {
    // Tokens of a batch need not come in position order: every cell is
    // taken before any window is built.
    let mut c = KvCells::new(8);
    let mut plan = BatchPlan::default();
    c.plan_batch(&[(0, 1), (0, 0)], &mut plan).unwrap();
    assert_eq!(plan.kv_cells, vec![0, 1]);
    assert_eq!(plan.window_offsets, vec![0, 2, 3]);
    assert_eq!(plan.window_cells, vec![1, 0, 1]);
}

#[test]
fn shared_prefix_names_the_same_cells() {
    let mut c = KvCells::new(16);
    let mut plan = BatchPlan::default();
    let prefix: Vec<(u32, i32)> = (0..4).map(|p| (0, p)).collect();
    c.plan_batch(&prefix, &mut plan).unwrap();
    c.share(0, 1, 4).unwrap();
    assert_eq!(c.used(), 4, "sharing copies nothing");
    assert_eq!(c.max_pos(1), Some(3));
    assert_eq!(c.cell_seqs(2), 0b11);

    c.plan_batch(&[(0, 4), (1, 4)], &mut plan).unwrap();
    assert_eq!(plan.kv_cells, vec![4, 5]);
    let w0 = &plan.window_cells[plan.window_offsets[0] as usize..plan.window_offsets[1] as usize];
    let w1 = &plan.window_cells[plan.window_offsets[1] as usize..plan.window_offsets[2] as usize];
    assert_eq!(w0, [0, 1, 2, 3, 4]);
    assert_eq!(w1, [0, 1, 2, 3, 5]);

    // The prefix lives while either sequence uses it.
    c.remove(0, 0).unwrap();
    assert_eq!(c.used(), 5);
    assert_eq!(window(&c, 1, 9), vec![0, 1, 2, 3, 5]);
    c.remove(1, 2).unwrap();
    assert_eq!(c.used(), 2);
    c.remove(1, 0).unwrap();
    assert_eq!(c.used(), 0);

    // Sharing a shorter prefix than the source holds, into a destination
    // that already has cells at those positions: it leaves its own first.
    c.clear();
    for p in 0..3 {
        c.allocate(0, p).unwrap();
    }
    for p in 0..2 {
        c.allocate(1, p).unwrap();
    }
    c.share(0, 1, 2).unwrap();
    assert_eq!(window(&c, 1, 9), vec![0, 1]);
    assert_eq!(c.used(), 3, "seq 1's own cells were freed");
    c.share(0, 0, 3).unwrap();
    assert_eq!(window(&c, 0, 9), vec![0, 1, 2]);
}

#[test]
fn errors_leave_nothing_half_allocated() {
    let mut c = KvCells::new(4);
    let mut plan = BatchPlan::default();
    let batch: Vec<(u32, i32)> = (0..5).map(|p| (0, p % 4)).collect();
    assert!(matches!(
        c.plan_batch(&batch, &mut plan),
        Err(GraphError::CacheFull { n_ctx: 4 })
    ));
    assert_eq!(c.used(), 0);

    c.allocate(1, 0).unwrap();
    c.allocate(1, 1).unwrap();
    c.allocate(1, 2).unwrap();
    assert!(matches!(
        c.plan_batch(&[(0, 0), (0, 1)], &mut plan),
        Err(GraphError::CacheFull { .. })
    ));
    assert!(matches!(c.allocate(0, 3), Ok(3)));
    assert!(matches!(
        c.allocate(0, 2),
        Err(GraphError::CacheFull { .. })
    ));
    assert_eq!(c.used(), 4);
    c.clear();

    // A bad position late in the batch undoes the tokens before it.
    for bad in [4, -1] {
        let r = c.plan_batch(&[(0, 0), (1, 0), (0, bad)], &mut plan);
        assert!(
            matches!(r, Err(GraphError::PositionOutOfRange { pos, n_ctx: 4 }) if pos == bad as i64),
            "{r:?}"
        );
        assert_eq!(c.used(), 0);
        assert_eq!((c.max_pos(0), c.max_pos(1)), (None, None));
        assert!(plan.kv_cells.is_empty() && plan.window_offsets.is_empty());
    }
    // The same (seq, pos) twice in one batch, or again later.
    assert!(matches!(
        c.plan_batch(&[(0, 0), (0, 1), (0, 0)], &mut plan),
        Err(GraphError::BadInput { .. })
    ));
    assert_eq!(c.used(), 0);
    c.allocate(0, 0).unwrap();
    assert!(matches!(c.allocate(0, 0), Err(GraphError::BadInput { .. })));
    assert_eq!(c.used(), 1);

    assert!(matches!(
        c.allocate(64, 0),
        Err(GraphError::BadSequence(64))
    ));
    assert!(matches!(
        c.plan_batch(&[(1, 1), (70, 0)], &mut plan),
        Err(GraphError::BadSequence(70))
    ));
    assert_eq!(c.used(), 1);
    assert!(c.remove(64, 0).is_err());
    assert!(c.share(0, 64, 1).is_err());
    assert!(c.window(99, 0, &mut Vec::new()).is_err());
    assert_eq!(c.max_pos(99), None);
}

#[test]
fn plan_buffers_are_reused() {
    let mut c = KvCells::new(64);
    let mut plan = BatchPlan::default();
    let prompt: Vec<(u32, i32)> = (0..8).map(|p| (0, p)).collect();
    c.plan_batch(&prompt, &mut plan).unwrap();
    plan.window_cells.reserve(64 * 2);
    let caps = (
        plan.kv_cells.capacity(),
        plan.window_offsets.capacity(),
        plan.window_cells.capacity(),
    );
    let ptr = plan.window_cells.as_ptr();
    for p in 8..40 {
        c.plan_batch(&[(0, p)], &mut plan).unwrap();
        assert_eq!(plan.window_cells.len(), p as usize + 1);
    }
    assert_eq!(
        caps,
        (
            plan.kv_cells.capacity(),
            plan.window_offsets.capacity(),
            plan.window_cells.capacity()
        )
    );
    assert_eq!(ptr, plan.window_cells.as_ptr());
}

#[test]
fn region_formats_round_trip() {
    let row: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.173)
        .collect();
    let mut back = vec![0.0f32; 64];

    let mut r = KvRegion::new(KvFormat::F32, 64, 3).unwrap();
    assert_eq!(
        (r.format(), r.row_elems(), r.n_ctx()),
        (KvFormat::F32, 64, 3)
    );
    r.store_row(2, &row).unwrap();
    r.read_row(2, &mut back).unwrap();
    assert_eq!(back, row);
    assert_eq!(r.row_f32(2).unwrap(), &row[..]);
    assert!(r.row_f32(3).is_none());

    let mut r = KvRegion::new(KvFormat::F16, 64, 3).unwrap();
    r.store_row(1, &row).unwrap();
    r.read_row(1, &mut back).unwrap();
    let want: Vec<f32> = row.iter().map(|&x| f16_to_f32(f32_to_f16(x))).collect();
    assert_eq!(back, want);
    assert!(r.row_f32(1).is_none());

    let mut r = KvRegion::new(KvFormat::Q8_0, 64, 3).unwrap();
    r.store_row(0, &row).unwrap();
    r.read_row(0, &mut back).unwrap();
    let mut blocks = [BlockQ8_0 {
        d: [0; 2],
        qs: [0; 32],
    }; 2];
    quantize_row_q8_0(&row, &mut blocks);
    let mut want = vec![0.0f32; 64];
    dequantize_q8_0(&blocks, &mut want);
    assert_eq!(back, want);
}

#[test]
fn region_errors() {
    assert!(matches!(
        KvRegion::new(KvFormat::Q8_0, 48, 4),
        Err(GraphError::BadInput { .. })
    ));
    assert!(KvRegion::new(KvFormat::F16, 48, 4).is_ok());
    assert!(KvRegion::new(KvFormat::F32, 0, 4).is_err());
    assert!(KvRegion::new(KvFormat::F32, 8, 0).is_err());
    assert!(KvRegion::new(KvFormat::F32, usize::MAX / 2, 4).is_err());

    for format in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
        let mut r = KvRegion::new(format, 32, 4).unwrap();
        let row = [1.0f32; 32];
        assert!(matches!(
            r.store_row(4, &row),
            Err(GraphError::CellOutOfRange { cell: 4, n_ctx: 4 })
        ));
        assert!(matches!(
            r.store_row(0, &row[..31]),
            Err(GraphError::BadInput { .. })
        ));
        let mut back = [0.0f32; 32];
        assert!(r.read_row(9, &mut back).is_err());
        assert!(r.read_row(0, &mut back[..16]).is_err());
        r.read_row(3, &mut back).unwrap();
        assert_eq!(back, [0.0; 32], "regions start zeroed");
    }
}

/// The reference model: each cell is free or `(pos, seq bits)`.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    cells: Vec<Option<(i32, u64)>>,
}

impl Model {
    fn holds(&self, seq: u32, pos: i32) -> bool {
        self.cells
            .iter()
            .flatten()
            .any(|&(p, s)| p == pos && s & (1 << seq) != 0)
    }

    fn allocate(&mut self, seq: u32, pos: i32) -> Result<u32, &'static str> {
        if seq >= 64 {
            return Err("seq");
        }
        if pos < 0 || pos as usize >= self.cells.len() {
            return Err("pos");
        }
        if self.holds(seq, pos) {
            return Err("dup");
        }
        let c = self.cells.iter().position(Option::is_none).ok_or("full")?;
        self.cells[c] = Some((pos, 1 << seq));
        Ok(c as u32)
    }

    fn leave_where(&mut self, seq: u32, keep: impl Fn(i32) -> bool) {
        for cell in &mut self.cells {
            if let Some((p, s)) = cell {
                if !keep(*p) {
                    *s &= !(1 << seq);
                    if *s == 0 {
                        *cell = None;
                    }
                }
            }
        }
    }

    fn share(&mut self, src: u32, dst: u32, below: i32) {
        if src == dst {
            return;
        }
        self.leave_where(dst, |p| p >= below);
        for (p, s) in self.cells.iter_mut().flatten() {
            if *p < below && *s & (1 << src) != 0 {
                *s |= 1 << dst;
            }
        }
    }

    fn window(&self, seq: u32, pos: i32) -> Vec<i32> {
        let mut w: Vec<(i32, i32)> = self
            .cells
            .iter()
            .enumerate()
            .filter_map(|(c, cell)| match *cell {
                Some((p, s)) if p <= pos && s & (1 << seq) != 0 => Some((p, c as i32)),
                _ => None,
            })
            .collect();
        w.sort();
        w.into_iter().map(|(_, c)| c).collect()
    }
}

#[derive(Clone, Debug)]
enum Step {
    Allocate(u32, i32),
    Remove(u32, i32),
    Share(u32, u32, i32),
    Batch(Vec<(u32, i32)>),
}

fn step(n_ctx: i32) -> impl Strategy<Value = Step> {
    let seq = 0u32..4;
    let pos = -1..n_ctx + 1;
    prop_oneof![
        4 => (seq.clone(), pos.clone()).prop_map(|(s, p)| Step::Allocate(s, p)),
        2 => (seq.clone(), pos.clone()).prop_map(|(s, p)| Step::Remove(s, p)),
        1 => (seq.clone(), seq.clone(), pos.clone()).prop_map(|(a, b, p)| Step::Share(a, b, p)),
        2 => prop::collection::vec((seq, pos), 0..6).prop_map(Step::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn cells_match_a_simple_model(steps in prop::collection::vec(step(12), 1..60)) {
        let n_ctx = 12usize;
        let mut c = KvCells::new(n_ctx);
        let mut m = Model { cells: vec![None; n_ctx] };
        let mut plan = BatchPlan::default();
        for st in &steps {
            match st {
                Step::Allocate(s, p) => {
                    let got = c.allocate(*s, *p);
                    let want = m.allocate(*s, *p);
                    prop_assert_eq!(got.is_ok(), want.is_ok(), "{:?}: {:?} vs {:?}", st, got, want);
                    if let (Ok(a), Ok(b)) = (got, want) {
                        prop_assert_eq!(a, b);
                    }
                }
                Step::Remove(s, p) => {
                    c.remove(*s, *p).unwrap();
                    m.leave_where(*s, |q| q < *p);
                }
                Step::Share(a, b, p) => {
                    c.share(*a, *b, *p).unwrap();
                    m.share(*a, *b, *p);
                }
                Step::Batch(batch) => {
                    let before = m.clone();
                    let mut want = Ok(Vec::new());
                    let free = m.cells.iter().filter(|x| x.is_none()).count();
                    if batch.len() > free {
                        want = Err("full");
                    } else {
                        for &(s, p) in batch {
                            match m.allocate(s, p) {
                                Ok(cell) => want.as_mut().unwrap().push(cell as i32),
                                Err(e) => { want = Err(e); break; }
                            }
                        }
                    }
                    let got = c.plan_batch(batch, &mut plan);
                    match want {
                        Ok(cells) => {
                            prop_assert!(got.is_ok(), "{:?}: {:?}", st, got);
                            prop_assert_eq!(&plan.kv_cells, &cells);
                            let mut expect_cells = Vec::new();
                            let mut offsets = vec![0];
                            for &(s, p) in batch {
                                expect_cells.extend(m.window(s, p));
                                offsets.push(expect_cells.len() as i32);
                            }
                            prop_assert_eq!(&plan.window_offsets, &offsets);
                            prop_assert_eq!(&plan.window_cells, &expect_cells);
                        }
                        Err(_) => {
                            prop_assert!(got.is_err(), "{:?} should fail", st);
                            m = before;
                        }
                    }
                }
            }
            // The whole state agrees after every step.
            for cell in 0..n_ctx {
                let want = m.cells[cell];
                prop_assert_eq!(c.cell_pos(cell), want.map(|x| x.0));
                prop_assert_eq!(c.cell_seqs(cell), want.map_or(0, |x| x.1));
            }
            prop_assert_eq!(c.used(), m.cells.iter().flatten().count());
            for s in 0..4u32 {
                let max = m.cells.iter().flatten().filter(|x| x.1 & (1 << s) != 0).map(|x| x.0).max();
                prop_assert_eq!(c.max_pos(s), max);
                let alone = m.cells.iter().flatten().filter(|x| x.1 == 1 << s).count();
                prop_assert_eq!(c.exclusive_cells(s), alone, "cells sequence {} holds alone", s);
                for p in [-1, 0, 3, 7, 11, 20] {
                    prop_assert_eq!(window(&c, s, p), m.window(s, p));
                }
            }
        }
    }
}
