//! Raw KV rows: what `read_raw_row` returns, `write_raw_row` restores bit
//! for bit, in every storage format.

use minfer_graph::kv::KvRegion;
use minfer_graph::KvFormat;

#[test]
fn raw_rows_round_trip_bit_exactly_in_every_format() {
    for format in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
        let row = 64;
        let mut a = KvRegion::new(format, row, 4).unwrap();
        let values: Vec<f32> = (0..row).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        a.store_row(2, &values).unwrap();
        let mut raw = Vec::new();
        a.read_raw_row(2, &mut raw).unwrap();
        assert_eq!(raw.len(), a.row_bytes(), "{format:?}");

        let mut b = KvRegion::new(format, row, 4).unwrap();
        b.write_raw_row(1, &raw).unwrap();
        let (mut x, mut y) = (vec![0.0; row], vec![0.0; row]);
        a.read_row(2, &mut x).unwrap();
        b.read_row(1, &mut y).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&x), bits(&y), "{format:?}");

        assert!(b.write_raw_row(1, &raw[1..]).is_err(), "short row accepted");
        assert!(
            b.write_raw_row(4, &raw).is_err(),
            "cell past n_ctx accepted"
        );
    }
}

/// A block of cells decoded at once holds, row after row, what `slice`
/// gives each cell, in every format and on every row-kernel path: head
/// ranges on Q8_0 block edges (decoded whole) and off them (a piece of a
/// block at a time). Bad cells, ranges and short buffers are refused.
#[test]
fn decoded_rows_are_the_slices_of_their_cells() {
    use minfer_kernels::RowKernels;
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let (row, n_ctx) = (128, 9);
    for format in [KvFormat::F32, KvFormat::F16, KvFormat::Q8_0] {
        let mut r = KvRegion::new(format, row, n_ctx).unwrap();
        for c in 0..n_ctx {
            let values: Vec<f32> = (0..row)
                .map(|i| ((c * row + i) as f32 * 0.73).sin() * (1 + c) as f32)
                .collect();
            r.store_row(c, &values).unwrap();
        }
        let cells = [7, 0, 3, 3, 8];
        for (start, len) in [(0, 128), (32, 64), (64, 64), (16, 48), (40, 17), (0, 0)] {
            let mut want = Vec::new();
            let mut buf = vec![0.0; len + 64];
            for &c in &cells {
                want.extend_from_slice(r.slice(c as usize, start, len, &mut buf).unwrap());
            }
            for rk in RowKernels::supported() {
                let mut got = vec![f32::NAN; cells.len() * len];
                let at = format!("{format:?} {start}+{len} {rk:?}");
                assert!(
                    r.decode_rows(rk, &cells, start, len, &mut got).is_some(),
                    "{at}"
                );
                assert_eq!(bits(&got), bits(&want), "{at}");
            }
        }
        let rk = RowKernels::detect();
        let mut out = vec![0.0; 5 * 64];
        assert!(
            r.decode_rows(rk, &[0, 9], 0, 64, &mut out).is_none(),
            "cell past n_ctx"
        );
        assert!(
            r.decode_rows(rk, &[0, -1], 0, 64, &mut out).is_none(),
            "negative cell"
        );
        assert!(
            r.decode_rows(rk, &[0], 96, 64, &mut out).is_none(),
            "range past the row"
        );
        assert!(
            r.decode_rows(rk, &[0; 6], 0, 64, &mut out).is_none(),
            "short buffer"
        );
    }
}
