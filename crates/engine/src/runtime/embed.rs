//! Embeddings, as llama.cpp's `llama-embedding` computes them for decoder
//! models: the final hidden states (after the output norm, before the LM
//! head), pooled per sequence and normalized.
//!
//! They run on the runtime that serves generations, not on one of their
//! own: the weights, thread pool and graph cache are the same, and a
//! second runtime would hold a second set of KV regions and a second pool
//! competing for the same cores. Each input is a new sequence of its own,
//! so a batch of inputs goes through one forward pass beside whatever else
//! the runtime holds (attention never crosses sequences), and every one is
//! removed when its vectors have been read, so nothing of an embedding
//! stays in the cache.

use minfer_gguf::GgufFile;
use minfer_graph::kv::MAX_SEQS;
use minfer_graph::OutputKind;
use minfer_models::ModelError;

use super::base::Runtime;
use super::batch::BatchEntry;
use super::types::SeqId;
use crate::error::{EngineError, Result};

/// How the hidden states of a sequence's tokens become its embedding:
/// llama.cpp's `llama_pooling_type`, whose numbers a GGUF file's
/// `{arch}.pooling_type` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// No pooling (0): one vector per token.
    None,
    /// The mean of the tokens' vectors (1).
    Mean,
    /// The first token's vector (2), BERT's `[CLS]`.
    Cls,
    /// The last token's vector (3), what decoder embedding models use.
    Last,
    /// A classifier head's scores (4), for rerankers. None of the
    /// supported architectures has such a head, so embedding refuses it.
    Rank,
}

impl Pooling {
    /// Every pooling type, in llama.cpp's order.
    pub const ALL: [Pooling; 5] = [
        Pooling::None,
        Pooling::Mean,
        Pooling::Cls,
        Pooling::Last,
        Pooling::Rank,
    ];

    /// llama.cpp's number for it (the GGUF value).
    pub fn id(self) -> u32 {
        match self {
            Pooling::None => 0,
            Pooling::Mean => 1,
            Pooling::Cls => 2,
            Pooling::Last => 3,
            Pooling::Rank => 4,
        }
    }

    /// The pooling type with llama.cpp's number `id`.
    pub fn from_id(id: u32) -> Option<Pooling> {
        Self::ALL.into_iter().find(|p| p.id() == id)
    }

    /// llama.cpp's name for it (`--pooling`): `none`, `mean`, `cls`,
    /// `last` or `rank`.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
            Pooling::Rank => "rank",
        }
    }

    /// Parses a [`name`](Pooling::name), ignoring case.
    pub fn parse(s: &str) -> Option<Pooling> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// The pooling `file` asks for in `{arch}.pooling_type`. A file
    /// without the key gets [`Pooling::None`], as in llama.cpp (whose
    /// hyperparameters default to it): a plain decoder LLM's file has no
    /// pooling type, and llama-embedding then prints one vector per token.
    ///
    /// # Errors
    /// [`EngineError::Model`] for a value that is not an unsigned integer
    /// or not one of llama.cpp's pooling types.
    pub fn from_gguf(file: &GgufFile) -> Result<Pooling> {
        let Some(arch) = file.architecture() else {
            return Ok(Pooling::None);
        };
        let key = format!("{arch}.pooling_type");
        let bad = |msg: String| {
            EngineError::Model(ModelError::BadValue {
                key: key.clone(),
                msg,
            })
        };
        let value = file
            .metadata()
            .get_u64(&key)
            .map_err(|e| bad(e.to_string()))?;
        match value {
            None => Ok(Pooling::None),
            Some(v) => u32::try_from(v)
                .ok()
                .and_then(Pooling::from_id)
                .ok_or_else(|| bad(format!("{v} is not a pooling type (0 to 4)"))),
        }
    }
}

