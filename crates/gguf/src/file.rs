//! A GGUF model opened from disk: one file or a set of split files, each
//! memory-mapped, with zero-copy views of every tensor's bytes.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{GgufError, Result};
use crate::parse::{parse_header, Header, Metadata, TensorInfo};

/// Metadata keys that tie the parts of a split model together.
pub const KEY_SPLIT_NO: &str = "split.no";
/// Number of parts of a split model.
pub const KEY_SPLIT_COUNT: &str = "split.count";
/// Total tensor count over all parts of a split model.
pub const KEY_SPLIT_TENSORS: &str = "split.tensors.count";

/// The bytes of one file: memory-mapped, or owned (for in-memory models).
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

struct Part {
    path: PathBuf,
    bytes: Bytes,
    data_offset: u64,
}

/// A tensor of an opened model: its description plus the part it lives in.
#[derive(Clone, Debug)]
pub struct Tensor {
    /// Name, type, shape, offset and size.
    pub info: TensorInfo,
    /// Index of the split part holding the data (0 for single files).
    pub part: usize,
}

/// An opened, validated GGUF model.
///
/// Metadata comes from the first part; tensors from all parts, in order.
pub struct GgufFile {
    parts: Vec<Part>,
    version: u32,
    alignment: u64,
    metadata: Metadata,
    tensors: Vec<Tensor>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("paths", &self.paths())
            .field("version", &self.version)
            .field("n_metadata", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

/// Recognizes llama.cpp's split naming, `PREFIX-00001-of-00003.gguf`, and
/// returns the prefix and the part count.
pub fn split_name(path: &Path) -> Option<(String, u32)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    // "-NNNNN-of-NNNNN" is 15 bytes.
    if stem.len() < 16 || !stem.is_char_boundary(stem.len() - 15) {
        return None;
    }
    let (prefix, tail) = stem.split_at(stem.len() - 15);
    let tail = tail.as_bytes();
    let digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    if tail[0] != b'-' || &tail[6..10] != b"-of-" || !digits(&tail[1..6]) || !digits(&tail[10..]) {
        return None;
    }
    let count: u32 = std::str::from_utf8(&tail[10..]).ok()?.parse().ok()?;
    Some((prefix.to_string(), count))
}

/// The path of part `index` (0-based) of a split model.
pub fn split_path(dir: &Path, prefix: &str, index: u32, count: u32) -> PathBuf {
    dir.join(format!("{prefix}-{:05}-of-{count:05}.gguf", index + 1))
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GgufError + '_ {
    move |source| GgufError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn map_file(path: &Path) -> Result<Bytes> {
    let file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Err(GgufError::Truncated {
            what: "magic",
            offset: 0,
            needed: 4,
            len: 0,
        });
    }
    // SAFETY: the map is read-only. As with every mmap-based loader, a file
    // truncated or rewritten by another process while mapped is outside
    // what we can defend against.
    let map = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
    Ok(Bytes::Mapped(map))
}

impl GgufFile {
    /// Opens a model. A path named `PREFIX-0000K-of-0000N.gguf` opens all N
    /// parts of that split model, whichever part was named.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        match split_name(path) {
            Some((prefix, count)) if count > 1 => {
                let dir = path.parent().unwrap_or(Path::new(""));
                let mut parts = Vec::with_capacity(count.min(1024) as usize);
                for i in 0..count {
                    let p = split_path(dir, &prefix, i, count);
                    if !p.exists() {
                        return Err(GgufError::Split(format!(
                            "part {} of {count} is missing: {}",
                            i + 1,
                            p.display()
                        )));
                    }
                    let bytes = map_file(&p)?;
                    parts.push((p, bytes));
                }
                Self::from_parts(parts)
            }
            _ => {
                let bytes = map_file(path)?;
                Self::from_parts(vec![(path.to_path_buf(), bytes)])
            }
        }
    }

    /// Parses a complete GGUF image held in memory (tests, tools).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::from_parts(vec![(PathBuf::from("<memory>"), Bytes::Owned(bytes))])
    }

    fn from_parts(raw: Vec<(PathBuf, Bytes)>) -> Result<Self> {
        let n_parts = raw.len();
        let mut parts = Vec::with_capacity(n_parts);
        let mut headers: Vec<Header> = Vec::with_capacity(n_parts);
        for (path, bytes) in raw {
            let header = parse_header(bytes.as_slice()).map_err(|e| match e {
                GgufError::Io { .. } => e,
                e if n_parts > 1 => GgufError::Split(format!("{}: {e}", path.display())),
                e => e,
            })?;
            parts.push(Part {
                path,
                bytes,
                data_offset: header.data_offset,
            });
            headers.push(header);
        }
        if n_parts > 1 {
            check_split_keys(&headers, &parts)?;
        }

        let mut tensors = Vec::new();
        let mut by_name = HashMap::new();
        let first = &headers[0];
        let (version, alignment) = (first.version, first.alignment);
        for (part, header) in headers.iter_mut().enumerate() {
            for info in std::mem::take(&mut header.tensors) {
                if by_name.contains_key(&info.name) {
                    return Err(GgufError::DuplicateTensor(info.name));
                }
                by_name.insert(info.name.clone(), tensors.len());
                tensors.push(Tensor { info, part });
            }
        }
        let metadata = std::mem::take(&mut headers[0].metadata);
        Ok(GgufFile {
            parts,
            version,
            alignment,
            metadata,
            tensors,
            by_name,
        })
    }

    /// Format version of the (first) file.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment of the (first) file.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The model's metadata (from the first part of a split model).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `general.architecture`, if present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.metadata.get_str("general.architecture").ok().flatten()
    }

    /// All tensors, in file order.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Looks a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of a tensor of this file, without copying.
    pub fn tensor_data(&self, t: &Tensor) -> &[u8] {
        let part = &self.parts[t.part];
        // Extents were validated against the part's length when parsed.
        let start = (part.data_offset + t.info.offset) as usize;
        &part.bytes.as_slice()[start..start + t.info.n_bytes as usize]
    }

    /// Tells the kernel this process no longer needs the pages of `t`'s
    /// data (after the data was copied elsewhere, e.g. repacked): they
    /// leave the resident set, stay in the page cache, and are read back
    /// transparently if touched again. Best effort: a failure is ignored.
    pub fn release_tensor_pages(&self, t: &Tensor) {
        let part = &self.parts[t.part];
        if let Bytes::Mapped(map) = &part.bytes {
            let start = (part.data_offset + t.info.offset) as usize;
            let len = t.info.n_bytes as usize;
            // Only whole pages inside the tensor: its neighbours stay.
            let page = 4096;
            let base = map.as_ptr() as usize;
            let first = (base + start).next_multiple_of(page) - base;
            let end = (base + start + len) / page * page - base;
            if end > first {
                // SAFETY: the mapping is read-only and private, so none of
                // its pages is dirty: MADV_DONTNEED only drops clean copies
                // of file pages, and a later read faults the same bytes
                // back in from the file. No reference sees different data.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        first,
                        end - first,
                    )
                };
            }
        }
    }

    /// The bytes of the tensor called `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_string()))?;
        Ok(self.tensor_data(t))
    }

    /// Paths of the parts, in order.
    pub fn paths(&self) -> Vec<&Path> {
        self.parts.iter().map(|p| p.path.as_path()).collect()
    }

    /// Total size of all parts in bytes.
    pub fn file_size(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| p.bytes.as_slice().len() as u64)
            .sum()
    }
}

fn check_split_keys(headers: &[Header], parts: &[Part]) -> Result<()> {
    let n = headers.len() as u64;
    let mut total = 0u64;
    for (i, (h, p)) in headers.iter().zip(parts).enumerate() {
        let ctx = |msg: String| GgufError::Split(format!("{}: {msg}", p.path.display()));
        let no = h.metadata.get_u64(KEY_SPLIT_NO)?;
        let count = h.metadata.get_u64(KEY_SPLIT_COUNT)?;
        if no != Some(i as u64) {
            return Err(ctx(format!("{KEY_SPLIT_NO} is {no:?}, expected {i}")));
        }
        if count != Some(n) {
            return Err(ctx(format!("{KEY_SPLIT_COUNT} is {count:?}, expected {n}")));
        }
        total += h.tensors.len() as u64;
    }
    if let Some(expected) = headers[0].metadata.get_u64(KEY_SPLIT_TENSORS)? {
        if expected != total {
            return Err(GgufError::Split(format!(
                "{KEY_SPLIT_TENSORS} is {expected} but the parts hold {total} tensors"
            )));
        }
    }
    Ok(())
}
