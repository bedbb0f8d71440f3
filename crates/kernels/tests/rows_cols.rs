//! Column blocks: rows widened once and stored column by column, and the
//! scores read from them, on every path against the scalar row loops, bit
//! for bit, with every head size and any run of rows.

use minfer_kernels::blocks::f32_to_f16;
use minfer_kernels::{HeadRows, KernelError, RowKernels, Rows};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Random f32 values with a spread of magnitudes, and their f16 bits.
fn random_rows(rng: &mut StdRng, n: usize) -> (Vec<f32>, Vec<u16>) {
    let f: Vec<f32> = (0..n)
        .map(|_| rng.gen_range(-1.0f32..1.0) * 2f32.powi(rng.gen_range(-8..6)))
        .collect();
    let h = f
        .iter()
        .map(|&x| u16::from_le_bytes(f32_to_f16(x)))
        .collect();
    (f, h)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Widens `rows` into a column block on `path` and checks the scores of
/// every head of `qs` for every run of rows of it against the scalar row
/// loop scoring the same rows.
fn check<T: HeadRows>(
    path: RowKernels,
    rows: Rows<'_, T>,
    (qs, hd): (&[f32], usize),
    ld: usize,
    one: impl Fn(&[f32], Rows<'_, T>, &mut [f32]),
    what: &str,
) {
    let n = rows.idx.len();
    let mut cols = vec![f32::NAN; hd * ld];
    T::cols(path, rows, hd, &mut cols, ld).unwrap();
    let mut scalar = vec![f32::NAN; hd * ld];
    T::cols(RowKernels::SCALAR, rows, hd, &mut scalar, ld).unwrap();
    for e in 0..hd {
        let (got, want) = (&cols[e * ld..e * ld + n], &scalar[e * ld..e * ld + n]);
        assert_eq!(bits(got), bits(want), "{path:?} {what} column {e}");
    }
    let mut runs = vec![0..n, 0..0];
    runs.extend((0..n).map(|a| a..n));
    runs.extend((0..n).map(|b| 0..b));
    runs.push(n / 3..n / 3 + (n - n / 3) / 2);
    let heads = qs.len() / hd;
    for run in runs {
        // Each head's scores, then three values that must stay untouched.
        let stride = run.len() + 3;
        let mut got = vec![f32::NAN; heads * stride];
        path.dot_cols_heads(qs, hd, &cols, ld, run.clone(), 0.125, &mut got, stride)
            .unwrap();
        let sub = Rows {
            idx: &rows.idx[run.clone()],
            ..rows
        };
        for (g, q) in qs.chunks_exact(hd).enumerate() {
            let mut want = vec![0.0; run.len()];
            one(q, sub, &mut want);
            let got = &got[g * stride..(g + 1) * stride];
            assert_eq!(
                bits(&got[..run.len()]),
                bits(&want),
                "{path:?} {what} rows {run:?} head {g} of {heads}"
            );
            assert!(
                got[run.len()..].iter().all(|x| x.is_nan()),
                "{path:?} {what}: wrote past the scores"
            );
        }
    }
}

#[test]
fn column_blocks_score_as_the_row_loops_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0xc015);
    for hd in [1usize, 5, 8, 13, 16, 20, 64, 128] {
        let stride = 2 * hd + 3;
        let n_rows = 80;
        let (data32, data16) = random_rows(&mut rng, stride * n_rows);
        for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 64] {
            let idx: Vec<i32> = (0..n).map(|_| rng.gen_range(0..n_rows as i32)).collect();
            let heads = rng.gen_range(1..18);
            let (qs, _) = random_rows(&mut rng, heads * hd);
            let ld = n + rng.gen_range(0..5);
            for path in RowKernels::supported() {
                let r16 = Rows {
                    data: &data16[..],
                    stride,
                    offset: hd + 1,
                    idx: &idx,
                };
                let one16 = |q: &[f32], r: Rows<'_, u16>, s: &mut [f32]| {
                    RowKernels::SCALAR.dot_rows_f16(q, r, 0.125, s).unwrap()
                };
                check(
                    path,
                    r16,
                    (&qs, hd),
                    ld,
                    one16,
                    &format!("f16 hd {hd} n {n}"),
                );
                let r32 = Rows {
                    data: &data32[..],
                    stride,
                    offset: 2,
                    idx: &idx,
                };
                let one32 = |q: &[f32], r: Rows<'_, f32>, s: &mut [f32]| {
                    RowKernels::SCALAR.dot_rows_f32(q, r, 0.125, s).unwrap()
                };
                check(
                    path,
                    r32,
                    (&qs, hd),
                    ld,
                    one32,
                    &format!("f32 hd {hd} n {n}"),
                );
            }
        }
    }
}

#[test]
fn column_blocks_refuse_bad_shapes() {
    let data = vec![0u16; 16 * 8];
    let rows = Rows {
        data: &data[..],
        stride: 16,
        offset: 0,
        idx: &[0, 1, 2],
    };
    for path in RowKernels::supported() {
        let mut cols = vec![0.0f32; 16 * 4];
        // More rows than the block is wide; a buffer short of a column.
        assert!(path.f16_cols(rows, 16, &mut cols, 2).is_err());
        assert!(path.f16_cols(rows, 16, &mut cols[..15 * 4 + 2], 4).is_err());
        assert!(path.f16_cols(rows, 16, &mut cols, 4).is_ok());
        // A row past the data.
        let bad = Rows {
            idx: &[0, 8],
            ..rows
        };
        assert!(matches!(
            path.f16_cols(bad, 16, &mut cols, 4),
            Err(KernelError::RowOutOfRange { .. })
        ));
        let q = [0.5f32; 32];
        let mut s = [0.0f32; 9];
        let dot = |q: &[f32], cols: &[f32], rows, s: &mut [f32], stride| {
            path.dot_cols_heads(q, 16, cols, 4, rows, 1.0, s, stride)
        };
        // Rows past the block, a short buffer or stride, part of a head,
        // a block short of a column.
        assert!(dot(&q, &cols, 0..5, &mut s, 5).is_err());
        assert!(dot(&q, &cols, 0..4, &mut s[..7], 4).is_err());
        assert!(dot(&q, &cols, 0..4, &mut s, 3).is_err());
        assert!(dot(&q[..20], &cols, 0..4, &mut s, 4).is_err());
        assert!(dot(&q, &cols[..63], 0..4, &mut s, 4).is_err());
        assert!(dot(&q, &cols, 1..4, &mut s, 4).is_ok());
    }
}
