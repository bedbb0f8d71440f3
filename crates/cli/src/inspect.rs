//! `minfer inspect`: what a GGUF file holds, as text or JSON.

use std::io::Write;

use anyhow::{Context, Result};
use minfer_gguf::{GgufFile, Metadata, Value};
use minfer_store::{fmt_bytes, Store};
use serde_json::{json, Map, Value as Json};

/// Arrays longer than this are summarized (type and length) instead of
/// printed: vocabularies hold hundreds of thousands of entries.
const MAX_ARRAY_SHOWN: usize = 16;

/// Arguments of `minfer inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// Model file, known name or hf:OWNER/REPO/FILE.gguf.
    model: String,
    /// Print JSON: architecture, metadata (long arrays summarized) and
    /// tensors.
    #[arg(long)]
    json: bool,
}

pub fn run(store: &Store, args: Args) -> Result<()> {
    let path = store.resolve(&args.model)?;
    let file = GgufFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&to_json(&file))?)?;
    } else {
        print_text(&mut out, &file)?;
    }
    Ok(())
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        Value::F32(x) => json!(x),
        Value::F64(x) => json!(x),
        Value::Bool(x) => json!(x),
        Value::String(s) => json!(s),
        Value::Array(a) if a.items.len() > MAX_ARRAY_SHOWN => json!({
            "type": "array",
            "element_type": a.elem_type.name(),
            "len": a.items.len(),
        }),
        Value::Array(a) => Json::Array(a.items.iter().map(value_json).collect()),
    }
}

struct Totals {
    params: u64,
    bytes: u64,
}

fn totals(f: &GgufFile) -> Totals {
    f.tensors().iter().fold(
        Totals {
            params: 0,
            bytes: 0,
        },
        |t, x| Totals {
            params: t.params + x.info.n_elements(),
            bytes: t.bytes + x.info.n_bytes,
        },
    )
}

fn bits_per_weight(t: &Totals) -> f64 {
    if t.params == 0 {
        0.0
    } else {
        t.bytes as f64 * 8.0 / t.params as f64
    }
}

/// The tokenizer facts a user asks about first.
struct TokenizerSummary {
    model: Option<String>,
    pre: Option<String>,
    vocab_size: Option<usize>,
    merges: Option<usize>,
    specials: Vec<(&'static str, u64)>,
    add_bos: Option<bool>,
    chat_template_len: Option<usize>,
}

fn tokenizer_summary(md: &Metadata) -> TokenizerSummary {
    let s = |k: &str| md.get_str(k).ok().flatten().map(str::to_string);
    let len = |k: &str| md.get_array(k).ok().flatten().map(|a| a.items.len());
    let specials = [
        ("bos", "tokenizer.ggml.bos_token_id"),
        ("eos", "tokenizer.ggml.eos_token_id"),
        ("eot", "tokenizer.ggml.eot_token_id"),
        ("unk", "tokenizer.ggml.unknown_token_id"),
        ("pad", "tokenizer.ggml.padding_token_id"),
        ("sep", "tokenizer.ggml.seperator_token_id"),
    ]
    .into_iter()
    .filter_map(|(n, k)| md.get_u64(k).ok().flatten().map(|id| (n, id)))
    .collect();
    TokenizerSummary {
        model: s("tokenizer.ggml.model"),
        pre: s("tokenizer.ggml.pre"),
        vocab_size: len("tokenizer.ggml.tokens"),
        merges: len("tokenizer.ggml.merges"),
        specials,
        add_bos: md.get_bool("tokenizer.ggml.add_bos_token").ok().flatten(),
        chat_template_len: md
            .get_str("tokenizer.chat_template")
            .ok()
            .flatten()
            .map(str::len),
    }
}

fn token_text(md: &Metadata, id: u64) -> Option<&str> {
    let tokens = md.get_array("tokenizer.ggml.tokens").ok().flatten()?;
    tokens.items.get(usize::try_from(id).ok()?)?.as_str()
}

/// Keys of the `{arch}.` namespace, without the prefix.
fn hyperparameters<'a>(md: &'a Metadata, arch: &str) -> Vec<(&'a str, &'a Value)> {
    let prefix = format!("{arch}.");
    md.iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix.as_str()).map(|k| (k, v)))
        .collect()
}