impl std::fmt::Display for Pooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Scales `v` to unit Euclidean length, as llama.cpp's
/// `common_embd_normalize(…, 2)` does (squares summed in f64); a zero
/// vector stays zero.
pub fn normalize_l2(v: &mut [f32]) {
    let sum: f64 = v.iter().map(|&x| f64::from(x * x)).sum();
    let norm = sum.sqrt();
    let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
    for x in v {
        *x *= scale;
    }
}

impl Runtime {
    /// Width of an embedding (and of a hidden state): the model's `n_embd`.
    pub fn n_embd(&self) -> usize {
        self.model.hparams.n_embd
    }

    /// The pooling the model's file asks for ([`Pooling::from_gguf`]).
    ///
    /// # Errors
    /// As [`Pooling::from_gguf`].
    pub fn default_pooling(&self) -> Result<Pooling> {
        Pooling::from_gguf(self.model.file())
    }

    /// The embeddings of `inputs` (token ids, with whatever BOS/EOS the
    /// model's tokenizer adds), pooled by `pooling` and scaled to unit
    /// length (llama-embedding's default `--embd-normalize 2`): one vector
    /// of [`n_embd`](Runtime::n_embd) values per input, or with
    /// [`Pooling::None`] one such row per token of the input, in order,
    /// each normalized on its own.
    ///
    /// # Errors
    /// As [`embed_raw`](Runtime::embed_raw).
    pub fn embed(&mut self, inputs: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>> {
        let mut out = self.embed_raw(inputs, pooling)?;
        let n_embd = self.n_embd();
        for v in &mut out {
            for row in v.chunks_mut(n_embd) {
                normalize_l2(row);
            }
        }
        Ok(out)
    }

    /// [`embed`](Runtime::embed) without the normalization: the pooled
    /// hidden states as the graph computes them.
    ///
    /// Inputs go through one forward pass together, each as a new
    /// sequence, as many at a time as there are free sequence slots and
    /// cells; the sequences are removed afterwards, whether the pass
    /// succeeded or not. Idle sequences (cached prompts) are evicted when
    /// their room is needed, as for any step. Live sequences are untouched.
    ///
    /// # Errors
    /// Checked before anything runs: [`EngineError::EmptyInput`] and
    /// [`EngineError::InputTooLong`] (more than `n_ctx` tokens), naming
    /// the input; [`EngineError::TokenOutOfRange`];
    /// [`EngineError::InvalidArgument`] for [`Pooling::Rank`].
    /// [`EngineError::CacheFull`] when the cells that other sequences
    /// leave free cannot hold an input, and
    /// [`EngineError::TooManySequences`] when live sequences hold every
    /// slot.
    pub fn embed_raw(&mut self, inputs: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>> {
        if pooling == Pooling::Rank {
            return Err(EngineError::InvalidArgument(
                "rank pooling scores with a classifier head, which this model does not have".into(),
            ));
        }
        let n_ctx = self.cfg.n_ctx;
        let n_vocab = self.n_vocab();
        for (index, input) in inputs.iter().enumerate() {
            if input.is_empty() {
                return Err(EngineError::EmptyInput { index });
            }
            if input.len() > n_ctx as usize {
                return Err(EngineError::InputTooLong {
                    index,
                    tokens: input.len(),
                    n_ctx,
                });
            }
            if let Some(&token) = input.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(EngineError::TokenOutOfRange { token, n_vocab });
            }
        }
        let mut out = Vec::with_capacity(inputs.len());
        let mut next = 0;
        while next < inputs.len() {
            let group = self.next_group(&inputs[next..])?;
            self.embed_group(group, pooling, &mut out)?;
            next += group.len();
        }
        Ok(out)
    }

    /// The longest run at the start of `inputs` (at least one) that the
    /// free slots and the cells other sequences leave can hold at once.
    fn next_group<'i>(&self, inputs: &'i [Vec<u32>]) -> Result<&'i [Vec<u32>]> {
        let slots = MAX_SEQS as usize - self.usage().live;
        if slots == 0 {
            return Err(EngineError::TooManySequences { max: MAX_SEQS });
        }
        let room = self.room();
        let mut cells = 0;
        let mut n = 0;
        for input in inputs.iter().take(slots) {
            if cells + input.len() > room {
                break;
            }
            cells += input.len();
            n += 1;
        }
        if n == 0 {
            return Err(EngineError::CacheFull {
                needed: inputs[0].len(),
                free: room,
            });
        }
        Ok(&inputs[..n])
    }

    /// Embeds `group` in one step (split into micro-batches as any step)
    /// and appends its pooled vectors to `out`.
    fn embed_group(
        &mut self,
        group: &[Vec<u32>],
        pooling: Pooling,
        out: &mut Vec<Vec<f32>>,
    ) -> Result<()> {
        let mut seqs: Vec<SeqId> = Vec::with_capacity(group.len());
        let result = self.embed_on(group, pooling, &mut seqs, out);
        for seq in seqs {
            // Each was created above and is still live.
            let _ = self.remove(seq);
        }
        result
    }

    fn embed_on(
        &mut self,
        group: &[Vec<u32>],
        pooling: Pooling,
        seqs: &mut Vec<SeqId>,
        out: &mut Vec<Vec<f32>>,
    ) -> Result<()> {
        for _ in group {
            seqs.push(self.new_sequence()?);
        }
        let entries: Vec<BatchEntry> = seqs
            .iter()
            .zip(group)
            .map(|(&seq, tokens)| match pooling {
                // Only the last row is read: the last layer's FFN and the
                // output norm run on it alone.
                Pooling::Last => BatchEntry::last(seq, tokens),
                _ => BatchEntry::all(seq, tokens),
            })
            .collect();
        self.forward(entries.as_slice(), OutputKind::Hidden)?;
        let n_embd = self.n_embd();
        for i in 0..entries.len() {
            let (a, b) = (self.offsets[i], self.offsets[i + 1]);
            let rows = &self.outputs[a * n_embd..b * n_embd];
            out.push(pool(rows, n_embd, pooling));
        }
        Ok(())
    }
}

