//! A small but varied GGUF image shared by the reader tests.

use minfer_gguf::{array_of, GgmlType, GgufWriter, Value, ValueType};

/// A file that exercises every metadata value type, a nested array, a
/// non-default alignment and several tensor types and ranks.
pub fn sample_writer() -> GgufWriter {
    let mut w = GgufWriter::new().with_alignment(64).unwrap();
    w.set("general.architecture", "llama")
        .set("general.name", "tiny")
        .set("llama.block_count", 2u32)
        .set("llama.embedding_length", 64u64)
        .set("llama.rope.freq_base", 10000.0f32)
        .set("test.u8", 7u8)
        .set("test.i8", -7i8)
        .set("test.u16", 700u16)
        .set("test.i16", -700i16)
        .set("test.i32", -70000i32)
        .set("test.i64", -7_000_000_000i64)
        .set("test.f64", 0.125f64)
        .set("test.bool", true)
        .set(
            "tokenizer.ggml.tokens",
            array_of(ValueType::String, ["a", "b", "ab", "<s>"]),
        )
        .set(
            "tokenizer.ggml.scores",
            array_of(ValueType::F32, [0.0f32, -1.0, -2.0, 0.0]),
        )
        .set(
            "test.nested",
            Value::Array(minfer_gguf::Array {
                elem_type: ValueType::Array,
                items: vec![
                    array_of(ValueType::I32, [1i32, 2, 3]),
                    array_of(ValueType::I32, [4i32]),
                ],
            }),
        );
    let f32_data: Vec<u8> = (0..64 * 2).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("token_embd.weight", GgmlType::F32, &[64, 2], f32_data)
        .unwrap();
    w.add_tensor(
        "blk.0.attn_q.weight",
        GgmlType::Q8_0,
        &[64, 3],
        vec![1u8; 34 * 2 * 3],
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_up.weight",
        GgmlType::Q4_K,
        &[256, 1],
        vec![2u8; 144],
    )
    .unwrap();
    w.add_tensor("output_norm.weight", GgmlType::F16, &[64], vec![3u8; 128])
        .unwrap();
    w
}
