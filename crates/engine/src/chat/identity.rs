//! The identity of a loaded model's weights, for session files.

use crate::identity::{weights_identity, ModelIdentity};
use crate::load::LoadedModel;

/// Hashes every tensor's name, type, shape and bytes (in file order) of
/// `model`: equal for the same weights whatever the file is called or how
/// it is split. Reads the whole model once (about a second for 400 MB).
pub fn model_identity(model: &LoadedModel) -> ModelIdentity {
    weights_identity(model.model(), model.name())
}
