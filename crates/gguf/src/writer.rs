//! A GGUF v3 writer. Tests use it to build small models; tools use it to
//! write converted or split files.

use std::io::Write;
use std::path::Path;

use crate::error::{GgufError, Result};
use crate::parse::{tensor_bytes, DEFAULT_ALIGNMENT};
use crate::types::GgmlType;
use crate::value::{Value, ValueType};

struct PendingTensor {
    name: String,
    ggml_type: GgmlType,
    shape: Vec<u64>,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then writes a valid GGUF v3 file.
pub struct GgufWriter {
    alignment: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// A writer with the default 32-byte alignment.
    pub fn new() -> Self {
        GgufWriter {
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Uses a different data alignment (a power of two); it is recorded as
    /// `general.alignment`.
    pub fn with_alignment(mut self, alignment: u64) -> Result<Self> {
        if alignment == 0 || !alignment.is_power_of_two() || alignment > u32::MAX as u64 {
            return Err(GgufError::BadAlignment(alignment));
        }
        self.alignment = alignment;
        self.metadata.retain(|(k, _)| k != "general.alignment");
        if alignment != DEFAULT_ALIGNMENT {
            self.metadata
                .push(("general.alignment".into(), Value::U32(alignment as u32)));
        }
        Ok(self)
    }

    /// Adds (or replaces) a metadata entry.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        let key = key.into();
        let value = value.into();
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Adds a tensor. `shape` is in ggml order (row length first) and `data`
    /// must hold exactly the bytes that type and shape call for.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ggml_type: GgmlType,
        shape: &[u64],
        data: Vec<u8>,
    ) -> Result<&mut Self> {
        let name = name.into();
        if shape.len() > crate::parse::MAX_DIMS as usize {
            return Err(GgufError::TooManyDims {
                name,
                n_dims: shape.len() as u32,
            });
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(GgufError::DuplicateTensor(name));
        }
        let n_bytes = tensor_bytes(&name, ggml_type, shape)?;
        if n_bytes != data.len() as u64 {
            return Err(GgufError::Write(format!(
                "tensor '{name}' of type {ggml_type} and shape {shape:?} needs {n_bytes} bytes, got {}",
                data.len()
            )));
        }
        self.tensors.push(PendingTensor {
            name,
            ggml_type,
            shape: shape.to_vec(),
            data,
        });
        Ok(self)
    }

    /// Serializes the file into `w`.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let mut out = CountingWriter { inner: w, pos: 0 };
        out.put(b"GGUF")?;
        out.put(&3u32.to_le_bytes())?;
        out.put(&(self.tensors.len() as u64).to_le_bytes())?;
        out.put(&(self.metadata.len() as u64).to_le_bytes())?;
        for (key, value) in &self.metadata {
            put_str(&mut out, key)?;
            out.put(&(value.value_type() as u32).to_le_bytes())?;
            put_value(&mut out, value)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name)?;
            out.put(&(t.shape.len() as u32).to_le_bytes())?;
            for d in &t.shape {
                out.put(&d.to_le_bytes())?;
            }
            out.put(&t.ggml_type.id().to_le_bytes())?;
            out.put(&offset.to_le_bytes())?;
            offset = (offset + t.data.len() as u64).next_multiple_of(self.alignment);
        }
        out.pad_to(self.alignment)?;
        for t in &self.tensors {
            out.put(&t.data)?;
            out.pad_to(self.alignment)?;
        }
        Ok(())
    }

    /// The serialized file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_to(&mut v).expect("writing to a Vec cannot fail");
        v
    }

    /// Writes the file atomically: into a temporary file beside `path`,
    /// flushed, then renamed, so a failure never leaves a partial file
    /// under the final name.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = std::path::PathBuf::from(tmp);
        let result = (|| {
            let file = std::fs::File::create(&tmp)?;
            let mut buf = std::io::BufWriter::new(file);
            self.write_to(&mut buf)?;
            buf.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

struct CountingWriter<'a, W: Write> {
    inner: &'a mut W,
    pos: u64,
}

impl<W: Write> CountingWriter<'_, W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, alignment: u64) -> std::io::Result<()> {
        let pad = self.pos.next_multiple_of(alignment) - self.pos;
        self.put(&vec![0u8; pad as usize])
    }
}

fn put_str<W: Write>(out: &mut CountingWriter<'_, W>, s: &str) -> std::io::Result<()> {
    out.put(&(s.len() as u64).to_le_bytes())?;
    out.put(s.as_bytes())
}

fn put_value<W: Write>(out: &mut CountingWriter<'_, W>, v: &Value) -> std::io::Result<()> {
    match v {
        Value::U8(x) => out.put(&x.to_le_bytes()),
        Value::I8(x) => out.put(&x.to_le_bytes()),
        Value::U16(x) => out.put(&x.to_le_bytes()),
        Value::I16(x) => out.put(&x.to_le_bytes()),
        Value::U32(x) => out.put(&x.to_le_bytes()),
        Value::I32(x) => out.put(&x.to_le_bytes()),
        Value::F32(x) => out.put(&x.to_le_bytes()),
        Value::Bool(x) => out.put(&[*x as u8]),
        Value::String(s) => put_str(out, s),
        Value::U64(x) => out.put(&x.to_le_bytes()),
        Value::I64(x) => out.put(&x.to_le_bytes()),
        Value::F64(x) => out.put(&x.to_le_bytes()),
        Value::Array(a) => {
            out.put(&(a.elem_type as u32).to_le_bytes())?;
            out.put(&(a.items.len() as u64).to_le_bytes())?;
            for item in &a.items {
                debug_assert_eq!(item.value_type(), a.elem_type);
                put_value(out, item)?;
            }
            Ok(())
        }
    }
}

/// Builds an array value from items of one type.
pub fn array_of<T: Into<Value>>(elem_type: ValueType, items: impl IntoIterator<Item = T>) -> Value {
    Value::Array(crate::value::Array {
        elem_type,
        items: items.into_iter().map(Into::into).collect(),
    })
}
