//! [`ChatSession`]: a conversation on one sequence of a [`Scheduler`],
//! kept in step with its KV cache.
//!
//! Every turn renders the whole conversation with the model's chat
//! template and tokenizes it; the sequence already holds the previous
//! rendering (and the answer the model generated), so only the tokens
//! past their common beginning are evaluated ([`delta::plan`]). Where the
//! two differ before the end of the cache (a template that rewrites
//! earlier text, or an answer whose tokens are not the text's own
//! tokenization), the sequence is rolled back to the first difference and
//! evaluated from there: the cache is never left holding something the
//! template would not render.

use std::path::Path;

use minfer_text::ChatMessage;

use super::delta::{self, Delta};
use super::file::{self, ModelIdentity, SessionData};
use super::identity::model_identity;
use crate::error::{EngineError, Result};
use crate::generate::{rate, GenerateConfig, GenerationStats, StopReason};
use crate::load::LoadedModel;
use crate::runtime::{BatchEntry, SeqId};
use crate::scheduler::{Event, GenId, Scheduler};

/// How a turn's generation was started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnStart {
    /// The generation to step and read events from.
    pub id: GenId,
    /// Tokens evaluated before the answer (the delta).
    pub prefill_tokens: usize,
    /// Cached tokens kept from before the turn.
    pub kept_tokens: usize,
    /// Where the cache stopped matching the new rendering, when it did
    /// before its end (the turn re-evaluated from there).
    pub mismatch_at: Option<usize>,
    /// Oldest exchanges dropped to make room (context shift).
    pub dropped_exchanges: usize,
}

/// Counters and timings of a finished turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnStats {
    /// How the turn started.
    pub start: TurnStart,
    /// Tokens the model generated.
    pub generated_tokens: usize,
    /// Seconds from the start of the turn to its first sampled token.
    pub first_token_secs: f64,
    /// Seconds of the prefill.
    pub prefill_secs: f64,
    /// Seconds of the decoding.
    pub decode_secs: f64,
    /// Why the answer ended.
    pub stop_reason: StopReason,
    /// Whether the template's end-of-turn token was written into the cache
    /// after the answer.
    pub eog_written: bool,
    /// Speculation counters of the turn (zero without speculation).
    pub spec: crate::spec::SpecStats,
}

impl TurnStats {
    /// Prefill rate, tokens per second.
    pub fn prefill_rate(&self) -> f64 {
        rate(self.start.prefill_tokens, self.prefill_secs)
    }

    /// Decode rate, tokens per second.
    pub fn decode_rate(&self) -> f64 {
        rate(self.generated_tokens, self.decode_secs)
    }
}

/// What `/stats` shows.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatStats {
    /// Tokens the conversation's sequence holds.
    pub tokens_in_context: u32,
    /// Cells in use in the runtime (all sequences).
    pub cells_used: usize,
    /// The context window.
    pub n_ctx: u32,
    /// Graphs built by the runtime so far.
    pub graph_builds: u64,
    /// Steps that reused a built graph.
    pub graph_reuses: u64,
    /// The last finished turn.
    pub last_turn: Option<TurnStats>,
    /// Messages in the conversation (the system prompt included).
    pub messages: usize,
    /// Speculation counters of the scheduler's finished generations, when
    /// it speculates.
    pub spec: Option<crate::spec::SpecStats>,
}

/// A multi-turn conversation on one sequence of a scheduler.
#[derive(Debug)]
pub struct ChatSession {
    seq: SeqId,
    messages: Vec<ChatMessage>,
    gen: GenerateConfig,
    running: Option<TurnStart>,
    last: Option<TurnStats>,
    identity: Option<ModelIdentity>,
    /// Answers started so far; each one samples with the configured seed
    /// plus this count.
    turns: u64,
}