fn to_json(f: &GgufFile) -> Json {
    let md = f.metadata();
    let arch = f.architecture().unwrap_or("");
    let metadata: Map<String, Json> = md
        .iter()
        .map(|(k, v)| (k.to_string(), value_json(v)))
        .collect();
    let hparams: Map<String, Json> = hyperparameters(md, arch)
        .into_iter()
        .map(|(k, v)| (k.to_string(), value_json(v)))
        .collect();
    let tensors: Vec<Json> = f
        .tensors()
        .iter()
        .map(|t| {
            json!({
                "name": t.info.name,
                "type": t.info.ggml_type.name(),
                "shape": t.info.shape,
                "bytes": t.info.n_bytes,
            })
        })
        .collect();
    let tok = tokenizer_summary(md);
    let t = totals(f);
    json!({
        "path": f.paths(),
        "version": f.version(),
        "architecture": f.architecture(),
        "hyperparameters": hparams,
        "tokenizer": {
            "model": tok.model,
            "pre": tok.pre,
            "vocab_size": tok.vocab_size,
            "merges": tok.merges,
            "special_ids": tok.specials.iter().map(|(n, id)| (n.to_string(), json!(id))).collect::<Map<_, _>>(),
            "add_bos": tok.add_bos,
            "has_chat_template": tok.chat_template_len.is_some(),
        },
        "metadata": metadata,
        "tensors": tensors,
        "totals": {
            "tensors": f.tensors().len(),
            "parameters": t.params,
            "bytes": t.bytes,
            "file_bytes": f.file_size(),
            "bits_per_weight": bits_per_weight(&t),
        },
    })
}

fn print_text(out: &mut impl Write, f: &GgufFile) -> std::io::Result<()> {
    let md = f.metadata();
    let arch = f.architecture().unwrap_or("(none)");
    let paths: Vec<String> = f.paths().iter().map(|p| p.display().to_string()).collect();
    writeln!(out, "file:          {}", paths.join(", "))?;
    writeln!(
        out,
        "format:        GGUF v{}, {} metadata keys, {}",
        f.version(),
        md.len(),
        fmt_bytes(f.file_size())
    )?;
    writeln!(out, "architecture:  {arch}")?;
    if let Ok(Some(name)) = md.get_str("general.name") {
        writeln!(out, "name:          {name}")?;
    }
    if let Ok(Some(ft)) = md.get_u64("general.file_type") {
        writeln!(out, "file type:     {ft}")?;
    }

    writeln!(out, "\nhyperparameters:")?;
    for (k, v) in hyperparameters(md, arch) {
        writeln!(out, "  {k:<36} {v}")?;
    }

    let tok = tokenizer_summary(md);
    writeln!(out, "\ntokenizer:")?;
    let opt = |o: Option<String>| o.unwrap_or_else(|| "-".into());
    writeln!(
        out,
        "  model                                {}",
        opt(tok.model)
    )?;
    writeln!(
        out,
        "  pre                                  {}",
        opt(tok.pre)
    )?;
    writeln!(
        out,
        "  vocab size                           {}",
        opt(tok.vocab_size.map(|n| n.to_string()))
    )?;
    writeln!(
        out,
        "  merges                               {}",
        opt(tok.merges.map(|n| n.to_string()))
    )?;
    for (name, id) in &tok.specials {
        let text = token_text(md, *id)
            .map(|t| format!(" {t:?}"))
            .unwrap_or_default();
        writeln!(out, "  {:<36} {id}{text}", format!("{name} id"))?;
    }
    if let Some(b) = tok.add_bos {
        writeln!(out, "  add bos                              {b}")?;
    }
    match tok.chat_template_len {
        Some(n) => writeln!(
            out,
            "  chat template                        yes ({n} bytes)"
        )?,
        None => writeln!(out, "  chat template                        no")?,
    }

    writeln!(out, "\ntensors (shape in ggml order, row length first):")?;
    let width = f
        .tensors()
        .iter()
        .map(|t| t.info.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "  {:>4}  {:<width$}  {:<7}  {:<20}  {:>12}",
        "#", "name", "type", "shape", "bytes"
    )?;
    for (i, t) in f.tensors().iter().enumerate() {
        let shape: Vec<String> = t.info.shape.iter().map(u64::to_string).collect();
        writeln!(
            out,
            "  {i:>4}  {:<width$}  {:<7}  {:<20}  {:>12}",
            t.info.name,
            t.info.ggml_type.name(),
            shape.join(" x "),
            t.info.n_bytes
        )?;
    }
    let t = totals(f);
    writeln!(
        out,
        "\ntotals: {} tensors, {} parameters, {} of weights, {:.2} bits per weight",
        f.tensors().len(),
        t.params,
        fmt_bytes(t.bytes),
        bits_per_weight(&t)
    )
}
