//! Parsing of the GGUF header (magic, version, metadata, tensor infos) from
//! a byte slice, with every count, length and extent checked against the
//! bytes actually present before it is used.

use std::collections::{HashMap, HashSet};

use crate::error::{GgufError, Result};
use crate::types::GgmlType;
use crate::value::{Array, Value, ValueType};

/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's limit on tensor rank.
pub const MAX_DIMS: u32 = 4;
/// Deepest array nesting accepted. Real files use at most one level; the
/// limit keeps recursion bounded on hostile input.
pub const MAX_ARRAY_DEPTH: usize = 8;

const MAGIC: &[u8; 4] = b"GGUF";

/// Ordered metadata with lookup by key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Appends a key; a duplicate key is an error, as in llama.cpp.
    pub fn insert(&mut self, key: String, value: Value) -> Result<()> {
        if self.index.contains_key(&key) {
            return Err(GgufError::DuplicateKey(key));
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// A string value; `Err` when the key exists with another type.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "string", Value::as_str)
    }

    /// A non-negative integer value of any width.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "unsigned integer", Value::as_u64)
    }

    /// A float (or integer) value.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>> {
        self.typed(key, "number", Value::as_f64)
    }

    /// A boolean value.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "bool", Value::as_bool)
    }

    /// An array value.
    pub fn get_array(&self, key: &str) -> Result<Option<&Array>> {
        self.typed(key, "array", Value::as_array)
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        f: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => f(v).map(Some).ok_or_else(|| GgufError::WrongValueType {
                key: key.to_string(),
                expected,
                found: v.type_name(),
            }),
        }
    }

    /// All entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Description of one tensor: where its bytes are and how to read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, unique within the model.
    pub name: String,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Dimensions in ggml order: `shape[0]` is the contiguous (row) length.
    pub shape: Vec<u64>,
    /// Offset of the first byte, relative to the start of the data section.
    pub offset: u64,
    /// Number of bytes, derived from type and shape.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        // Validated at parse time not to overflow.
        self.shape.iter().product()
    }
}

/// A parsed and validated GGUF header.
#[derive(Clone, Debug)]
pub struct Header {
    /// Format version (2 or 3).
    pub version: u32,
    /// Key/value metadata.
    pub metadata: Metadata,
    /// Tensor descriptions, in file order.
    pub tensors: Vec<TensorInfo>,
    /// Alignment of the data section and of each tensor within it.
    pub alignment: u64,
    /// Absolute file offset where the data section begins.
    pub data_offset: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                len: self.buf.len() as u64,
            });
        }
        let start = self.pos;
        // n <= remaining, so it fits in usize.
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let b = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.u64(what)?;
        let offset = self.pos as u64;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 { offset })
    }

    /// Reads an element count and checks that `count` elements of at least
    /// `min_size` bytes each can fit in what is left of the buffer, so that
    /// no allocation is ever sized by a count the file cannot back.
    fn count(&mut self, what: &'static str, min_size: u64) -> Result<u64> {
        let count = self.u64(what)?;
        let offset = self.pos as u64;
        let remaining = self.remaining();
        match count.checked_mul(min_size) {
            Some(total) if total <= remaining => Ok(count),
            _ => Err(GgufError::CountTooLarge {
                what,
                count,
                offset,
                remaining,
            }),
        }
    }

    fn value(&mut self, ty: ValueType, key: &str, depth: usize) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>("u8 value")?[0]),
            ValueType::I8 => Value::I8(self.array::<1>("i8 value")?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array("u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array("i16 value")?)),
            ValueType::U32 => Value::U32(self.u32("u32 value")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array("i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array("f32 value")?)),
            ValueType::Bool => Value::Bool(self.array::<1>("bool value")?[0] != 0),
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::U64 => Value::U64(self.u64("u64 value")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array("i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array("f64 value")?)),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(GgufError::NestingTooDeep {
                        key: key.to_string(),
                        max: MAX_ARRAY_DEPTH,
                    });
                }
                let type_id = self.u32("array element type")?;
                let elem_type =
                    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
                        key: key.to_string(),
                        type_id,
                    })?;
                let n = self.count("array element", elem_type.min_encoded_size())?;
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(elem_type, key, depth + 1)?);
                }
                Value::Array(Array { elem_type, items })
            }
        })
    }
}

