//! What Ollama's model endpoints report about the one served model
//! (`/api/tags`, `/api/show`, `/api/ps`), read from its GGUF file: the
//! architecture, the parameter count, the quantization, the file's size,
//! date and digest.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use minfer_engine::{MetaValue, ModelFacts};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::time::rfc3339;
use crate::models::Served;
use crate::models::{Entry, Listed, Model};
use crate::openai::completion::fim_markers;

/// Arrays longer than this are reported empty unless `verbose`, as Ollama
/// does (a vocabulary has hundreds of thousands of entries).
const SHORT_ARRAY: usize = 5;

/// llama.cpp's `general.file_type` values by name, in Ollama's spelling.
const FILE_TYPES: &[(u64, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (7, "Q8_0"),
    (8, "Q5_0"),
    (9, "Q5_1"),
    (10, "Q2_K"),
    (11, "Q3_K_S"),
    (12, "Q3_K_M"),
    (13, "Q3_K_L"),
    (14, "Q4_K_S"),
    (15, "Q4_K_M"),
    (16, "Q5_K_S"),
    (17, "Q5_K_M"),
    (18, "Q6_K"),
    (19, "IQ2_XXS"),
    (20, "IQ2_XS"),
    (21, "Q2_K_S"),
    (22, "IQ3_XS"),
    (23, "IQ3_XXS"),
    (24, "IQ1_S"),
    (25, "IQ4_NL"),
    (26, "IQ3_S"),
    (27, "IQ3_M"),
    (28, "IQ2_S"),
    (29, "IQ2_M"),
    (30, "IQ4_XS"),
    (31, "IQ1_M"),
    (32, "BF16"),
    (36, "TQ1_0"),
    (37, "TQ2_0"),
    (38, "MXFP4_MOE"),
];

/// The name Ollama clients see for the model: the id with Ollama's default
/// tag, unless the id has a tag of its own.
pub fn listed_name(served: &Served) -> String {
    tagged(&served.id)
}

fn tagged(id: &str) -> String {
    if id.contains(':') {
        id.to_string()
    } else {
        format!("{id}:latest")
    }
}

/// A count as Ollama prints parameter sizes: `135M`, `494.03M`, `7.6B`.
fn human_number(n: u64) -> String {
    let (value, unit, decimals) = match n {
        n if n >= 1_000_000_000 => (n as f64 / 1e9, "B", 1),
        n if n >= 1_000_000 => (n as f64 / 1e6, "M", 2),
        n if n >= 1_000 => return format!("{:.0}K", n as f64 / 1e3),
        n => return n.to_string(),
    };
    if value.fract() == 0.0 {
        format!("{value:.0}{unit}")
    } else {
        format!("{value:.decimals$}{unit}")
    }
}

/// The quantization: the file's `general.file_type`, else the type most of
/// its weights have.
fn quantization(facts: &ModelFacts) -> String {
    if let Some(ft) = facts.file_type() {
        if let Some((_, name)) = FILE_TYPES.iter().find(|(v, _)| *v == ft) {
            return (*name).to_string();
        }
    }
    let mut bytes: Vec<(&'static str, u64)> = Vec::new();
    for t in facts.tensors() {
        match bytes.iter_mut().find(|(n, _)| *n == t.type_name) {
            Some((_, b)) => *b += t.n_bytes,
            None => bytes.push((t.type_name, t.n_bytes)),
        }
    }
    bytes
        .into_iter()
        .max_by_key(|&(_, b)| b)
        .map_or_else(|| "unknown".to_string(), |(n, _)| n.to_string())
}

/// `details`: format, family, parameter size, quantization.
pub fn details(served: &Served) -> Value {
    let facts = ModelFacts::of(&served.loaded);
    let arch = facts.architecture();
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": arch,
        "families": [arch],
        "parameter_size": human_number(facts.parameter_count()),
        "quantization_level": quantization(&facts),
    })
}

