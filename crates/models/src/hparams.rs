//! Hyperparameters read from a GGUF file's metadata, with llama.cpp's
//! defaults and checks.

use minfer_gguf::{GgufFile, Metadata};

use crate::arch::Arch;
use crate::error::{ModelError, Result};

/// The numbers that shape a llama-family transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    /// The architecture the keys were read for.
    pub arch: Arch,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Width of the residual stream (`d_model`).
    pub n_embd: usize,
    /// Width of the FFN's hidden layer.
    pub n_ff: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when below `n_head`).
    pub n_head_kv: usize,
    /// Elements per head, keys and values alike.
    pub head_dim: usize,
    /// Rotated dimensions per head (`rope.dimension_count`).
    pub n_rot: usize,
    /// RoPE base frequency (`rope.freq_base`, default 10000).
    pub rope_freq_base: f32,
    /// Position multiplier of RoPE: `1 / factor` under linear scaling.
    pub rope_freq_scale: f32,
    /// Epsilon of every RMS norm.
    pub rms_eps: f32,
    /// Context the model was trained for.
    pub n_ctx_train: usize,
    /// Vocabulary size, the width of a logits row.
    pub n_vocab: usize,
}

/// Reads the keys of one architecture (`{arch}.{suffix}`).
pub(crate) struct Keys<'a> {
    md: &'a Metadata,
    arch: Arch,
}

impl<'a> Keys<'a> {
    /// The keys of `arch` in `file`'s metadata.
    pub(crate) fn new(file: &'a GgufFile, arch: Arch) -> Self {
        Keys {
            md: file.metadata(),
            arch,
        }
    }

    pub(crate) fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch.name())
    }

    pub(crate) fn usize_opt(&self, suffix: &str) -> Result<Option<usize>> {
        let key = self.key(suffix);
        match self.md.get_u64(&key)? {
            None => Ok(None),
            Some(v) => usize::try_from(v)
                .map(Some)
                .map_err(|_| ModelError::BadValue {
                    key,
                    msg: format!("{v} does not fit in memory sizes"),
                }),
        }
    }

    pub(crate) fn usize_req(&self, suffix: &str) -> Result<usize> {
        self.usize_opt(suffix)?
            .ok_or_else(|| ModelError::MissingKey(self.key(suffix)))
    }

    pub(crate) fn f32_opt(&self, suffix: &str) -> Result<Option<f32>> {
        Ok(self.md.get_f64(&self.key(suffix))?.map(|v| v as f32))
    }

    pub(crate) fn bad(&self, suffix: &str, msg: impl Into<String>) -> ModelError {
        ModelError::BadValue {
            key: self.key(suffix),
            msg: msg.into(),
        }
    }
}