/// Pools one sequence's output rows (`n_embd` values each, in position
/// order; only the last one for [`Pooling::Last`]).
fn pool(rows: &[f32], n_embd: usize, pooling: Pooling) -> Vec<f32> {
    match pooling {
        Pooling::None => rows.to_vec(),
        Pooling::Cls => rows[..n_embd].to_vec(),
        Pooling::Last => rows[rows.len() - n_embd..].to_vec(),
        // llama.cpp multiplies the rows by a column of 1/n, summing the
        // products in order.
        Pooling::Mean | Pooling::Rank => {
            let n = rows.len() / n_embd;
            let w = 1.0 / n as f32;
            let mut mean = vec![0.0f32; n_embd];
            for row in rows.chunks_exact(n_embd) {
                for (m, &x) in mean.iter_mut().zip(row) {
                    *m += x * w;
                }
            }
            mean
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_ids_and_names_round_trip() {
        for p in Pooling::ALL {
            assert_eq!(Pooling::from_id(p.id()), Some(p));
            assert_eq!(Pooling::parse(p.name()), Some(p));
        }
        assert_eq!(Pooling::from_id(5), None);
        assert_eq!(Pooling::parse("MEAN"), Some(Pooling::Mean));
        assert_eq!(Pooling::parse("max"), None);
    }

    #[test]
    fn pooling_picks_the_rows() {
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(pool(&rows, 2, Pooling::Cls), [1.0, 2.0]);
        assert_eq!(pool(&rows, 2, Pooling::Last), [5.0, 6.0]);
        assert_eq!(pool(&rows, 2, Pooling::Mean), [3.0, 4.0]);
        assert_eq!(pool(&rows, 2, Pooling::None), rows);
    }

    #[test]
    fn l2_normalization_gives_unit_length() {
        let mut v = [3.0, 4.0];
        normalize_l2(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut z = [0.0, 0.0];
        normalize_l2(&mut z);
        assert_eq!(z, [0.0, 0.0]);
    }
}
