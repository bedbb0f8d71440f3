//! What front ends report about a loaded model's file, without reaching
//! past the engine into the file format or the store: the architecture,
//! parameter count, quantization, tensors and metadata a model listing
//! shows (Ollama's `/api/show`), and the digest the store recorded.
//!
//! Everything here borrows from the loaded model; nothing copies the
//! metadata (a vocabulary array has hundreds of thousands of entries).

use std::path::Path;

use minfer_gguf::{GgufFile, Value};

use crate::LoadedModel;

/// A read-only view of a loaded model's file.
#[derive(Clone, Copy)]
pub struct ModelFacts<'a> {
    file: &'a GgufFile,
    path: &'a Path,
}

impl std::fmt::Debug for ModelFacts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFacts")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One tensor of the file, as a listing shows it.
#[derive(Debug, Clone, Copy)]
pub struct TensorFact<'a> {
    /// The tensor's name.
    pub name: &'a str,
    /// Its element type's name (`F32`, `Q4_K`, …).
    pub type_name: &'static str,
    /// Its dimensions, in ggml order.
    pub shape: &'a [u64],
    /// Its elements.
    pub n_elements: u64,
    /// Its size in the file.
    pub n_bytes: u64,
}

/// One metadata value, typed for reporting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetaValue<'a> {
    /// Any integer that fits `i64`.
    Int(i64),
    /// An unsigned integer beyond `i64`.
    UInt(u64),
    /// A single-precision float.
    F32(f32),
    /// A double-precision float.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'a str),
    /// An array, possibly of arrays.
    Array(MetaArray<'a>),
}

/// A metadata array, read item by item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetaArray<'a>(Items<'a>);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Items<'a> {
    File(&'a [Value]),
    Given(&'a [MetaValue<'a>]),
}

impl<'a> MetaArray<'a> {
    /// An array of the given values (for callers building values of their
    /// own, such as tests).
    pub fn of(items: &'a [MetaValue<'a>]) -> MetaArray<'a> {
        MetaArray(Items::Given(items))
    }

    /// Items in the array.
    pub fn len(&self) -> usize {
        match self.0 {
            Items::File(v) => v.len(),
            Items::Given(v) => v.len(),
        }
    }

    /// Whether the array has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items, in file order.
    pub fn iter(&self) -> impl Iterator<Item = MetaValue<'a>> + 'a {
        let (file, given): (&'a [Value], &'a [MetaValue<'a>]) = match self.0 {
            Items::File(v) => (v, &[]),
            Items::Given(v) => (&[], v),
        };
        file.iter()
            .map(MetaValue::from)
            .chain(given.iter().copied())
    }
}

impl<'a> From<&'a Value> for MetaValue<'a> {
    fn from(v: &'a Value) -> MetaValue<'a> {
        match v {
            Value::F32(f) => MetaValue::F32(*f),
            Value::F64(f) => MetaValue::F64(*f),
            Value::Bool(b) => MetaValue::Bool(*b),
            Value::String(s) => MetaValue::Str(s),
            Value::Array(a) => MetaValue::Array(MetaArray(Items::File(&a.items))),
            // Every other variant is an integer: it fits `i64` or, when
            // unsigned and larger, `u64`.
            other => match other.as_i64() {
                Some(i) => MetaValue::Int(i),
                None => MetaValue::UInt(other.as_u64().unwrap_or_default()),
            },
        }
    }
}

impl<'a> ModelFacts<'a> {
    /// The facts of `model`'s file.
    pub fn of(model: &'a LoadedModel) -> ModelFacts<'a> {
        ModelFacts {
            file: model.file(),
            path: model.path(),
        }
    }

    /// The file the model was read from.
    pub fn path(&self) -> &'a Path {
        self.path
    }

    /// The architecture (`general.architecture`), empty when unknown.
    pub fn architecture(&self) -> &'a str {
        self.file.architecture().unwrap_or("")
    }

    /// Weights in all.
    pub fn parameter_count(&self) -> u64 {
        self.tensors().map(|t| t.n_elements).sum()
    }

    /// The file's size in bytes (all its parts).
    pub fn file_size(&self) -> u64 {
        self.file.file_size()
    }

    /// `general.file_type`, llama.cpp's number for the quantization.
    pub fn file_type(&self) -> Option<u64> {
        self.file
            .metadata()
            .get_u64("general.file_type")
            .ok()
            .flatten()
    }

    /// A string metadata value.
    pub fn string(&self, key: &str) -> Option<&'a str> {
        self.file.metadata().get_str(key).ok().flatten()
    }

    /// The tensors, in file order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorFact<'a>> + 'a {
        self.file.tensors().iter().map(|t| TensorFact {
            name: &t.info.name,
            type_name: t.info.ggml_type.name(),
            shape: &t.info.shape,
            n_elements: t.info.n_elements(),
            n_bytes: t.info.n_bytes,
        })
    }

    /// Every metadata key with its value, in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&'a str, MetaValue<'a>)> + 'a {
        self.file
            .metadata()
            .iter()
            .map(|(k, v)| (k, MetaValue::from(v)))
    }

    /// The sha256 the store recorded for the file, when it recorded one
    /// for the file as it is now (never hashes the file).
    pub fn recorded_sha256(&self) -> Option<String> {
        recorded_sha256(self.path)
    }
}

/// The sha256 the store recorded for the file at `path` (see
/// [`ModelFacts::recorded_sha256`]).
pub fn recorded_sha256(path: &Path) -> Option<String> {
    minfer_store::recorded_sha256(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_type() {
        assert_eq!(MetaValue::from(&Value::U32(7)), MetaValue::Int(7));
        assert_eq!(MetaValue::from(&Value::I8(-1)), MetaValue::Int(-1));
        assert_eq!(
            MetaValue::from(&Value::U64(u64::MAX)),
            MetaValue::UInt(u64::MAX)
        );
        assert_eq!(MetaValue::from(&Value::F32(0.5)), MetaValue::F32(0.5));
        let s = Value::String("x".into());
        assert_eq!(MetaValue::from(&s), MetaValue::Str("x"));
        let a = Value::Array(minfer_gguf::Array {
            elem_type: minfer_gguf::ValueType::U8,
            items: (0..3).map(Value::U8).collect(),
        });
        let MetaValue::Array(items) = MetaValue::from(&a) else {
            panic!("not an array");
        };
        assert_eq!(items.len(), 3);
        let got: Vec<MetaValue> = items.iter().collect();
        assert_eq!(got, [0, 1, 2].map(MetaValue::Int));
        let given = [MetaValue::Bool(true)];
        assert_eq!(MetaArray::of(&given).iter().collect::<Vec<_>>(), given);
    }
}