impl ChatSession {
    /// A new conversation (with a system prompt when `system` is given) on
    /// a new sequence of `sched`.
    ///
    /// # Errors
    /// [`EngineError::NoTemplate`] when the model has no chat template;
    /// [`EngineError::TooManySequences`].
    pub fn new(
        model: &LoadedModel,
        sched: &mut Scheduler,
        system: Option<&str>,
        gen: GenerateConfig,
    ) -> Result<ChatSession> {
        if model.template().is_none() {
            return Err(EngineError::NoTemplate);
        }
        let seq = sched.runtime_mut().new_sequence()?;
        let messages = system
            .map(|s| vec![ChatMessage::new("system", s)])
            .unwrap_or_default();
        Ok(ChatSession {
            seq,
            messages,
            gen,
            running: None,
            last: None,
            identity: None,
            turns: 0,
        })
    }

    /// The conversation's sequence.
    pub fn sequence(&self) -> SeqId {
        self.seq
    }

    /// The messages, the system prompt first when there is one.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// The generation settings of every turn.
    pub fn config(&self) -> &GenerateConfig {
        &self.gen
    }

    /// The last finished turn.
    pub fn last_turn(&self) -> Option<&TurnStats> {
        self.last.as_ref()
    }

    /// Starts a turn: `user` is added to the conversation and the answer's
    /// generation is submitted. Step the scheduler and read the events of
    /// [`TurnStart::id`], then call [`finish`](ChatSession::finish) (or use
    /// [`complete`](ChatSession::complete), which does both).
    ///
    /// When the conversation would not leave room for an answer, its
    /// oldest exchanges are dropped (never the system prompt).
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] while a turn is running;
    /// [`EngineError::Template`]; [`EngineError::PromptTooLong`] when even
    /// the system prompt and this message alone do not fit. The
    /// conversation is unchanged on error.
    pub fn send(
        &mut self,
        model: &LoadedModel,
        sched: &mut Scheduler,
        user: &str,
    ) -> Result<TurnStart> {
        let mut msgs = self.messages.clone();
        msgs.push(ChatMessage::new("user", user));
        self.start(model, sched, msgs)
    }

    /// Samples the last answer again: the cursor goes back to the start of
    /// that answer (only the prompt's last token is evaluated again, for
    /// its logits) and a new answer replaces the old one.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] when there is no answer to
    /// regenerate or a turn is running; as [`send`](ChatSession::send).
    pub fn regen(&mut self, model: &LoadedModel, sched: &mut Scheduler) -> Result<TurnStart> {
        if self.messages.last().is_none_or(|m| m.role != "assistant") {
            return Err(EngineError::InvalidArgument(
                "there is no answer to regenerate".into(),
            ));
        }
        let msgs = self.messages[..self.messages.len() - 1].to_vec();
        self.start(model, sched, msgs)
    }

    fn start(
        &mut self,
        model: &LoadedModel,
        sched: &mut Scheduler,
        mut msgs: Vec<ChatMessage>,
    ) -> Result<TurnStart> {
        if self.running.is_some() {
            return Err(EngineError::InvalidArgument(
                "a turn is already running".into(),
            ));
        }
        let n_ctx = sched.runtime().n_ctx() as usize;
        let reserve = if self.gen.max_tokens > 0 {
            self.gen.max_tokens.min(n_ctx / 2)
        } else {
            n_ctx / 4
        };
        let (tokens, dropped) = fit(model, &mut msgs, n_ctx, reserve)?;
        // A new seed per answer: with sampling on, /regen draws another
        // answer, and the sequence of answers is still reproducible.
        let mut gen = self.gen.clone();
        gen.sampler.seed = gen.sampler.seed.wrapping_add(self.turns);
        let cached = sched.runtime().history(self.seq)?;
        let whole_cached = cached.len() >= tokens.len() && cached[..tokens.len()] == tokens[..];
        let saved = whole_cached
            .then(|| sched.prompt_logits(self.seq, &tokens).map(<[f32]>::to_vec))
            .flatten();
        let (id, keep, feed, mismatch_at) = if let Some(logits) = saved {
            // The cache holds the whole rendering and the logits that
            // followed it are known (a /regen): answer again with no
            // forward pass at all.
            sched
                .runtime_mut()
                .rollback(self.seq, tokens.len() as u32)?;
            let id = sched.submit_sampled(self.seq, logits, &gen)?;
            (id, tokens.len(), Vec::new(), None)
        } else {
            let rt = sched.runtime_mut();
            let Delta {
                keep,
                feed,
                mismatch_at,
            } = delta::plan(rt.history(self.seq)?, &tokens);
            rt.rollback(self.seq, keep as u32)?;
            let id = sched.submit_on(self.seq, &feed, &gen)?;
            (id, keep, feed, mismatch_at)
        };
        self.turns += 1;
        self.messages = msgs;
        let start = TurnStart {
            id,
            prefill_tokens: feed.len(),
            kept_tokens: keep,
            mismatch_at,
            dropped_exchanges: dropped,
        };
        self.running = Some(start.clone());
        Ok(start)
    }

    /// Ends the running turn: `answer` (the text shown) becomes the
    /// assistant's message, and when the template renders an
    /// end-of-generation token right after what the cache holds, that
    /// token is evaluated into the cache, so the next turn starts from
    /// exactly what the template renders.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] when no turn is running; errors of
    /// the step that writes the end token.
    pub fn finish(
        &mut self,
        model: &LoadedModel,
        sched: &mut Scheduler,
        answer: &str,
        stats: &GenerationStats,
        first_token_secs: f64,
    ) -> Result<&TurnStats> {
        let start = self
            .running
            .take()
            .ok_or_else(|| EngineError::InvalidArgument("no turn is running".into()))?;
        self.messages.push(ChatMessage::new("assistant", answer));
        let eog_written = self.write_end_token(model, sched)?;
        Ok(self.last.insert(TurnStats {
            start,
            generated_tokens: stats.generated_tokens,
            first_token_secs,
            prefill_secs: stats.prefill_secs,
            decode_secs: stats.decode_secs,
            stop_reason: stats.stop_reason,
            eog_written,
            spec: stats.spec,
        }))
    }

    fn write_end_token(&mut self, model: &LoadedModel, sched: &mut Scheduler) -> Result<bool> {
        let full = model.tokenize(&model.render_chat(&self.messages, false)?);
        let rt = sched.runtime_mut();
        let history = rt.history(self.seq)?;
        let n = history.len();
        let next = match full.get(n) {
            Some(&t) if full[..n] == *history && model.tokenizer().is_eog(t) => t,
            _ => return Ok(false),
        };
        if n + 1 > rt.n_ctx() as usize || rt.room() == 0 {
            return Ok(false);
        }
        rt.step(&[BatchEntry::none(self.seq, &[next])])?;
        Ok(true)
    }

    /// Runs a started turn to its end: steps the scheduler, passes the
    /// answer's bytes to `on_text` (returning `false` stops the answer),
    /// asks `keep_going` before every step (returning `false` stops it
    /// too; the answer is kept as it stands), then
    /// [`finish`](ChatSession::finish)es the turn.
    ///
    /// # Errors
    /// Errors of the scheduler's steps (the partial answer is kept) and of
    /// [`finish`](ChatSession::finish).
    pub fn complete(
        &mut self,
        model: &LoadedModel,
        sched: &mut Scheduler,
        mut on_text: impl FnMut(&[u8]) -> bool,
        mut keep_going: impl FnMut() -> bool,
    ) -> Result<TurnStats> {
        let id = self
            .running
            .as_ref()
            .map(|s| s.id)
            .ok_or_else(|| EngineError::InvalidArgument("no turn is running".into()))?;
        let mut answer = Vec::new();
        let mut first_token_secs = None;
        let mut failure = None;
        let stats = 'turn: loop {
            if !keep_going() {
                sched.cancel(id);
            }
            if let Err(e) = sched.step() {
                failure.get_or_insert(e);
            }
            if first_token_secs.is_none() {
                first_token_secs = sched.times(id).map(|t| t.first_token_secs);
            }
            while let Some(ev) = sched.next_event(id) {
                match ev {
                    Event::Text(b) => {
                        answer.extend_from_slice(&b);
                        if !on_text(&b) {
                            sched.cancel(id);
                        }
                        sched.recycle(Event::Text(b));
                    }
                    Event::Logprobs(_) | Event::PromptLogprobs(_) => {}
                    Event::Done(stats) => break 'turn stats,
                }
            }
            if failure.is_some() {
                // The scheduler ends a failed step's generations; their Done
                // event is queued, so this is reached only if it was not.
                sched.cancel(id);
            }
        };
        let text = String::from_utf8_lossy(&answer).into_owned();
        let first = first_token_secs.unwrap_or(stats.prefill_secs);
        let turn = self.finish(model, sched, &text, &stats, first)?.clone();
        match failure {
            Some(e) => Err(e),
            None => Ok(turn),
        }
    }

    /// Drops the last exchange (the last user message and the answer after
    /// it); returns `false` when there is none. The cache is rolled back
    /// to what the remaining conversation renders.
    ///
    /// # Errors
    /// As [`clear`](ChatSession::clear).
    pub fn undo(&mut self, model: &LoadedModel, sched: &mut Scheduler) -> Result<bool> {
        self.check_idle()?;
        let Some(i) = self.messages.iter().rposition(|m| m.role == "user") else {
            return Ok(false);
        };
        self.messages.truncate(i);
        self.sync_cache(model, sched)?;
        Ok(true)
    }

    /// Forgets every message but the system prompt, whose cells are kept.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] while a turn is running; errors of
    /// the rollback.
    pub fn clear(&mut self, model: &LoadedModel, sched: &mut Scheduler) -> Result<()> {
        self.check_idle()?;
        self.messages.retain(|m| m.role == "system");
        self.sync_cache(model, sched)
    }

    /// Sets (or replaces) the system prompt; the cache is rolled back to
    /// where the conversation changed, and the next turn evaluates the
    /// rest.
    ///
    /// # Errors
    /// As [`clear`](ChatSession::clear).
    pub fn set_system(
        &mut self,
        model: &LoadedModel,
        sched: &mut Scheduler,
        text: &str,
    ) -> Result<()> {
        self.check_idle()?;
        match self.messages.first_mut() {
            Some(m) if m.role == "system" => m.content = text.to_string(),
            _ => self.messages.insert(0, ChatMessage::new("system", text)),
        }
        self.sync_cache(model, sched)
    }

    fn check_idle(&self) -> Result<()> {
        match self.running {
            Some(_) => Err(EngineError::InvalidArgument("a turn is running".into())),
            None => Ok(()),
        }
    }

    /// Rolls the cache back to its common beginning with the rendering of
    /// the current messages.
    fn sync_cache(&mut self, model: &LoadedModel, sched: &mut Scheduler) -> Result<()> {
        let target = match model.render_chat(&self.messages, false) {
            Ok(text) if !self.messages.is_empty() => model.tokenize(&text),
            _ => Vec::new(),
        };
        let rt = sched.runtime_mut();
        let common = rt
            .history(self.seq)?
            .iter()
            .zip(&target)
            .take_while(|(a, b)| a == b)
            .count();
        rt.rollback(self.seq, common as u32)
    }

    /// Counters for `/stats`.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] if the sequence was removed behind
    /// the session's back.
    pub fn stats(&self, sched: &Scheduler) -> Result<ChatStats> {
        let rt = sched.runtime();
        Ok(ChatStats {
            tokens_in_context: rt.n_past(self.seq)?,
            cells_used: rt.usage().used,
            n_ctx: rt.n_ctx(),
            graph_builds: rt.graph_builds(),
            graph_reuses: rt.graph_reuses(),
            last_turn: self.last.clone(),
            messages: self.messages.len(),
            spec: sched.speculation().map(|_| sched.spec_stats()),
        })
    }

    fn identity(&mut self, model: &LoadedModel) -> ModelIdentity {
        self.identity
            .get_or_insert_with(|| model_identity(model))
            .clone()
    }

    /// The conversation and its cache, as a session file holds them.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] while a turn is running; errors of
    /// [`Runtime::export_sequence`](crate::Runtime::export_sequence).
    pub fn snapshot(&mut self, model: &LoadedModel, sched: &Scheduler) -> Result<SessionData> {
        self.check_idle()?;
        Ok(SessionData {
            model: self.identity(model),
            messages: self.messages.clone(),
            turns: self.turns,
            snapshot: sched.runtime().export_sequence(self.seq)?,
        })
    }

    /// Saves the conversation and its cache to `path` (atomically).
    ///
    /// # Errors
    /// As [`snapshot`](ChatSession::snapshot); [`EngineError::Session`]
    /// when the file cannot be written (an old file is left intact).
    pub fn save(&mut self, model: &LoadedModel, sched: &Scheduler, path: &Path) -> Result<()> {
        let data = self.snapshot(model, sched)?;
        Ok(file::write(path, &data)?)
    }

    /// Replaces the conversation with the one saved in `path`. The file is
    /// checked whole first (checksum, model, KV layout); a refused file
    /// leaves the conversation and its cache untouched. Nothing is
    /// evaluated: the cache rows come from the file.
    ///
    /// # Errors
    /// [`EngineError::Session`] naming the reason a file was refused;
    /// [`EngineError::InvalidArgument`] while a turn is running.
    pub fn load(&mut self, model: &LoadedModel, sched: &mut Scheduler, path: &Path) -> Result<()> {
        self.check_idle()?;
        let ours = self.identity(model);
        let layout = sched.runtime().kv_layout();
        let data = file::read(path, &ours, &layout)?;
        self.restore(sched, data)
    }

    /// Replaces the conversation with `data` (already checked against this
    /// model). On failure the previous conversation is put back.
    ///
    /// # Errors
    /// [`EngineError::InvalidArgument`] while a turn is running; errors of
    /// [`Runtime::import_sequence`](crate::Runtime::import_sequence).
    pub fn restore(&mut self, sched: &mut Scheduler, data: SessionData) -> Result<()> {
        self.check_idle()?;
        let rt = sched.runtime_mut();
        let backup = rt.export_sequence(self.seq)?;
        rt.rollback(self.seq, 0)?;
        if let Err(e) = rt.import_sequence(self.seq, &data.snapshot) {
            rt.rollback(self.seq, 0)?;
            rt.import_sequence(self.seq, &backup)?;
            return Err(e);
        }
        self.messages = data.messages;
        self.turns = data.turns;
        self.last = None;
        Ok(())
    }
}

