//! Hyperparameters read from a GGUF file's metadata, with llama.cpp's
//! defaults and checks.

use minfer_gguf::{GgufFile, Metadata};
use minfer_graph::Yarn;

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
    /// Position multiplier of RoPE: `1 / factor` under linear or YaRN
    /// scaling.
    pub rope_freq_scale: f32,
    /// Factor on RoPE's cosines and sines (ggml's `attn_factor`):
    /// `rope.scaling.attn_factor` (LongRoPE), times YaRN's correction as
    /// llama.cpp computes it; 1 for most models.
    pub rope_attn_factor: f32,
    /// YaRN's angle blend, under `rope.scaling.type = yarn`.
    pub rope_yarn: Option<Yarn>,
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
        let (rope_attn_factor, rope_yarn) =
            rope_magnitude(&k, rope_freq_scale, n_rot, n_ctx_train, rope_freq_base)?;
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
            rope_attn_factor,
            rope_yarn,
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
/// scaling type is `none`. YaRN's blend and magnitude are
/// [`rope_magnitude`]'s; other scalings (LongRoPE's factor tensors are a
/// family's own) are refused rather than silently computed as linear.
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
        ("linear" | "yarn", Some(f)) => Ok(1.0 / f),
        (other, Some(f)) => Err(ModelError::Unsupported(format!(
            "RoPE scaling {other:?} with factor {f} ({ty_key})"
        ))),
    }
}

/// YaRN's blend and the magnitude factor of the rotation, as llama.cpp's
/// context derives them for `rope.scaling.type = yarn` with a factor above
/// 1: extrapolation weight 1, the correction range for `beta_fast` 32 and
/// `beta_slow` 1 in `rope.scaling.original_context_length`, and the
/// factor `(0.1 ln f + 1) / (1 + 0.1 ln f)` (which ggml's kernel then
/// multiplies by `1 + 0.1 ln f` again), each step in f32 as there; times
/// `rope.scaling.attn_factor` for every scaling.
fn rope_magnitude(
    k: &Keys,
    freq_scale: f32,
    n_rot: usize,
    n_ctx_train: usize,
    freq_base: f32,
) -> Result<(f32, Option<Yarn>)> {
    let key_factor = k.f32_opt("rope.scaling.attn_factor")?.unwrap_or(1.0);
    if !(key_factor.is_finite() && key_factor > 0.0) {
        return Err(k.bad(
            "rope.scaling.attn_factor",
            format!("{key_factor} is not positive"),
        ));
    }
    let yarn = k.md.get_str(&k.key("rope.scaling.type"))? == Some("yarn") && freq_scale != 1.0;
    if !yarn {
        return Ok((key_factor, None));
    }
    if k.f32_opt("rope.scaling.yarn_log_multiplier")?
        .is_some_and(|m| m != 0.0)
    {
        return Err(ModelError::Unsupported(
            "YaRN with a log multiplier (rope.scaling.yarn_log_multiplier)".into(),
        ));
    }
    let n_ctx_orig = k
        .usize_opt("rope.scaling.original_context_length")?
        .unwrap_or(n_ctx_train);
    let factor = 1.0 / freq_scale;
    let mscale = if factor <= 1.0 {
        1.0
    } else {
        0.1f32 * 1.0 * factor.ln() + 1.0
    };
    let attn = mscale * (1.0 / (1.0 + 0.1 * factor.ln())) * key_factor;
    let y = Yarn::new(1.0, n_rot, n_ctx_orig, freq_base, [32.0, 1.0]);
    Ok((attn, Some(y)))
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
