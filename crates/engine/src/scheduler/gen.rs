//! One generation of the scheduler: where it stands and how it samples.

use std::collections::VecDeque;
use std::time::Instant;

use minfer_text::Tokenizer;

use super::spec_state::GenSpec;
use super::types::{Event, GenId};
use crate::error::{EngineError, Result};
use crate::generate::{Gate, Next, StopReason, TokenLogprobs};
use crate::runtime::SeqId;

/// Bytes a new text event's buffer starts with.
const TEXT_CAPACITY: usize = 64;

/// Where a generation stands.
#[derive(Debug)]
pub(super) enum Phase {
    /// Prompt tokens `fed..` are still to be evaluated.
    Prefill { fed: usize },
    /// The first token is drawn from logits saved earlier (no forward).
    Sample { logits: Vec<f32> },
    /// `next` was sampled and must be evaluated to continue.
    Decode { next: u32 },
    /// Waits for `leader` to prefill the shared prompt; then its sequence
    /// is forked and this generation draws from the same logits.
    Follow { leader: GenId },
    /// Over; the events hold the rest.
    Done,
}

#[derive(Debug)]
pub(super) struct Gen {
    pub(super) id: GenId,
    pub(super) seq: SeqId,
    /// Whether the sequence is released when the generation ends.
    pub(super) owns_seq: bool,
    pub(super) prompt: Vec<u32>,
    /// Prompt tokens that were already in the cache (prefix reuse).
    pub(super) reused: usize,
    pub(super) phase: Phase,
    pub(super) gate: Gate,
    pub(super) events: VecDeque<Event>,
    pub(super) builds_before: u64,
    pub(super) t_submit: Instant,
    pub(super) t_first: Option<Instant>,
    /// Alternatives per prompt token to report, when the prompt's own
    /// log-probabilities are wanted.
    pub(super) score_prompt: Option<u8>,
    /// The prompt's log-probabilities gathered so far.
    pub(super) prompt_scores: Vec<TokenLogprobs>,
    /// Speculation state (guesses, acceptance, the draft sequence).
    pub(super) spec: GenSpec,
}

impl Gen {
    /// Scores prompt rows `range` from their logits `rows`: row `j` gives
    /// the log-probability of the prompt token after it.
    pub(super) fn score_rows(
        &mut self,
        range: std::ops::Range<usize>,
        rows: &[f32],
        top: u8,
        n_vocab: usize,
    ) {
        for (j, row) in rows.chunks_exact(n_vocab).enumerate() {
            let Some(&next) = self.prompt.get(range.start + j + 1) else {
                break;
            };
            let mut alts = Vec::with_capacity(usize::from(top));
            let logprob = crate::generate::logprobs_of(row, next, usize::from(top), &mut alts);
            self.prompt_scores.push(TokenLogprobs {
                token: next,
                logprob,
                top: alts,
            });
        }
    }

    /// Samples from `logits` and runs the gates; returns the reason when the
    /// generation ends. The logits its first token is drawn from are kept
    /// in the stash for a caller-owned sequence (see
    /// [`Scheduler::prompt_logits`]).
    pub(super) fn advance(
        &mut self,
        logits: &[f32],
        tok: &Tokenizer,
        n_ctx: u32,
        stash: &mut Stash,
    ) -> Result<Option<StopReason>> {
        if self.t_first.is_none() {
            self.t_first = Some(Instant::now());
            if !self.owns_seq {
                save_logits(&mut stash.saved, self.seq, self.gate.history(), logits);
            }
        }
        // Every token the gate has seen is in the cache: the next one would
        // be written at this position.
        let n_past = self.gate.history_len() as u32;
        let events = &mut self.events;
        let before = events.len();
        let spare = &mut stash.text;
        let mut emit = |b: &[u8]| {
            // Room for any token's text, so that a recycled buffer rarely
            // has to grow.
            let mut text = spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(TEXT_CAPACITY));
            text.extend_from_slice(b);
            events.push_back(Event::Text(text));
            true
        };
        let next = self.gate.advance(logits, tok, n_past, n_ctx, &mut emit)?;
        if let Some(lp) = self.gate.take_logprobs() {
            self.events.insert(before, Event::Logprobs(lp));
        }
        match next {
            Next::Eval(t) => {
                self.phase = Phase::Decode { next: t };
                Ok(None)
            }
            Next::Stop(reason) => Ok(Some(reason)),
        }
    }
}

/// What the sampling of one step decided: the generations that ended (by
/// index, in increasing order) and the first error.
#[derive(Debug, Default)]
pub(super) struct Outcomes {
    pub(super) ended: Vec<(usize, StopReason)>,
    pub(super) failure: Option<EngineError>,
}

impl Outcomes {
    /// Records what [`Gen::advance`] returned for generation `i`; a failed
    /// generation ends as cancelled.
    pub(super) fn record(&mut self, i: usize, r: Result<Option<StopReason>>) {
        match r {
            Ok(None) => {}
            Ok(Some(reason)) => self.ended.push((i, reason)),
            Err(e) => {
                self.ended.push((i, StopReason::Cancelled));
                self.failure.get_or_insert(e);
            }
        }
    }
}

/// What the scheduler keeps for its generations between steps.
#[derive(Debug, Default)]
pub(super) struct Stash {
    /// The logits that followed caller-owned sequences.
    pub(super) saved: Vec<SavedLogits>,
    /// Emptied buffers of [`Event::Text`] events handed back with
    /// [`Scheduler::recycle`](super::Scheduler::recycle), for later text.
    pub(super) text: Vec<Vec<u8>>,
}

/// The logits that followed a caller-owned sequence's tokens, kept so that
/// a new answer from the same point needs no forward pass.
#[derive(Debug)]
pub(super) struct SavedLogits {
    pub(super) seq: SeqId,
    pub(super) tokens: Vec<u32>,
    pub(super) logits: Vec<f32>,
}

/// Records `logits` as what follows `tokens` on `seq`, replacing (and
/// reusing the buffers of) the sequence's earlier record.
pub(super) fn save_logits(
    saved: &mut Vec<SavedLogits>,
    seq: SeqId,
    tokens: &[u32],
    logits: &[f32],
) {
    let entry = match saved.iter_mut().position(|s| s.seq == seq) {
        Some(i) => &mut saved[i],
        None => {
            saved.push(SavedLogits {
                seq,
                tokens: Vec::new(),
                logits: Vec::new(),
            });
            saved.last_mut().expect("just pushed")
        }
    };
    entry.tokens.clear();
    entry.tokens.extend_from_slice(tokens);
    entry.logits.clear();
    entry.logits.extend_from_slice(logits);
}
