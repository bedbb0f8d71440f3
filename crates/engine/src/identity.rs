//! The identity of a model's weights, below both the session files that
//! record it and the prompt cache's disk tier that names its folder by it.

use minfer_models::Model;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What identifies the model and cache a session was made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// sha256 over every tensor's name, type, shape and data, hex.
    pub tensor_sha256: String,
    /// The architecture's name.
    pub arch: String,
    /// The model's name (informative; not compared).
    pub name: String,
}

/// Hashes every tensor's name, type, shape and bytes (in file order) of
/// `model` (what a runtime holds), named `name` (informative only): equal
/// for the same weights whatever the file is called or how it is split.
/// Reads the whole model once (about a second for 400 MB).
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