impl HParams {
    /// Reads the hyperparameters of `arch` from `file`. The vocabulary
    /// size comes from the tokenizer's token list, else `{arch}.vocab_size`,
    /// else the rows of `token_embd.weight`.
    ///
    /// # Errors
    /// [`ModelError::MissingKey`] for a required key,
    /// [`ModelError::BadValue`] for a value of the wrong type or out of
    /// range, [`ModelError::Unsupported`] for a RoPE scaling this crate
    /// does not implement.
    pub fn from_gguf(file: &GgufFile, arch: Arch) -> Result<Self> {
        let k = Keys {
            md: file.metadata(),
            arch,
        };
        let n_layer = k.usize_req("block_count")?;
        let n_embd = k.usize_req("embedding_length")?;
        let n_ff = k.usize_req("feed_forward_length")?;
        let n_head = k.usize_req("attention.head_count")?;
        let n_head_kv = k.usize_opt("attention.head_count_kv")?.unwrap_or(n_head);
        if n_layer == 0 {
            return Err(k.bad("block_count", "must be at least 1"));
        }
        if n_embd == 0 || n_ff == 0 {
            return Err(k.bad("embedding_length", "widths must be positive"));
        }
        if n_head == 0 {
            return Err(k.bad("attention.head_count", "must be at least 1"));
        }
        if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
            return Err(k.bad(
                "attention.head_count_kv",
                format!("{n_head_kv} KV heads do not divide {n_head} query heads"),
            ));
        }
        let head_dim = match k.usize_opt("attention.key_length")? {
            Some(d) => d,
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => {
                return Err(k.bad(
                    "attention.head_count",
                    format!("{n_head} heads do not divide the width {n_embd}"),
                ))
            }
        };
        if head_dim == 0 {
            return Err(k.bad("attention.key_length", "must be positive"));
        }
        if let Some(dv) = k.usize_opt("attention.value_length")? {
            if dv != head_dim {
                return Err(ModelError::Unsupported(format!(
                    "value heads of {dv} elements differ from key heads of {head_dim}"
                )));
            }
        }
        let n_rot = k.usize_opt("rope.dimension_count")?.unwrap_or(head_dim);
        if n_rot > head_dim || !n_rot.is_multiple_of(2) {
            return Err(k.bad(
                "rope.dimension_count",
                format!("{n_rot} must be even and at most the head size {head_dim}"),
            ));
        }
        let rope_freq_base = k.f32_opt("rope.freq_base")?.unwrap_or(10_000.0);
        if !(rope_freq_base.is_finite() && rope_freq_base > 0.0) {
            return Err(k.bad(
                "rope.freq_base",
                format!("{rope_freq_base} is not positive"),
            ));
        }
        let rope_freq_scale = rope_freq_scale(&k)?;
        let rms_eps = k
            .f32_opt("attention.layer_norm_rms_epsilon")?
            .ok_or_else(|| ModelError::MissingKey(k.key("attention.layer_norm_rms_epsilon")))?;
        if !(rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(k.bad(
                "attention.layer_norm_rms_epsilon",
                format!("{rms_eps} is not a non-negative number"),
            ));
        }
        let n_ctx_train = k.usize_req("context_length")?;
        let n_vocab = vocab_size(file, &k)?;
        Ok(HParams {
            arch,
            n_layer,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            n_rot,
            rope_freq_base,
            rope_freq_scale,
            rms_eps,
            n_ctx_train,
            n_vocab,
        })
    }

    /// Width of a query row (`n_head * head_dim`).
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of a key or value row (`n_head_kv * head_dim`), the size of
    /// one KV cell per layer.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

/// The RoPE position scale, as llama.cpp derives it: `1 / factor` (from
/// `rope.scaling.factor`, or the older `rope.scale_linear`) unless the
/// scaling type is `none`. YaRN and LongRoPE change the rotation itself,
/// which the graph's RoPE does not do, so they are refused rather than
/// silently computed as linear.
fn rope_freq_scale(k: &Keys) -> Result<f32> {
    let factor = match k.f32_opt("rope.scaling.factor")? {
        Some(f) => Some(f),
        None => k.f32_opt("rope.scale_linear")?,
    };
    let factor = factor.filter(|&f| f != 0.0);
    if let Some(f) = factor {
        if !(f.is_finite() && f > 0.0) {
            return Err(k.bad("rope.scaling.factor", format!("{f} is not positive")));
        }
    }
    let ty_key = k.key("rope.scaling.type");
    let ty = k.md.get_str(&ty_key)?.unwrap_or("linear");
    match (ty, factor) {
        ("none", _) | (_, None) => Ok(1.0),
        ("linear", Some(f)) => Ok(1.0 / f),
        // A unit factor makes YaRN's interpolation the identity.
        ("yarn", Some(1.0)) => Ok(1.0),
        (other, Some(f)) => Err(ModelError::Unsupported(format!(
            "RoPE scaling {other:?} with factor {f} ({ty_key})"
        ))),
    }
}

fn vocab_size(file: &GgufFile, k: &Keys) -> Result<usize> {
    if let Some(tokens) = file.metadata().get_array("tokenizer.ggml.tokens")? {
        if !tokens.items.is_empty() {
            return Ok(tokens.items.len());
        }
    }
    if let Some(n) = k.usize_opt("vocab_size")? {
        return Ok(n);
    }
    let name = "token_embd.weight";
    let t = file
        .tensor(name)
        .ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    t.info
        .shape
        .get(1)
        .and_then(|&n| usize::try_from(n).ok())
        .ok_or_else(|| ModelError::BadValue {
            key: name.into(),
            msg: format!("shape {:?} has no row count", t.info.shape),
        })
}
