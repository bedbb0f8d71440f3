//! Looking tensors up by name with their shapes checked, which every
//! family and the shared blocks do at load time.

use minfer_graph::{WeightId, WeightStore};

use crate::error::{ModelError, Result};

/// Looks tensors up by name and checks their shapes.
pub struct Resolver<'a> {
    /// The model's tensors.
    pub store: &'a WeightStore,
}

impl Resolver<'_> {
    /// The tensor `name` with ggml shape `[ne0, ne1]` (`ne1` is 1 for a
    /// vector), if present.
    ///
    /// # Errors
    /// [`ModelError::TensorShape`] when it is present with another shape.
    pub fn optional(&self, name: &str, shape: [usize; 2]) -> Result<Option<WeightId>> {
        let Some(id) = self.store.get(name) else {
            return Ok(None);
        };
        let found = self.store.info(id).shape;
        if found != shape {
            return Err(ModelError::TensorShape {
                name: name.to_string(),
                expected: shape,
                found,
            });
        }
        Ok(Some(id))
    }

    /// The tensor `name`, which must be present with `shape`.
    ///
    /// # Errors
    /// [`ModelError::MissingTensor`] naming it, or
    /// [`ModelError::TensorShape`].
    pub fn required(&self, name: &str, shape: [usize; 2]) -> Result<WeightId> {
        self.optional(name, shape)?
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }
}
