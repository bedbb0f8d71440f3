//! Tiny synthetic models for tests and tools that need a real GGUF file
//! without the real weights: a llama-family model of a few layers with
//! deterministic pseudo-random f32 weights, written with the crate's own
//! GGUF writer. `qwen3` and `gemma3` models get the per-head Q/K norms
//! (and gemma3 its post-norms and a sliding window of
//! [`TinyModel::GEMMA3_WINDOW`] positions) their architecture needs.

use minfer_gguf::{array_of, GgmlType, GgufError, GgufWriter, Value, ValueType};

/// Shape and options of a synthetic model.
#[derive(Clone, Debug, PartialEq)]
pub struct TinyModel {
    /// `general.architecture` (also the prefix of the hyperparameter keys).
    pub arch: String,
    /// Blocks.
    pub n_layer: usize,
    /// Residual width.
    pub n_embd: usize,
    /// Query heads (head size is `n_embd / n_head`).
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// FFN hidden width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Omit `output.weight` (the LM head is then the token embeddings).
    pub tied: bool,
    /// Add q/k/v biases.
    pub bias: bool,
    /// Tensors to leave out (to provoke load errors).
    pub skip: Vec<String>,
    /// Seed of the weights.
    pub seed: u64,
    /// Metadata set after the defaults (overriding any of them).
    pub extra: Vec<(String, Value)>,
    /// Routed experts per block instead of one FFN: `(n_expert, n_used,
    /// n_ff)`, for `qwen3moe`.
    pub experts: Option<(usize, usize, usize)>,
}

impl TinyModel {
    /// The sliding window of a tiny `gemma3` model (override it with
    /// `gemma3.attention.sliding_window` in `extra`).
    pub const GEMMA3_WINDOW: u32 = 6;

    /// A two-layer model of architecture `arch` (biases for `qwen2`).
    pub fn new(arch: &str) -> Self {
        TinyModel {
            arch: arch.to_string(),
            n_layer: 2,
            n_embd: 64,
            n_head: 4,
            n_head_kv: 2,
            n_ff: 96,
            n_vocab: 128,
            tied: arch != "qwen2",
            bias: arch == "qwen2",
            skip: Vec::new(),
            seed: 1,
            extra: Vec::new(),
            experts: (arch == "qwen3moe").then_some((4, 2, 32)),
        }
    }

    /// Every tensor: name, ggml shape `[ne0, ne1, ne2]` (`ne1` 0 for a
    /// vector, `ne2` 1 for a matrix).
    fn tensors(&self) -> Vec<(String, [usize; 3])> {
        let head_dim = self.n_embd / self.n_head;
        let (d, q, kv, ff) = (
            self.n_embd,
            self.n_head * head_dim,
            self.n_head_kv * head_dim,
            self.n_ff,
        );
        let mut t = vec![("token_embd.weight".to_string(), [d, self.n_vocab, 1])];
        for l in 0..self.n_layer {
            let n = |s: &str| format!("blk.{l}.{s}");
            t.push((n("attn_norm.weight"), [d, 0, 1]));
            t.push((n("attn_q.weight"), [d, q, 1]));
            t.push((n("attn_k.weight"), [d, kv, 1]));
            t.push((n("attn_v.weight"), [d, kv, 1]));
            if self.bias {
                t.push((n("attn_q.bias"), [q, 0, 1]));
                t.push((n("attn_k.bias"), [kv, 0, 1]));
                t.push((n("attn_v.bias"), [kv, 0, 1]));
            }
            if matches!(self.arch.as_str(), "qwen3" | "qwen3moe" | "gemma3") {
                t.push((n("attn_q_norm.weight"), [head_dim, 0, 1]));
                t.push((n("attn_k_norm.weight"), [head_dim, 0, 1]));
            }
            if self.arch == "gemma3" {
                t.push((n("post_attention_norm.weight"), [d, 0, 1]));
                t.push((n("post_ffw_norm.weight"), [d, 0, 1]));
            }
            t.push((n("attn_output.weight"), [q, d, 1]));
            t.push((n("ffn_norm.weight"), [d, 0, 1]));
            if let Some((e, _, eff)) = self.experts {
                t.push((n("ffn_gate_inp.weight"), [d, e, 1]));
                t.push((n("ffn_gate_exps.weight"), [d, eff, e]));
                t.push((n("ffn_up_exps.weight"), [d, eff, e]));
                t.push((n("ffn_down_exps.weight"), [eff, d, e]));
            } else {
                t.push((n("ffn_gate.weight"), [d, ff, 1]));
                t.push((n("ffn_up.weight"), [d, ff, 1]));
                t.push((n("ffn_down.weight"), [ff, d, 1]));
            }
        }
        t.push(("output_norm.weight".to_string(), [d, 0, 1]));
        if !self.tied {
            t.push(("output.weight".to_string(), [d, self.n_vocab, 1]));
        }
        t.retain(|(name, _)| !self.skip.contains(name));
        t
    }

