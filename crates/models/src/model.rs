//! [`Model`]: a GGUF file's hyperparameters and weights, ready to describe
//! its forward pass to a [`GraphBuilder`].

use std::path::Path;
use std::sync::Arc;

use minfer_gguf::GgufFile;
use minfer_graph::{GraphBuilder, NodeId, Result as GraphResult, WeightId, WeightStore};

use crate::arch::Arch;
use crate::error::{ModelError, Result};
use crate::hparams::HParams;
use crate::layers::{FfnTensors, ModelTensors};
use crate::registry::{self, Forward, LoadCx};

/// What [`Model::weight_bytes`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightBytes {
    /// Read for one token.
    pub active: u64,
    /// Held.
    pub total: u64,
}

/// A loaded model. Immutable once loaded, so one model can be shared by
/// several engines (`Arc<Model>`).
pub struct Model {
    /// Hyperparameters from the file's metadata.
    pub hparams: HParams,
    /// Every tensor of the file, by handle; graphs are built over it.
    pub weights: WeightStore,
    forward: Box<dyn Forward>,
    file: Arc<GgufFile>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("hparams", &self.hparams)
            .field("n_weights", &self.weights.len())
            .finish()
    }
}

impl Model {
    /// Opens and loads the GGUF file at `path`.
    ///
    /// # Errors
    /// As [`GgufFile::open`] and [`Model::load`].
    pub fn open(path: impl AsRef<Path>) -> Result<Model> {
        Self::load(Arc::new(GgufFile::open(path)?))
    }

    /// Reads the architecture and hyperparameters from `file` and resolves
    /// every tensor the forward pass needs, checking their shapes. Tensor
    /// data is not copied: the weights stay in the file's mapping.
    ///
    /// # Errors
    /// [`ModelError::NoArchitecture`], [`ModelError::UnknownArchitecture`]
    /// naming the architecture, [`ModelError::MissingTensor`] naming the
    /// tensor, and the metadata errors of [`HParams::from_gguf`].
    pub fn load(file: Arc<GgufFile>) -> Result<Model> {
        let arch_name = file
            .metadata()
            .get_str("general.architecture")?
            .ok_or(ModelError::NoArchitecture)?;
        let arch = Arch::from_name(arch_name)?;
        let hparams = HParams::from_gguf(&file, arch)?;
        let mut weights = WeightStore::from_gguf(Arc::clone(&file))?;
        let family = registry::family(arch.name()).ok_or_else(|| {
            // `Arch::from_name` only answers names of the registry.
            ModelError::UnknownArchitecture {
                name: arch_name.to_string(),
                supported: Arch::all().map(Arch::name).collect::<Vec<_>>().join(", "),
            }
        })?;
        let forward = (family.load)(&mut LoadCx {
            file: &file,
            weights: &mut weights,
            hparams: &hparams,
        })?;
        // An embedding table that only serves row lookups keeps ggml's
        // layout; tied to the LM head it is repacked with the other
        // matrices (row lookups read the interleaved layout too).
        let t = forward.tensors();
        if t.output != t.token_embd {
            weights.keep_rows(t.token_embd);
        }
        for l in &t.layers {
            if let FfnTensors::Experts(e) = &l.ffn {
                e.mark_stacked(&mut weights);
            }
        }
        Ok(Model {
            hparams,
            weights,
            forward,
            file,
        })
    }

    /// The bytes of weights one token's forward pass reads, and of all the
    /// model's weights: every matrix once, one row of an embedding table
    /// that is not also the LM head, and of each layer's stacked experts
    /// only the share a token uses. Decoding is bound by reading these, so
    /// `active × tokens/s` is the memory bandwidth a decode step draws.
    pub fn weight_bytes(&self) -> WeightBytes {
        let w = &self.weights;
        // A split tensor is counted through its parts.
        let total: u64 = (0..w.len())
            .map(|i| WeightId(i as u32))
            .filter(|&id| !w.is_split(id))
            .map(|id| w.data(id).len() as u64)
            .sum();
        let mut active = total;
        let t = self.forward.tensors();
        if t.output != t.token_embd {
            let embd = w.data(t.token_embd).len() as u64;
            let rows = w.info(t.token_embd).shape[1].max(1) as u64;
            active -= embd - embd / rows;
        }
        for l in &t.layers {
            if let FfnTensors::Experts(e) = &l.ffn {
                let (used, n) = (e.shape.n_used as u64, e.shape.n_expert.max(1) as u64);
                for id in [e.up, e.gate, e.down] {
                    let bytes = w.data(id).len() as u64;
                    active -= bytes - bytes / n * used;
                }
            }
        }
        WeightBytes { active, total }
    }

    /// The architecture.
    pub fn arch(&self) -> Arch {
        self.hparams.arch
    }

    /// Width of a logits row.
    pub fn n_vocab(&self) -> usize {
        self.hparams.n_vocab
    }

    /// The GGUF file the model was loaded from (its metadata holds the
    /// tokenizer and the chat template).
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    /// The tensors of the forward pass, resolved to weight handles (for
    /// tools that build partial graphs with [`crate::layers`]).
    pub fn tensors(&self) -> &ModelTensors {
        self.forward.tensors()
    }

    /// Whether the LM head reuses the token embeddings.
    pub fn tied_embeddings(&self) -> bool {
        let t = self.forward.tensors();
        t.output == t.token_embd
    }

    /// Describes the forward pass for the builder's params and returns
    /// its output node, one row per wanted output (the builder's `n_out`,
    /// the last rows of the batch unless the step names others): the
    /// logits, `[n_vocab, n_out]`, or with
    /// [`OutputKind::Hidden`](minfer_graph::OutputKind::Hidden) the final
    /// hidden states after the output norm, `[n_embd, n_out]`. The builder
    /// must be over [`Model::weights`].
    ///
    /// # Errors
    /// A [`minfer_graph::GraphError`] when a node cannot be built; with
    /// shapes checked at load time this means the builder's params are
    /// unusable (for example `n_tokens` of 0).
    pub fn build_graph(&self, b: &mut GraphBuilder) -> GraphResult<NodeId> {
        let p = b.params();
        if p.n_tokens == 0 || p.n_out == 0 || p.n_out > p.n_tokens {
            return Err(minfer_graph::GraphError::BadInput {
                what: "graph params",
                msg: format!(
                    "{} outputs of {} tokens: need 1 ≤ n_out ≤ n_tokens",
                    p.n_out, p.n_tokens
                ),
            });
        }
        self.forward.build(b, &self.hparams)
    }
}
