//! The writer's output is read back exactly, and split models load as one.

mod common;

use minfer_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, Value, ValueType};

#[test]
fn writer_output_reads_back_exactly() {
    let w = common::sample_writer();
    let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.architecture(), Some("llama"));
    let md = f.metadata();
    assert_eq!(md.get_u64("llama.block_count").unwrap(), Some(2));
    assert_eq!(md.get("test.i64"), Some(&Value::I64(-7_000_000_000)));
    assert_eq!(md.get("test.i8"), Some(&Value::I8(-7)));
    assert_eq!(md.get_f64("test.f64").unwrap(), Some(0.125));
    assert_eq!(md.get_bool("test.bool").unwrap(), Some(true));
    let tokens = md.get_array("tokenizer.ggml.tokens").unwrap().unwrap();
    assert_eq!(tokens.elem_type, ValueType::String);
    assert_eq!(tokens.items[2].as_str(), Some("ab"));
    let nested = md.get_array("test.nested").unwrap().unwrap();
    assert_eq!(
        nested.items[1].as_array().unwrap().items,
        vec![Value::I32(4)]
    );
    assert!(matches!(
        md.get_str("llama.block_count"),
        Err(GgufError::WrongValueType { .. })
    ));

    assert_eq!(f.tensors().len(), 4);
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.info.shape, vec![64, 2]);
    assert_eq!(emb.info.ggml_type, GgmlType::F32);
    let data = f.tensor_data(emb);
    assert_eq!(data.len(), 512);
    assert_eq!(
        f32::from_le_bytes(data[4 * 70..4 * 71].try_into().unwrap()),
        70.0
    );
    assert_eq!(
        f.tensor_bytes("blk.0.ffn_up.weight").unwrap(),
        &[2u8; 144][..]
    );
    for t in f.tensors() {
        assert_eq!(t.info.offset % 64, 0, "{} misaligned", t.info.name);
    }
    assert!(matches!(
        f.tensor_bytes("nope"),
        Err(GgufError::MissingTensor(_))
    ));
}

#[test]
fn file_on_disk_is_mapped_and_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    common::sample_writer().write_file(&path).unwrap();
    assert!(!dir.path().join("m.gguf.partial").exists());
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.tensors().len(), 4);
    assert_eq!(f.file_size(), std::fs::metadata(&path).unwrap().len());
    // Tensor data of a mapped file is aligned in memory as in the file.
    let p = f.tensor_bytes("blk.0.attn_q.weight").unwrap().as_ptr() as usize;
    assert_eq!(p % 64, 0);
}

#[test]
fn writer_rejects_inconsistent_tensors() {
    let mut w = GgufWriter::new();
    assert!(w
        .add_tensor("a", GgmlType::Q4_0, &[33], vec![0; 18])
        .is_err());
    assert!(w.add_tensor("a", GgmlType::F32, &[4], vec![0; 15]).is_err());
    w.add_tensor("a", GgmlType::F32, &[4], vec![0; 16]).unwrap();
    assert!(matches!(
        w.add_tensor("a", GgmlType::F32, &[4], vec![0; 16]),
        Err(GgufError::DuplicateTensor(_))
    ));
    assert!(GgufWriter::new().with_alignment(48).is_err());
}

fn write_split(dir: &std::path::Path, count: u32, tensors_per_part: u32, break_part: Option<u32>) {
    for i in 0..count {
        let mut w = GgufWriter::new();
        if i == 0 {
            w.set("general.architecture", "llama");
            w.set("split.tensors.count", (count * tensors_per_part) as i32);
        }
        let no = if break_part == Some(i) { 7 } else { i as u16 };
        w.set("split.no", no).set("split.count", count as u16);
        for t in 0..tensors_per_part {
            let name = format!("t{i}.{t}");
            w.add_tensor(name, GgmlType::F32, &[8], vec![i as u8; 32])
                .unwrap();
        }
        w.write_file(minfer_gguf::split_path(dir, "model", i, count))
            .unwrap();
    }
}

#[test]
fn split_model_loads_as_one_from_any_part() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 3, 2, None);
    let f = GgufFile::open(dir.path().join("model-00002-of-00003.gguf")).unwrap();
    assert_eq!(f.paths().len(), 3);
    assert_eq!(f.tensors().len(), 6);
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.tensor_bytes("t2.1").unwrap(), &[2u8; 32][..]);
    assert_eq!(f.tensor_bytes("t0.0").unwrap(), &[0u8; 32][..]);
}

#[test]
fn split_model_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 3, 1, Some(1));
    let err = GgufFile::open(dir.path().join("model-00001-of-00003.gguf")).unwrap_err();
    assert!(err.to_string().contains("split.no"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 3, 1, None);
    std::fs::remove_file(dir.path().join("model-00003-of-00003.gguf")).unwrap();
    let err = GgufFile::open(dir.path().join("model-00001-of-00003.gguf")).unwrap_err();
    assert!(err.to_string().contains("part 3 of 3 is missing"), "{err}");
}

#[test]
fn split_names_are_recognized_strictly() {
    use std::path::Path;
    assert_eq!(
        minfer_gguf::split_name(Path::new("/x/Qwen-7B-00002-of-00004.gguf")),
        Some(("Qwen-7B".to_string(), 4))
    );
    assert_eq!(
        minfer_gguf::split_name(Path::new("a-0001-of-0002.gguf")),
        None
    );
    assert_eq!(minfer_gguf::split_name(Path::new("model.gguf")), None);
    assert_eq!(
        minfer_gguf::split_name(Path::new("é-00001-of-0000x.gguf")),
        None
    );
}

#[test]
fn header_errors_are_typed() {
    let good = common::sample_writer().to_bytes();
    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(
        GgufFile::from_bytes(b),
        Err(GgufError::BadMagic { .. })
    ));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(matches!(GgufFile::from_bytes(b), Err(GgufError::BigEndian)));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(b),
        Err(GgufError::UnsupportedVersion(1))
    ));
    // A tensor count far beyond what the file can hold is rejected up front.
    let mut b = good.clone();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(b),
        Err(GgufError::CountTooLarge { .. })
    ));
    // Unknown tensor type ids are named in the error.
    let mut w = GgufWriter::new();
    w.add_tensor("w", GgmlType::F32, &[4], vec![0; 16]).unwrap();
    let mut b = w.to_bytes();
    let type_pos = b.len() - 32 - 8 - 4; // type id sits before the offset
    let pos = (0..b.len() - 4)
        .rev()
        .find(|&i| {
            i <= type_pos && b[i..i + 4] == 0u32.to_le_bytes() && b[i - 8..i] == 4u64.to_le_bytes()
        })
        .unwrap();
    b[pos..pos + 4].copy_from_slice(&4u32.to_le_bytes());
    let err = GgufFile::from_bytes(b).unwrap_err();
    assert!(
        matches!(err, GgufError::UnknownTensorType { type_id: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("type id 4"), "{err}");
}