/// The model's digest: the sha256 the store recorded for the file, or,
/// where it recorded none, a stable stand-in (the sha256 of the path and
/// the size; hashing a model of gigabytes per listing would take seconds).
fn digest(path: &Path, size: u64) -> String {
    if let Some(d) = minfer_engine::model_facts::recorded_sha256(path) {
        return d;
    }
    let mut h = Sha256::new();
    h.update(path.as_os_str().as_encoded_bytes());
    h.update(size.to_le_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn modified_at(path: &Path) -> String {
    let t = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    rfc3339(t)
}

/// The fields `/api/tags` and `/api/ps` share.
fn entry(served: &Served) -> Value {
    let size = ModelFacts::of(&served.loaded).file_size();
    let name = listed_name(served);
    json!({
        "name": name,
        "model": name,
        "size": size,
        "digest": digest(served.loaded.path(), size),
        "details": details(served),
    })
}

/// The fields of a model that is not loaded: what its file tells without
/// reading it (the details need the model's metadata, read at load).
fn unloaded_entry(entry: &Entry) -> Option<Value> {
    let path = Path::new(&entry.spec);
    let size = std::fs::metadata(path).ok()?.len();
    let name = tagged(&entry.id);
    Some(json!({
        "name": name,
        "model": name,
        "size": size,
        "digest": digest(path, size),
        "details": {"parent_model": "", "format": "gguf", "family": "", "families": null,
                    "parameter_size": "", "quantization_level": ""},
        "modified_at": modified_at(path),
    }))
}

/// `GET /api/tags`: every model whose file is here.
pub fn tags(listed: &[Listed]) -> Value {
    let models: Vec<Value> = listed
        .iter()
        .filter_map(|l| match l.model.as_ref().and_then(|m| m.served().ok()) {
            Some(served) => {
                let mut e = entry(served);
                e["modified_at"] = json!(modified_at(served.loaded.path()));
                Some(e)
            }
            None => unloaded_entry(&l.entry),
        })
        .collect();
    json!({ "models": models })
}

/// `GET /api/ps`: the loaded models, each with the memory its weights and
/// cache take (host memory: `size_vram` 0) and when it unloads if it stays
/// idle (Ollama's "forever", the longest Go duration from now, for a
/// model kept loaded or busy now).
pub fn ps(live: &[Arc<Model>]) -> Value {
    let models: Vec<Value> = live
        .iter()
        .filter_map(|m| {
            let served = m.served().ok()?;
            let mut e = entry(served);
            let expires = match m.expires() {
                Some(at) => SystemTime::now() + at.saturating_duration_since(Instant::now()),
                None => SystemTime::now() + Duration::from_nanos(i64::MAX as u64),
            };
            e["size"] = json!(m.bytes.load(Relaxed));
            e["expires_at"] = json!(rfc3339(expires));
            e["size_vram"] = json!(0);
            e["context_length"] = json!(served.cfg.engine.n_ctx);
            Some(e)
        })
        .collect();
    json!({ "models": models })
}

/// A metadata value as JSON; floats as their shortest decimal form (a
/// `f32` 1e-5 reads 0.00001, not 9.99999974e-6).
fn to_json(v: &MetaValue, verbose: bool) -> Value {
    match v {
        MetaValue::F32(f) => f
            .to_string()
            .parse::<f64>()
            .map_or(Value::Null, |x| json!(x)),
        MetaValue::F64(f) => json!(f),
        MetaValue::Bool(b) => json!(b),
        MetaValue::Str(s) => json!(s),
        MetaValue::Array(a) if !verbose && a.len() > SHORT_ARRAY => json!([]),
        MetaValue::Array(a) => a.iter().map(|x| to_json(&x, verbose)).collect(),
        MetaValue::Int(i) => json!(i),
        MetaValue::UInt(u) => json!(u),
    }
}

/// `model_info`: every metadata key but the name and the chat template
/// (which `template` holds), with the parameter count.
fn model_info(served: &Served, verbose: bool) -> Value {
    let facts = ModelFacts::of(&served.loaded);
    let mut info = Map::new();
    for (k, v) in facts.metadata() {
        if k != "general.name" && k != "tokenizer.chat_template" {
            info.insert(k.to_string(), to_json(&v, verbose));
        }
    }
    info.entry("general.parameter_count")
        .or_insert_with(|| json!(facts.parameter_count()));
    Value::Object(info)
}

/// What the model can do, in Ollama's words.
fn capabilities(served: &Served) -> Vec<&'static str> {
    let mut caps = vec!["completion"];
    let ab = &served.abilities;
    if ab.tools && ab.tool_syntax.is_some() {
        caps.push("tools");
    }
    if fim_markers(served).is_some() {
        caps.push("insert");
    }
    if ab.thinking {
        caps.push("thinking");
    }
    caps
}

/// `parameters`, as Ollama prints a Modelfile's: the context and the
/// end-of-generation tokens, which act as stop strings.
fn parameters(served: &Served, n_ctx: u32) -> Vec<(String, String)> {
    let tok = served.loaded.tokenizer();
    let mut out = vec![("num_ctx".to_string(), n_ctx.to_string())];
    for &id in tok.eog_ids() {
        let text = String::from_utf8_lossy(tok.decode_token(id)).into_owned();
        out.push(("stop".into(), Value::String(text).to_string()));
    }
    out
}

/// `POST /api/show`.
pub fn show(served: &Served, verbose: bool, n_ctx: u32) -> Value {
    let params = parameters(served, n_ctx);
    let template = served
        .template
        .as_ref()
        .map(|t| t.source().to_string())
        .unwrap_or_default();
    let mut modelfile = format!(
        "# Modelfile generated by minfer serve\nFROM {}\n",
        served.loaded.path().display()
    );
    if !template.is_empty() {
        modelfile.push_str(&format!("TEMPLATE \"\"\"{template}\"\"\"\n"));
    }
    for (k, v) in &params {
        modelfile.push_str(&format!("PARAMETER {k} {v}\n"));
    }
    let parameters: Vec<String> = params.iter().map(|(k, v)| format!("{k:<30} {v}")).collect();
    let facts = ModelFacts::of(&served.loaded);
    let tensors: Vec<Value> = facts
        .tensors()
        .map(|t| json!({"name": t.name, "type": t.type_name, "shape": t.shape}))
        .collect();
    let mut v = json!({
        "modelfile": modelfile,
        "parameters": parameters.join("\n"),
        "template": template,
        "details": details(served),
        "model_info": model_info(served, verbose),
        "tensors": tensors,
        "capabilities": capabilities(served),
        "modified_at": modified_at(served.loaded.path()),
    });
    if let Some(license) = facts.string("general.license") {
        v["license"] = json!(license);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sizes_print_as_ollama_prints_them() {
        assert_eq!(human_number(134_515_008), "134.52M");
        assert_eq!(human_number(135_000_000), "135M");
        assert_eq!(human_number(7_615_616_512), "7.6B");
        assert_eq!(human_number(8_000_000_000), "8B");
        assert_eq!(human_number(12_345), "12K");
        assert_eq!(human_number(999), "999");
    }

    #[test]
    fn values_convert_to_json_with_long_arrays_hidden() {
        assert_eq!(to_json(&MetaValue::F32(1e-5), false), json!(0.00001));
        assert_eq!(to_json(&MetaValue::Int(7), false), json!(7));
        assert_eq!(to_json(&MetaValue::Int(-1), false), json!(-1));
        assert_eq!(to_json(&MetaValue::UInt(u64::MAX), false), json!(u64::MAX));
        let items = [0, 1, 2, 3, 4, 5].map(MetaValue::Int);
        let long = MetaValue::Array(minfer_engine::MetaArray::of(&items));
        assert_eq!(to_json(&long, false), json!([]));
        assert_eq!(to_json(&long, true), json!([0, 1, 2, 3, 4, 5]));
    }

    #[test]
    fn the_fallback_digest_is_stable_hex() {
        let dir = std::env::temp_dir().join("minfer-no-such-model.gguf");
        let a = digest(&dir, 42);
        assert_eq!(a, digest(&dir, 42));
        assert_ne!(a, digest(&dir, 43));
        assert!(a.len() == 64 && a.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
