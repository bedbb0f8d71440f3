//! A draft model: a small model of the same vocabulary, on its own
//! runtime, that guesses the target's next tokens greedily.
//!
//! Each generation that drafts has a sequence on the draft runtime that
//! follows the target's: before drafting, the draft sequence is cut back to
//! what it shares with the target's tokens and fed the rest (usually the
//! last sampled token and the guesses that were accepted), then one draft
//! step per guessed token runs every drafting sequence together.

use std::time::Instant;

use minfer_text::Tokenizer;

use crate::error::{EngineError, Result};
use crate::runtime::{BatchEntry, Runtime, SeqId};

/// Most tokens by which the two vocabularies may differ in size (as in
/// llama.cpp: padding and a few added tokens at the end).
const MAX_VOCAB_DIFFERENCE: usize = 128;

/// A draft model with its runtime.
#[derive(Debug)]
pub struct DraftModel {
    rt: Runtime,
    /// Token ids a draft may propose: below both models' vocabularies.
    n_vocab: usize,
    // Per-call scratch.
    entries_tokens: Vec<u32>,
    active: Vec<usize>,
}

/// One generation's drafting request.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The draft sequence, created on first use.
    pub seq: &'a mut Option<SeqId>,
    /// The target's tokens: everything evaluated plus the token to
    /// evaluate next.
    pub tokens: &'a [u32],
    /// Most tokens to draft.
    pub k: usize,
    /// Stop at a token whose draft probability is below this.
    pub p_min: f32,
    /// The guesses.
    pub out: &'a mut Vec<u32>,
}

impl DraftModel {
    /// A draft model on `rt`, whose tokenizer is `draft`, for a target
    /// whose tokenizer is `target` and whose logits have `target_n_vocab`
    /// entries.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] when the vocabularies differ: in
    /// size by more than a few tokens, in any token they share, or in the
    /// beginning and end tokens.
    pub fn new(
        rt: Runtime,
        draft: &Tokenizer,
        target: &Tokenizer,
        target_n_vocab: usize,
    ) -> Result<DraftModel> {
        check_vocab(draft, target)?;
        let n_vocab = rt.n_vocab().min(target_n_vocab).min(target.n_vocab());
        Ok(DraftModel {
            rt,
            n_vocab,
            entries_tokens: Vec::new(),
            active: Vec::new(),
        })
    }

    /// The draft runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// Keeps at least `n` built graphs on the draft runtime.
    pub(crate) fn keep_graphs(&mut self, n: usize) {
        self.rt.keep_graphs(n);
    }

    /// Hands a generation's draft sequence back (its cells stay cached
    /// for a later prompt with the same beginning).
    pub(crate) fn release(&mut self, seq: SeqId) {
        // The handle came from this runtime; a stale one has nothing left.
        let _ = self.rt.release(seq);
    }

