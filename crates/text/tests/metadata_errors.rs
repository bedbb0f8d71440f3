//! Loading from synthetic metadata: what is refused, what falls back.

use minfer_gguf::{Array, Metadata, Value, ValueType};
use minfer_text::{ChatTemplate, TextError, Tokenizer};

fn strings(items: &[&str]) -> Value {
    Value::Array(Array {
        elem_type: ValueType::String,
        items: items.iter().map(|s| Value::String(s.to_string())).collect(),
    })
}

fn ints(items: &[i32]) -> Value {
    Value::Array(Array {
        elem_type: ValueType::I32,
        items: items.iter().map(|&i| Value::I32(i)).collect(),
    })
}

/// A tiny byte-level BPE vocabulary: ASCII letters, a space, a few merges
/// and ChatML markers.
fn tiny(pre: Option<&str>) -> Metadata {
    let mut tokens: Vec<String> = ('a'..='z').map(String::from).collect();
    tokens.extend(
        [
            "Ġ",
            "Ġh",
            "hi",
            "Ġhi",
            "<|im_start|>",
            "<|im_end|>",
            "<|endoftext|>",
        ]
        .map(String::from),
    );
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut types = vec![1; tokens.len()];
    let n = types.len();
    types[n - 3..].fill(3);
    let mut md = Metadata::default();
    md.insert("tokenizer.ggml.model".into(), "gpt2".into())
        .unwrap();
    if let Some(pre) = pre {
        md.insert("tokenizer.ggml.pre".into(), pre.into()).unwrap();
    }
    md.insert("tokenizer.ggml.tokens".into(), strings(&refs))
        .unwrap();
    md.insert("tokenizer.ggml.token_type".into(), ints(&types))
        .unwrap();
    md.insert(
        "tokenizer.ggml.merges".into(),
        strings(&["h i", "Ġ h", "Ġ hi"]),
    )
    .unwrap();
    md.insert(
        "tokenizer.ggml.eos_token_id".into(),
        Value::U32(n as u32 - 2),
    )
    .unwrap();
    md
}

#[test]
fn tiny_vocabulary_round_trip() {
    let t = Tokenizer::from_gguf(&tiny(Some("qwen2"))).expect("loads");
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    let ids = t.encode("<|im_start|>hi hi<|im_end|>", true, true);
    let hi = t.token_id("hi").unwrap();
    let space_hi = t.token_id("Ġhi").unwrap();
    assert_eq!(
        ids,
        [
            t.token_id("<|im_start|>").unwrap(),
            hi,
            space_hi,
            t.token_id("<|im_end|>").unwrap()
        ]
    );
    assert_eq!(t.decode(&ids, true), b"<|im_start|>hi hi<|im_end|>");
    assert_eq!(t.decode(&ids, false), b"hi hi");
    // `<|endoftext|>` and `<|im_end|>` end generation; EOS is one of them.
    assert_eq!(
        t.eog_ids(),
        [
            t.token_id("<|im_end|>").unwrap(),
            t.token_id("<|endoftext|>").unwrap()
        ]
    );
}

#[test]
fn shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Tokenizer>();
    assert_send_sync::<ChatTemplate>();
}

#[test]
fn unknown_tokenizer_model_is_an_error() {
    let mut md = Metadata::default();
    md.insert("tokenizer.ggml.model".into(), "t5".into())
        .unwrap();
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(
        matches!(err, TextError::UnsupportedModel(ref m) if m == "t5"),
        "{err}"
    );
    assert!(err.to_string().contains("`t5`"), "{err}");

    let err = Tokenizer::from_gguf(&Metadata::default()).unwrap_err();
    assert!(
        matches!(err, TextError::MissingKey("tokenizer.ggml.model")),
        "{err}"
    );
}

#[test]
fn unknown_pre_tokenizer_falls_back_with_a_warning() {
    let t = Tokenizer::from_gguf(&tiny(Some("no-such-pre"))).expect("loads");
    assert_eq!(t.pre_tokenizer(), "default");
    assert_eq!(t.warnings().len(), 1, "{:?}", t.warnings());
    assert!(
        t.warnings()[0].contains("no-such-pre"),
        "{:?}",
        t.warnings()
    );
    assert_eq!(t.decode(&t.encode("hi hi", false, false), true), b"hi hi");

    let t = Tokenizer::from_gguf(&tiny(None)).expect("loads");
    assert_eq!(t.pre_tokenizer(), "default");
    assert!(t.warnings()[0].contains("missing"), "{:?}", t.warnings());
}

#[test]
fn malformed_vocabulary_is_an_error() {
    // A token_type array shorter than the vocabulary.
    let mut md = Metadata::default();
    for (k, v) in tiny(Some("qwen2")).iter() {
        let v = if k == "tokenizer.ggml.token_type" {
            ints(&[1, 1])
        } else {
            v.clone()
        };
        md.insert(k.to_string(), v).unwrap();
    }
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(
        matches!(
            err,
            TextError::BadMetadata {
                key: "tokenizer.ggml.token_type",
                ..
            }
        ),
        "{err}"
    );

    let mut md = Metadata::default();
    md.insert("tokenizer.ggml.model".into(), "gpt2".into())
        .unwrap();
    md.insert("tokenizer.ggml.tokens".into(), Value::U32(3))
        .unwrap();
    let err = Tokenizer::from_gguf(&md).unwrap_err();
    assert!(matches!(err, TextError::Metadata(_)), "{err}");
}

#[test]
fn out_of_range_special_id_is_ignored_with_a_warning() {
    let mut md = tiny(Some("qwen2"));
    md.insert("tokenizer.ggml.bos_token_id".into(), Value::U32(1_000_000))
        .unwrap();
    let t = Tokenizer::from_gguf(&md).expect("loads");
    assert!(
        t.warnings().iter().any(|w| w.contains("bos_token_id")),
        "{:?}",
        t.warnings()
    );
    assert_eq!(t.bos(), Some(11)); // llama.cpp's default stays
}

#[test]
fn broken_chat_template_is_refused() {
    let mut md = Metadata::default();
    md.insert(
        "tokenizer.chat_template".into(),
        "{% for message in messages %}{{ message.content }{% endfor %}".into(),
    )
    .unwrap();
    let err = ChatTemplate::from_gguf(&md).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::Template(_)), "{msg}");
    assert!(msg.starts_with("chat template: syntax error"), "{msg}");
    eprintln!("{msg}");

    assert!(ChatTemplate::from_gguf(&Metadata::default())
        .unwrap()
        .is_none());
}

#[test]
fn failing_render_is_an_error() {
    let t = ChatTemplate::new("{{ messages[0].content.no_such_method() }}").unwrap();
    let err = t
        .render(&[minfer_text::ChatMessage::new("user", "x")], None, true)
        .unwrap_err();
    assert!(matches!(err, TextError::Template(_)), "{err}");
    eprintln!("{err}");
}
