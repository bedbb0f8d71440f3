//! The identity of a model's weights, for session files and the prompt
//! cache's disk tier.

use minfer_models::Model;
use sha2::{Digest, Sha256};

use super::file::ModelIdentity;
use crate::load::LoadedModel;

/// Hashes every tensor's name, type, shape and bytes (in file order) of
/// `model`: equal for the same weights whatever the file is called or how
/// it is split. Reads the whole model once (about a second for 400 MB).
pub fn model_identity(model: &LoadedModel) -> ModelIdentity {
    weights_identity(model.model(), model.name())
}

/// [`model_identity`] of a bare [`Model`] (what a runtime holds), named
/// `name` (informative only).
pub(crate) fn weights_identity(model: &Model, name: String) -> ModelIdentity {
    let file = model.file();
    let mut h = Sha256::new();
    for t in file.tensors() {
        h.update(t.info.name.as_bytes());
        h.update([0]);
        h.update(format!("{:?}", t.info.ggml_type).as_bytes());
        for d in &t.info.shape {
            h.update(d.to_le_bytes());
        }
        h.update(file.tensor_data(t));
    }
    let hex = h
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    ModelIdentity {
        tensor_sha256: hex,
        arch: model.arch().to_string(),
        name,
    }
}