    /// Drafts for every request, together; returns the seconds the
    /// drafting steps of at most two tokens per sequence took, summed, and
    /// their number (a step that catches a sequence up on many tokens is
    /// a prefill, not the cost of a guess). A request whose
    /// sequence cannot be set up gets no guesses (and loses its sequence).
    pub(crate) fn draft(&mut self, reqs: &mut [Request<'_>]) -> (f64, usize) {
        self.active.clear();
        self.entries_tokens.clear();
        // Bring every sequence up to the target's tokens (all but the
        // last, which the first draft step evaluates with the rest).
        let mut spans = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter_mut().enumerate() {
            r.out.clear();
            if r.k == 0 || r.tokens.is_empty() {
                continue;
            }
            match self.sync(r.seq, r.tokens) {
                Ok(from) => {
                    let at = self.entries_tokens.len();
                    self.entries_tokens.extend_from_slice(&r.tokens[from..]);
                    spans.push((at, self.entries_tokens.len()));
                    self.active.push(i);
                }
                Err(_) => {
                    if let Some(s) = r.seq.take() {
                        let _ = self.rt.remove(s);
                    }
                }
            }
        }
        let n_vocab = self.rt.n_vocab();
        let mut secs = 0.0;
        let mut steps = 0;
        while !self.active.is_empty() {
            let short = spans.iter().all(|&(a, b)| b - a <= 2);
            let entries: Vec<BatchEntry> = self
                .active
                .iter()
                .zip(&spans)
                .map(|(&i, &(a, b))| {
                    let seq = reqs[i].seq.expect("synced above");
                    BatchEntry::last(seq, &self.entries_tokens[a..b])
                })
                .collect();
            let t = Instant::now();
            let stepped = self.rt.step(&entries);
            let logits = match stepped {
                Ok(out) => out,
                Err(_) => {
                    // Every sequence is as it was; these requests keep the
                    // guesses they have.
                    break;
                }
            };
            let mut next_tokens = Vec::with_capacity(self.active.len());
            let mut still = Vec::with_capacity(self.active.len());
            for (k, &i) in self.active.iter().enumerate() {
                let row = logits.last(k).expect("one row each");
                let (tok, p) = best(&row[..n_vocab.min(row.len())]);
                let r = &mut reqs[i];
                if p < r.p_min || tok as usize >= self.n_vocab {
                    continue;
                }
                r.out.push(tok);
                if r.out.len() < r.k {
                    next_tokens.push(tok);
                    still.push(i);
                }
            }
            if short {
                secs += t.elapsed().as_secs_f64();
                steps += 1;
            }
            self.entries_tokens.clear();
            spans.clear();
            for &tok in &next_tokens {
                let at = self.entries_tokens.len();
                self.entries_tokens.push(tok);
                spans.push((at, at + 1));
            }
            self.active = still;
        }
        (secs, steps)
    }

    /// Feeds every `(sequence, tokens)` pair's sequence up to all of its
    /// tokens, in one draft step, computing no logits: the draft reads a
    /// prompt chunk by chunk beside the model, so that its first guesses
    /// need only the token sampled last. A pair whose sequence cannot be
    /// fed loses it (drafting later starts it over).
    pub(crate) fn feed(&mut self, pairs: &mut [(&mut Option<SeqId>, &[u32])]) {
        self.entries_tokens.clear();
        let mut spans = Vec::with_capacity(pairs.len());
        for (k, (seq, tokens)) in pairs.iter_mut().enumerate() {
            if tokens.is_empty() {
                continue;
            }
            let from = match self.sync_all(seq, tokens) {
                Ok(from) => from,
                Err(_) => {
                    if let Some(s) = seq.take() {
                        let _ = self.rt.remove(s);
                    }
                    continue;
                }
            };
            if from < tokens.len() {
                let at = self.entries_tokens.len();
                self.entries_tokens.extend_from_slice(&tokens[from..]);
                spans.push((k, at, self.entries_tokens.len()));
            }
        }
        if spans.is_empty() {
            return;
        }
        let entries: Vec<BatchEntry> = spans
            .iter()
            .filter_map(|&(k, a, b)| {
                let seq = (*pairs[k].0)?;
                Some(BatchEntry::none(seq, &self.entries_tokens[a..b]))
            })
            .collect();
        if self.rt.step(&entries).is_err() {
            // Every sequence is as it was: drafting catches up later.
        }
    }

    /// As [`sync`](Self::sync), but `seq` may hold all of `tokens`.
    fn sync_all(&mut self, seq: &mut Option<SeqId>, tokens: &[u32]) -> Result<usize> {
        if let Some(s) = *seq {
            if let Ok(h) = self.rt.history(s) {
                let common = h.iter().zip(tokens).take_while(|(a, b)| a == b).count();
                self.rt.rollback(s, common as u32)?;
                return Ok(common);
            }
            *seq = None;
        }
        let (s, reused) = self.rt.new_sequence_for(tokens)?;
        *seq = Some(s);
        Ok(reused)
    }

    /// Makes `seq` hold a beginning of `tokens` that leaves at least the
    /// last token to evaluate; returns where the tokens to feed start.
    fn sync(&mut self, seq: &mut Option<SeqId>, tokens: &[u32]) -> Result<usize> {
        let keep_max = tokens.len() - 1;
        if let Some(s) = *seq {
            match self.rt.history(s) {
                Ok(h) => {
                    let common = h.iter().zip(tokens).take_while(|(a, b)| a == b).count();
                    let keep = common.min(keep_max);
                    self.rt.rollback(s, keep as u32)?;
                    return Ok(keep);
                }
                // Evicted or otherwise gone: start over.
                Err(_) => *seq = None,
            }
        }
        let (s, reused) = self.rt.new_sequence_for(tokens)?;
        *seq = Some(s);
        Ok(reused.min(keep_max))
    }
}

/// The most likely token of `logits` (the lowest id among equals) and its
/// softmax probability.
fn best(logits: &[f32]) -> (u32, f32) {
    let mut arg = 0usize;
    let mut max = f32::NEG_INFINITY;
    for (i, &l) in logits.iter().enumerate() {
        if l > max {
            max = l;
            arg = i;
        }
    }
    if !max.is_finite() {
        return (arg as u32, 0.0);
    }
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    (arg as u32, 1.0 / sum)
}

/// Checks that a draft's guesses mean the same tokens to the target.
fn check_vocab(draft: &Tokenizer, target: &Tokenizer) -> Result<()> {
    let (nd, nt) = (draft.n_vocab(), target.n_vocab());
    let bad = |what: String| {
        Err(EngineError::InvalidArgument(format!(
            "the draft model cannot draft for this model: {what}"
        )))
    };
    if nd.abs_diff(nt) > MAX_VOCAB_DIFFERENCE {
        return bad(format!(
            "its vocabulary has {nd} tokens, the model's {nt} (they must be the same vocabulary)"
        ));
    }
    if draft.model_name() != target.model_name() {
        return bad(format!(
            "its tokenizer is {}, the model's {}",
            draft.model_name(),
            target.model_name()
        ));
    }
    for id in 0..nd.min(nt) as u32 {
        if draft.token_text(id) != target.token_text(id) {
            return bad(format!(
                "token {id} is {:?} there and {:?} here",
                draft.token_text(id),
                target.token_text(id)
            ));
        }
    }
    if draft.bos() != target.bos() || draft.eos() != target.eos() {
        return bad(format!(
            "its beginning/end tokens are {:?}/{:?}, the model's {:?}/{:?}",
            draft.bos(),
            draft.eos(),
            target.bos(),
            target.eos()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::best;

    #[test]
    fn best_is_the_argmax_with_its_probability() {
        let (t, p) = best(&[0.0, 2.0, 2.0, -1.0]);
        assert_eq!(t, 1);
        let z = 1.0 + 2.0 * 2f32.exp() + (-1f32).exp();
        assert!((p - 2f32.exp() / z).abs() < 1e-6);
        assert_eq!(best(&[f32::NEG_INFINITY; 3]).1, 0.0);
    }
}