/// Parses and validates the header of a GGUF file whose complete contents
/// are `buf`. Tensor extents are checked against `buf.len()`.
pub fn parse_header(buf: &[u8]) -> Result<Header> {
    let mut c = Cursor { buf, pos: 0 };
    let magic = c.array::<4>("magic")?;
    if &magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32("version")?;
    match version {
        2 | 3 => {}
        v if matches!(v.swap_bytes(), 1..=3) => return Err(GgufError::BigEndian),
        v => return Err(GgufError::UnsupportedVersion(v)),
    }

    let n_tensors = c.u64("tensor count")?;
    // The smallest tensor info: name length, n_dims, type, offset.
    const MIN_TENSOR_INFO: u64 = 8 + 4 + 4 + 8;
    // The smallest key/value: key length, value type, one byte of value.
    const MIN_KV: u64 = 8 + 4 + 1;
    let n_kv = c.u64("metadata count")?;
    for (what, count, min) in [
        ("metadata entry", n_kv, MIN_KV),
        ("tensor info", n_tensors, MIN_TENSOR_INFO),
    ] {
        if count.checked_mul(min).is_none_or(|b| b > c.remaining()) {
            return Err(GgufError::CountTooLarge {
                what,
                count,
                offset: c.pos as u64,
                remaining: c.remaining(),
            });
        }
    }

    let metadata = read_metadata(&mut c, n_kv)?;
    let alignment = alignment_of(&metadata)?;

    let tensors = read_tensor_infos(&mut c, n_tensors, alignment)?;

    let header_end = c.pos as u64;
    let data_offset = header_end
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::BadAlignment(alignment))?;
    let data_len = (buf.len() as u64).saturating_sub(data_offset);
    check_extents(&tensors, data_len)?;

    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

/// The `n_kv` key/value pairs of the metadata section.
fn read_metadata(c: &mut Cursor<'_>, n_kv: u64) -> Result<Metadata> {
    let mut metadata = Metadata::default();
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let type_id = c.u32("metadata value type")?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.clone(),
            type_id,
        })?;
        let value = c.value(ty, &key, 0)?;
        metadata.insert(key, value)?;
    }
    Ok(metadata)
}

/// `general.alignment`, or the default when absent.
fn alignment_of(metadata: &Metadata) -> Result<u64> {
    Ok(match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => {
            let a = v.as_u64().ok_or_else(|| GgufError::WrongValueType {
                key: "general.alignment".into(),
                expected: "unsigned integer",
                found: v.type_name(),
            })?;
            if a == 0 || !a.is_power_of_two() {
                return Err(GgufError::BadAlignment(a));
            }
            a
        }
    })
}

/// The `n_tensors` tensor infos, each checked (rank, type, size,
/// alignment of its offset, a name of its own).
fn read_tensor_infos(
    c: &mut Cursor<'_>,
    n_tensors: u64,
    alignment: u64,
) -> Result<Vec<TensorInfo>> {
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = HashSet::with_capacity(n_tensors as usize);
    for _ in 0..n_tensors {
        let name = c.string("tensor name")?;
        let n_dims = c.u32("tensor rank")?;
        if n_dims > MAX_DIMS {
            return Err(GgufError::TooManyDims { name, n_dims });
        }
        let mut shape = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            shape.push(c.u64("tensor dimension")?);
        }
        let type_id = c.u32("tensor type")?;
        let offset = c.u64("tensor offset")?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
            name: name.clone(),
            type_id,
        })?;
        let n_bytes = tensor_bytes(&name, ggml_type, &shape)?;
        if offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                name,
                offset,
                alignment,
            });
        }
        if !names.insert(name.clone()) {
            return Err(GgufError::DuplicateTensor(name));
        }
        tensors.push(TensorInfo {
            name,
            ggml_type,
            shape,
            offset,
            n_bytes,
        });
    }
    Ok(tensors)
}

/// Checks that every tensor lies inside the `data_len` bytes of the data
/// section.
fn check_extents(tensors: &[TensorInfo], data_len: u64) -> Result<()> {
    for t in tensors {
        let end = t.offset.checked_add(t.n_bytes);
        if end.is_none_or(|e| e > data_len) {
            return Err(GgufError::TensorOutOfBounds {
                name: t.name.clone(),
                start: t.offset,
                end: end.unwrap_or(u64::MAX),
                data_len,
            });
        }
    }
    Ok(())
}

/// Byte size of a tensor, rejecting shapes ggml could not represent: an
/// element count that overflows `i64`, or rows that are not a whole number
/// of blocks.
pub(crate) fn tensor_bytes(name: &str, ty: GgmlType, shape: &[u64]) -> Result<u64> {
    let bad = |reason| GgufError::BadShape {
        name: name.to_string(),
        shape: shape.to_vec(),
        reason,
    };
    let mut n: u64 = 1;
    for &d in shape {
        n = n
            .checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| bad("element count overflows"))?;
    }
    let row = shape.first().copied().unwrap_or(1);
    if row % ty.block_size() != 0 {
        return Err(bad("row length is not a multiple of the type's block size"));
    }
    ty.bytes_for(n).ok_or_else(|| bad("byte size overflows"))
}
