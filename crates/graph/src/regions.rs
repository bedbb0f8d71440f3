//! The table of persistent KV regions a backend holds, one K and one V
//! slot per layer. Every backend keeps its regions the same way (created on
//! first need, sized once for the life of a cache, looked up by layer and
//! kind), so the lookup, the creation and the shape check live here and a
//! backend only says how one of its regions is made and what shape it has.

use crate::ir::KvKind;
use crate::params::KvFormat;
use crate::{GraphError, Result};

/// The shape of one KV region, fixed for the life of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvInfo {
    /// How values are stored.
    pub format: KvFormat,
    /// Values per cell.
    pub row_elems: usize,
    /// Cells.
    pub n_ctx: usize,
}

impl KvInfo {
    /// The shape of `n_ctx` cells of `row_elems` values in `format`.
    pub const fn new(format: KvFormat, row_elems: usize, n_ctx: usize) -> Self {
        Self {
            format,
            row_elems,
            n_ctx,
        }
    }

    /// Bytes of one cell's row in the raw format of
    /// [`crate::kv::KvRegion::read_raw_row`], which every backend speaks.
    pub fn raw_row_bytes(&self) -> usize {
        self.format.row_bytes(self.row_elems)
    }
}

/// A backend's region type: anything that can say its shape.
pub trait Region {
    /// The shape the region was made with.
    fn shape(&self) -> KvInfo;
}

impl Region for crate::kv::KvRegion {
    fn shape(&self) -> KvInfo {
        KvInfo::new(self.format(), self.row_elems(), self.n_ctx())
    }
}

/// Per layer, an optional K and an optional V region of type `R`.
pub struct RegionTable<R> {
    layers: Vec<[Option<R>; 2]>,
    /// Where the regions live, for errors ("" for the CPU, " on the GPU").
    where_: &'static str,
}

impl<R: Region> RegionTable<R> {
    /// An empty table; `where_` completes error messages ("" on the CPU,
    /// " on the GPU").
    pub fn new(where_: &'static str) -> Self {
        Self {
            layers: Vec::new(),
            where_,
        }
    }

    /// Layer `layer`'s `kind` region, if this table holds it.
    pub fn get(&self, layer: usize, kind: KvKind) -> Option<&R> {
        self.layers.get(layer)?[kind as usize].as_ref()
    }

    /// Layer `layer`'s `kind` region for writing, if this table holds it.
    pub fn get_mut(&mut self, layer: usize, kind: KvKind) -> Option<&mut R> {
        self.layers.get_mut(layer)?[kind as usize].as_mut()
    }

    /// As [`RegionTable::get`], with the error a graph that reads a missing
    /// region gets.
    ///
    /// # Errors
    /// [`GraphError::NoKvRegion`] when the region was never created.
    pub fn require(&self, layer: usize, kind: KvKind) -> Result<&R> {
        self.get(layer, kind).ok_or(self.missing(layer, kind))
    }

    /// As [`RegionTable::require`], for writing.
    ///
    /// # Errors
    /// [`GraphError::NoKvRegion`] when the region was never created.
    pub fn require_mut(&mut self, layer: usize, kind: KvKind) -> Result<&mut R> {
        let err = self.missing(layer, kind);
        self.get_mut(layer, kind).ok_or(err)
    }

    /// Layer `layer`'s K and V regions together, as attention reads them.
    ///
    /// # Errors
    /// [`GraphError::NoKvRegion`] naming the first one missing.
    pub fn pair(&self, layer: usize) -> Result<(&R, &R)> {
        Ok((
            self.require(layer, KvKind::K)?,
            self.require(layer, KvKind::V)?,
        ))
    }

    /// Makes sure layer `layer`'s `kind` region exists with shape `want`,
    /// creating it with `make` if not. Returns whether it was created.
    ///
    /// # Errors
    /// [`GraphError::KvMismatch`] when the region exists with another shape
    /// (regions are sized once per cache); `make`'s error.
    pub fn ensure(
        &mut self,
        layer: usize,
        kind: KvKind,
        want: KvInfo,
        make: impl FnOnce() -> Result<R>,
    ) -> Result<bool> {
        if self.layers.len() <= layer {
            self.layers.resize_with(layer + 1, || [None, None]);
        }
        let slot = &mut self.layers[layer][kind as usize];
        if let Some(r) = slot {
            let have = r.shape();
            if have != want {
                return Err(GraphError::KvMismatch {
                    layer,
                    kind,
                    msg: format!(
                        "holds {} cells of {} values as {:?}{}; this graph needs {} cells of \
                         {} values as {:?} (the regions are sized once per cache)",
                        have.n_ctx,
                        have.row_elems,
                        have.format,
                        self.where_,
                        want.n_ctx,
                        want.row_elems,
                        want.format
                    ),
                });
            }
            return Ok(false);
        }
        *slot = Some(make()?);
        Ok(true)
    }

    fn missing(&self, layer: usize, kind: KvKind) -> GraphError {
        GraphError::NoKvRegion {
            layer,
            kind,
            where_: self.where_,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(KvInfo);
    impl Region for Fake {
        fn shape(&self) -> KvInfo {
            self.0
        }
    }

    fn shape(n_ctx: usize) -> KvInfo {
        KvInfo::new(KvFormat::F16, 8, n_ctx)
    }

    #[test]
    fn creates_once_and_refuses_another_shape() {
        let mut t = RegionTable::new(" on the test device");
        assert!(t.require(3, KvKind::V).is_err());
        assert!(t
            .ensure(3, KvKind::V, shape(16), || Ok(Fake(shape(16))))
            .unwrap());
        assert!(!t
            .ensure(3, KvKind::V, shape(16), || unreachable!())
            .unwrap());
        assert!(t.get(3, KvKind::K).is_none());
        let err = t
            .ensure(3, KvKind::V, shape(32), || unreachable!())
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("16 cells") && msg.contains("on the test device"),
            "{msg}"
        );
        match t.pair(3) {
            Err(GraphError::NoKvRegion { kind, .. }) => assert_eq!(kind, KvKind::K),
            _ => panic!("the missing K region is named"),
        }
    }
}
