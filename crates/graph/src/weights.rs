//! Model tensors, registered once and referenced by typed handles, so a
//! graph never looks a weight up by name while it runs.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use minfer_gguf::{GgmlType, GgufFile};

use minfer_kernels::packed;
use minfer_kernels::pool::{SharedMut, ThreadPool};
use minfer_kernels::Kernels;

use crate::error::{GraphError, Result};
use crate::types::WeightId;

/// Type and 2-D shape of a registered tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightInfo {
    /// The tensor's name in the model (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its element or block type.
    pub ty: GgmlType,
    /// `[ne0, rows]`; higher ggml dimensions are folded into the rows.
    pub shape: [usize; 2],
}

enum Backing {
    Gguf(usize),
    Owned(Vec<u8>),
    /// A range of whole rows of another tensor (see
    /// [`WeightStore::split_rows`]).
    Rows {
        parent: usize,
        bytes: std::ops::Range<usize>,
    },
}

/// Every tensor a model's graphs can reference.
#[derive(Default)]
pub struct WeightStore {
    file: Option<Arc<GgufFile>>,
    infos: Vec<WeightInfo>,
    backing: Vec<Backing>,
    by_name: HashMap<String, WeightId>,
    /// Per tensor, its interleaved copy once made (see [`WeightStore::pack`]).
    packed: Vec<OnceLock<Vec<u8>>>,
    /// Tensors only read by rows (see [`WeightStore::keep_rows`]), which
    /// keep ggml's layout.
    keep_rows: Vec<bool>,
    /// Per tensor, how many matrices it stacks (the experts of a routed
    /// FFN; 1 for a plain matrix). Each is read on its own, so a repacked
    /// copy must keep their row ranges apart.
    stacked: Vec<usize>,
    /// Tensors split into row ranges, which only their parts are read
    /// through: never repacked or counted themselves.
    split: Vec<bool>,
}

fn fold_shape(name: &str, shape: &[u64]) -> Result<[usize; 2]> {
    let bad = || GraphError::BadWeightShape {
        name: name.to_string(),
        shape: shape.to_vec(),
    };
    let ne0 = usize::try_from(shape.first().copied().unwrap_or(1)).map_err(|_| bad())?;
    let rows = shape
        .iter()
        .skip(1)
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
        .ok_or_else(bad)?;
    Ok([ne0, rows])
}

impl WeightStore {
    /// An empty store (tests add owned tensors).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers every tensor of a model file, without copying its data.
    pub fn from_gguf(file: Arc<GgufFile>) -> Result<Self> {
        let mut store = WeightStore::default();
        for (i, t) in file.tensors().iter().enumerate() {
            let shape = fold_shape(&t.info.name, &t.info.shape)?;
            store.register(
                t.info.name.clone(),
                t.info.ggml_type,
                shape,
                Backing::Gguf(i),
            );
        }
        store.file = Some(file);
        Ok(store)
    }

    fn register(&mut self, name: String, ty: GgmlType, shape: [usize; 2], b: Backing) -> WeightId {
        let id = WeightId(self.infos.len() as u32);
        self.by_name.insert(name.clone(), id);
        self.infos.push(WeightInfo { name, ty, shape });
        self.backing.push(b);
        self.packed.push(OnceLock::new());
        self.keep_rows.push(false);
        self.stacked.push(1);
        self.split.push(false);
        id
    }

    /// Splits a fused tensor (Phi's `attn_qkv`, or `ffn_up` holding gate
    /// and up) into consecutive row ranges that graphs use as tensors of
    /// their own: part `k` takes the next `rows` rows, is shown as
    /// `"{name}[{label}]"` and is found under `alias` (the name the
    /// unfused tensor has in other files, so shared resolvers read it).
    /// No bytes are copied; each part is repacked on its own, and the
    /// fused tensor is no longer read, repacked or counted.
    ///
    /// # Errors
    /// [`GraphError::BadWeightShape`] when the rows of the parts do not add
    /// up to the tensor's, or it stacks several matrices.
    pub fn split_rows(
        &mut self,
        id: WeightId,
        parts: &[(&str, &str, usize)],
    ) -> Result<Vec<WeightId>> {
        let i = id.0 as usize;
        let info = self.infos[i].clone();
        let total: Option<usize> = parts.iter().try_fold(0usize, |a, p| a.checked_add(p.2));
        let row = minfer_kernels::matmul::row_bytes(info.ty, info.shape[0]);
        let (Some(row), true, 1) = (row, total == Some(info.shape[1]), self.stacked[i]) else {
            return Err(GraphError::BadWeightShape {
                name: format!(
                    "{} split into rows {:?}",
                    info.name,
                    parts.iter().map(|p| p.2).collect::<Vec<_>>()
                ),
                shape: vec![info.shape[0] as u64, info.shape[1] as u64],
            });
        };
        let mut start = 0;
        let mut ids = Vec::with_capacity(parts.len());
        for &(alias, label, rows) in parts {
            let bytes = start * row..(start + rows) * row;
            start += rows;
            let name = format!("{}[{label}]", info.name);
            let part = self.register(
                name,
                info.ty,
                [info.shape[0], rows],
                Backing::Rows { parent: i, bytes },
            );
            self.by_name.insert(alias.to_string(), part);
            ids.push(part);
        }
        self.split[i] = true;
        Ok(ids)
    }

    /// Whether the tensor was split into parts (see
    /// [`WeightStore::split_rows`]): graphs read the parts instead.
    pub fn is_split(&self, id: WeightId) -> bool {
        self.split[id.0 as usize]
    }

    /// Marks a tensor that only row lookups read (an embedding table that
    /// is not also the LM head): repacking it would buy nothing.
    pub fn keep_rows(&mut self, id: WeightId) {
        self.keep_rows[id.0 as usize] = true;
    }

