//! The registry of model families: one line per architecture. A family
//! is a folder of this crate that reads its tensors (and any
//! hyperparameters of its own) and builds its forward pass; nothing outside
//! its folder and this list knows about it.

use minfer_gguf::GgufFile;
use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, WeightStore};

use crate::arch::Arch;
use crate::error::{ModelError, Result};
use crate::hparams::HParams;
use crate::layers::ModelTensors;
use crate::{gemma3, gpt_oss, llama, phi3, qwen2, qwen3, qwen3moe};

/// A loaded architecture: its tensors resolved to handles, ready to
/// describe its forward pass.
pub(crate) trait Forward: Send + Sync + std::fmt::Debug {
    /// The tensors every llama-style family has (embeddings, per-layer
    /// attention and FFN, final norm, LM head).
    fn tensors(&self) -> &ModelTensors;

    /// Describes the forward pass; returns logits `[n_vocab, n_out]`.
    fn build(&self, b: &mut GraphBuilder, hp: &HParams) -> GraphResult<NodeId>;
}

/// What a family's loader reads from.
pub(crate) struct LoadCx<'a> {
    /// The GGUF file (for metadata keys of the family's own).
    pub file: &'a GgufFile,
    /// Every tensor of the file, by handle. A family may split fused
    /// tensors into parts ([`WeightStore::split_rows`]).
    pub weights: &'a mut WeightStore,
    /// The hyperparameters every family shares.
    pub hparams: &'a HParams,
}

/// One architecture: its GGUF name and its loader.
pub(crate) struct Family {
    /// `general.architecture`.
    pub name: &'static str,
    /// Resolves the tensors (checking their shapes) and returns the
    /// family's forward pass.
    pub load: fn(&mut LoadCx) -> Result<Box<dyn Forward>>,
}

/// Every supported architecture.
pub(crate) const FAMILIES: &[Family] = &[
    qwen2::FAMILY,
    llama::FAMILY,
    qwen3::FAMILY,
    gemma3::FAMILY,
    qwen3moe::FAMILY,
    phi3::FAMILY,
    gpt_oss::FAMILY,
];

/// The family called `name`.
pub(crate) fn family(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// The architectures are the registry's families, by name.
impl Arch {
    /// Every supported architecture, in registry order.
    pub fn all() -> impl Iterator<Item = Arch> {
        FAMILIES.iter().map(|f| Arch(f.name))
    }

    /// The architecture called `name` in a GGUF file.
    ///
    /// # Errors
    /// [`ModelError::UnknownArchitecture`] naming `name` and the supported
    /// ones.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::all()
            .find(|a| a.name() == name)
            .ok_or_else(|| ModelError::UnknownArchitecture {
                name: name.to_string(),
                supported: Self::all().map(Arch::name).collect::<Vec<_>>().join(", "),
            })
    }
}
