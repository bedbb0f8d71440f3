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
