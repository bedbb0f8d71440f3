//! Writes the small sample GGUF the reader tests use, e.g. as a fuzzing
//! seed: `cargo run -p minfer-gguf --example write_sample -- OUT.gguf`.

#[path = "../tests/common/mod.rs"]
mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .ok_or("usage: write_sample OUT.gguf")?;
    common::sample_writer().write_file(&out)?;
    Ok(())
}