    /// The model as GGUF bytes.
    ///
    /// # Errors
    /// A [`GgufError`] from the writer (only for inconsistent options).
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let a = &self.arch;
        let mut w = GgufWriter::new();
        w.set("general.architecture", a.as_str())
            .set(format!("{a}.block_count"), self.n_layer as u32)
            .set(format!("{a}.context_length"), 256u32)
            .set(format!("{a}.embedding_length"), self.n_embd as u32)
            .set(format!("{a}.feed_forward_length"), self.n_ff as u32)
            .set(format!("{a}.attention.head_count"), self.n_head as u32)
            .set(
                format!("{a}.attention.head_count_kv"),
                self.n_head_kv as u32,
            )
            .set(format!("{a}.rope.freq_base"), 10_000.0f32)
            .set(format!("{a}.attention.layer_norm_rms_epsilon"), 1e-6f32)
            .set(
                "tokenizer.ggml.tokens",
                array_of(
                    ValueType::String,
                    (0..self.n_vocab).map(|i| format!("<t{i}>")),
                ),
            );
        if a == "gemma3" {
            w.set(format!("{a}.attention.sliding_window"), Self::GEMMA3_WINDOW);
        }
        if let Some((e, used, ff)) = self.experts {
            w.set(format!("{a}.expert_count"), e as u32)
                .set(format!("{a}.expert_used_count"), used as u32)
                .set(format!("{a}.expert_feed_forward_length"), ff as u32);
        }
        for (k, v) in &self.extra {
            w.set(k.clone(), v.clone());
        }
        let mut rng = self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for (name, shape) in self.tensors() {
            let n = shape[0] * shape[1].max(1) * shape[2];
            let scale = if shape[1] == 0 {
                0.0
            } else {
                1.0 / (shape[0] as f32).sqrt()
            };
            let bytes: Vec<u8> = (0..n)
                .flat_map(|_| {
                    // xorshift64*: reproducible without a dependency.
                    rng ^= rng >> 12;
                    rng ^= rng << 25;
                    rng ^= rng >> 27;
                    let u = (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32
                        / (1u64 << 24) as f32;
                    let r = 2.0 * u - 1.0;
                    // Norm weights near 1, biases small, matrices scaled.
                    let v = if name.contains("norm") {
                        1.0 + 0.1 * r
                    } else if scale == 0.0 {
                        0.1 * r
                    } else {
                        1.7 * scale * r
                    };
                    v.to_le_bytes()
                })
                .collect();
            let dims: Vec<u64> = match shape {
                [ne0, 0, _] => vec![ne0 as u64],
                [ne0, ne1, 1] => vec![ne0 as u64, ne1 as u64],
                [ne0, ne1, ne2] => vec![ne0 as u64, ne1 as u64, ne2 as u64],
            };
            w.add_tensor(name, GgmlType::F32, &dims, bytes)?;
        }
        Ok(w.to_bytes())
    }
}