/// Renders and tokenizes `msgs`, dropping the oldest exchanges (never the
/// system prompt, never the last user message) while the prompt and
/// `reserve` tokens for the answer do not fit in `n_ctx`. Returns the
/// tokens and the number of exchanges dropped.
fn fit(
    model: &LoadedModel,
    msgs: &mut Vec<ChatMessage>,
    n_ctx: usize,
    reserve: usize,
) -> Result<(Vec<u32>, usize)> {
    let mut dropped = 0;
    loop {
        let tokens = model.tokenize(&model.render_chat(msgs, true)?);
        if tokens.len() + reserve <= n_ctx || !drop_oldest_exchange(msgs) {
            if tokens.len() >= n_ctx {
                return Err(EngineError::PromptTooLong {
                    tokens: tokens.len(),
                    n_ctx: n_ctx as u32,
                });
            }
            return Ok((tokens, dropped));
        }
        dropped += 1;
    }
}

/// Removes the first exchange after the system prompt: a user message and
/// everything up to the next user message. `false` when only the last
/// user message (and what follows it) is left.
fn drop_oldest_exchange(msgs: &mut Vec<ChatMessage>) -> bool {
    let Some(first) = msgs.iter().position(|m| m.role != "system") else {
        return false;
    };
    let Some(next_user) = msgs[first + 1..]
        .iter()
        .position(|m| m.role == "user")
        .map(|i| first + 1 + i)
    else {
        return false;
    };
    msgs.drain(first..next_user);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: &str) -> ChatMessage {
        ChatMessage::new(role, role)
    }

    #[test]
    fn dropping_keeps_the_system_prompt_and_the_last_user_message() {
        let mut msgs = vec![
            m("system"),
            m("user"),
            m("assistant"),
            m("user"),
            m("assistant"),
            m("user"),
        ];
        assert!(drop_oldest_exchange(&mut msgs));
        assert_eq!(msgs.len(), 4);
        assert!(drop_oldest_exchange(&mut msgs));
        assert_eq!(msgs, vec![m("system"), m("user")]);
        assert!(!drop_oldest_exchange(&mut msgs));
        let mut msgs = vec![m("user")];
        assert!(!drop_oldest_exchange(&mut msgs));
    }
}
