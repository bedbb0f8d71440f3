//! How fast weights are repacked into the interleaved layout (load time).

use minfer_kernels::packed::pack;
use minfer_kernels::GgmlType;

fn main() {
    for (ty, bs) in [
        (GgmlType::Q5_0, 22usize),
        (GgmlType::Q4_1, 20),
        (GgmlType::Q8_0, 34),
    ] {
        let (rows, cols) = (4864, 896);
        let data: Vec<u8> = (0..rows * cols / 32 * bs)
            .map(|i| (i * 7 % 251) as u8 & 0x3b)
            .collect();
        let t = std::time::Instant::now();
        let p = pack(ty, rows, cols, &data).unwrap();
        let s = t.elapsed().as_secs_f64();
        println!(
            "{ty}: {:.1} MB in {:.1} ms = {:.0} MB/s",
            data.len() as f64 / 1e6,
            s * 1e3,
            data.len() as f64 / 1e6 / s
        );
        std::hint::black_box(p);
    }
}