    /// Marks a tensor whose rows stack `n` matrices of equal height (the
    /// experts of a routed FFN), which products read one at a time. It is
    /// repacked only when each matrix's rows fill whole interleaved groups,
    /// so that every matrix is a contiguous byte range in either layout.
    pub fn set_stacked(&mut self, id: WeightId, n: usize) {
        self.stacked[id.0 as usize] = n.max(1);
    }

    /// The matrices the tensor stacks (see [`WeightStore::set_stacked`]).
    pub fn stacked(&self, id: WeightId) -> usize {
        self.stacked[id.0 as usize]
    }

    /// Repacks every matrix that the kernels read faster interleaved (see
    /// [`minfer_kernels::packed`]) and that nothing reads by rows, splitting
    /// the work over `pool`; the original pages of a memory-mapped file are
    /// then released. Tensors already packed are skipped, so a second call
    /// (another runtime on the same model) costs nothing. Returns the bytes
    /// packed by this call.
    pub fn pack(&self, kernels: &Kernels, pool: &ThreadPool) -> usize {
        let mut total = 0;
        for (i, info) in self.infos.iter().enumerate() {
            let [cols, rows] = info.shape;
            let per_matrix = rows / self.stacked[i];
            if self.keep_rows[i]
                || self.split[i]
                || !kernels.packs(info.ty)
                || !packed::packable(info.ty, rows, cols)
                || !packed::packable(info.ty, per_matrix, cols)
                || self.packed[i].get().is_some()
            {
                continue;
            }
            let src = self.data(WeightId(i as u32));
            let len = packed::Format::of(info.ty).map_or(0, |f| f.packed_len(rows, cols));
            let mut dst = vec![0u8; len];
            let per_group = dst.len() / (rows / packed::GROUP);
            let out = SharedMut::new(dst.as_mut_ptr());
            pool.for_range(rows / packed::GROUP, 1, |groups| {
                // SAFETY: each thread gets a disjoint range of groups, so
                // the slices it builds do not overlap, and they lie inside
                // `dst`, which outlives the job.
                let part = unsafe {
                    std::slice::from_raw_parts_mut(
                        out.get().add(groups.start * per_group),
                        groups.len() * per_group,
                    )
                };
                // Shapes were checked by `packable` and the store.
                let _ = packed::pack_groups(info.ty, rows, cols, src, groups, part);
            });
            total += dst.len();
            if self.packed[i].set(dst).is_ok() {
                self.release_pages(i);
            }
        }
        total
    }

    /// Lets the OS drop the file pages of tensor `i` once it has a packed
    /// copy; a split tensor's, once every part has one.
    fn release_pages(&self, i: usize) {
        let t = match &self.backing[i] {
            Backing::Gguf(t) => *t,
            Backing::Rows { parent, .. } => {
                let Backing::Gguf(t) = self.backing[*parent] else {
                    return;
                };
                let all_packed = self.backing.iter().enumerate().all(|(j, b)| {
                    !matches!(b, Backing::Rows { parent: p, .. } if p == parent)
                        || self.packed[j].get().is_some()
                });
                if !all_packed {
                    return;
                }
                t
            }
            Backing::Owned(_) => return,
        };
        if let Some(file) = &self.file {
            file.release_tensor_pages(&file.tensors()[t]);
        }
    }

    /// The interleaved copy of a tensor, when [`WeightStore::pack`] made one.
    pub fn packed(&self, id: WeightId) -> Option<&[u8]> {
        self.packed[id.0 as usize].get().map(Vec::as_slice)
    }

    /// Adds a tensor held in memory; its size must match type and shape.
    pub fn add_owned(
        &mut self,
        name: impl Into<String>,
        ty: GgmlType,
        shape: [usize; 2],
        data: Vec<u8>,
    ) -> Result<WeightId> {
        let name = name.into();
        let expected =
            minfer_kernels::matmul::row_bytes(ty, shape[0]).and_then(|r| r.checked_mul(shape[1]));
        if expected != Some(data.len()) {
            return Err(GraphError::BadWeightShape {
                name,
                shape: vec![shape[0] as u64, shape[1] as u64],
            });
        }
        Ok(self.register(name, ty, shape, Backing::Owned(data)))
    }

    /// The handle of a tensor; an error names a missing one.
    pub fn id(&self, name: &str) -> Result<WeightId> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| GraphError::MissingWeight(name.to_string()))
    }

    /// The handle of a tensor if the model has it (optional tensors such
    /// as biases or a separate output matrix).
    pub fn get(&self, name: &str) -> Option<WeightId> {
        self.by_name.get(name).copied()
    }

    /// Type and shape of a tensor.
    pub fn info(&self, id: WeightId) -> &WeightInfo {
        &self.infos[id.0 as usize]
    }

    /// The bytes of a tensor.
    pub fn data(&self, id: WeightId) -> &[u8] {
        match &self.backing[id.0 as usize] {
            Backing::Owned(v) => v,
            Backing::Rows { parent, bytes } => &self.data(WeightId(*parent as u32))[bytes.clone()],
            Backing::Gguf(i) => {
                let file = self
                    .file
                    .as_ref()
                    .expect("GGUF-backed weights keep their file");
                file.tensor_data(&file.tensors()[*i])
            }
        }
    }

    /// The types of the tensors, each once, in the order first met.
    pub fn types(&self) -> Vec<GgmlType> {
        let mut out: Vec<GgmlType> = Vec::new();
        for info in &self.infos {
            if !out.contains(&info.ty) {
                out.push(info.ty);
            }
        }
        out
    }

    /// Number of registered tensors.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether no tensor is registered.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
}
