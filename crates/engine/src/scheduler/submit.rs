//! Starting generations and reading their events.

use std::collections::VecDeque;
use std::time::Instant;

use minfer_text::Tokenizer;

use super::gen::{Gen, Phase, Stash};
use super::spec_state::SpecState;
use super::state::Scheduler;
use super::step_plan::StepPlan;
use super::types::{Event, GenId, GenProgress, GenTimes, DEFAULT_CHUNK, MAX_SPARE_TEXT};
use crate::error::{EngineError, Result};
use crate::generate::{Gate, GenerateConfig, StopReason};
use crate::runtime::{Runtime, SeqId};
use crate::vocab::SharedVocab;

impl Scheduler {
    /// A scheduler over `rt`, with `tok` deciding the end-of-generation
    /// tokens and the bytes of each token.
    pub fn new(rt: Runtime, tok: Tokenizer) -> Scheduler {
        Scheduler {
            rt,
            tok,
            gens: Vec::new(),
            next_id: 1,
            chunk: DEFAULT_CHUNK,
            stash: Stash::default(),
            vocab: SharedVocab::default(),
            spec: SpecState::default(),
            plan: StepPlan::default(),
            masks: None,
        }
    }

    /// A gate for `cfg`, with the sampler vocabulary when it needs one.
    fn gate(&mut self, cfg: &GenerateConfig, before: &[u32], prompt: &[u32]) -> Result<Gate> {
        let vocab = if crate::vocab::needs_vocab(cfg) {
            Some(self.vocab.get(&self.tok)?)
        } else {
            None
        };
        Gate::new(cfg, vocab.as_ref(), before, prompt, self.rt.n_ctx())
    }

    /// Uses `vocab`, the sampler vocabulary of the model `tok` belongs to,
    /// instead of building one of its own.
    pub(crate) fn with_vocab(mut self, vocab: SharedVocab) -> Scheduler {
        self.vocab = vocab;
        self
    }

    /// Sets the prompt chunk (at least 1): how many prompt tokens of one
    /// generation a step evaluates.
    pub fn set_chunk(&mut self, chunk: usize) {
        self.chunk = chunk.max(1);
    }

    /// The runtime underneath.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The runtime underneath, for sequence operations between steps.
    pub fn runtime_mut(&mut self) -> &mut Runtime {
        &mut self.rt
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tok
    }

    /// Generations that have not finished.
    pub fn active(&self) -> usize {
        self.gens
            .iter()
            .filter(|g| !matches!(g.phase, Phase::Done))
            .count()
    }

    /// Starts generating a continuation of `prompt` on a new sequence. The
    /// longest beginning of the prompt that the cache already holds (from
    /// a live or a finished sequence) is shared, not recomputed.
    ///
    /// # Errors
    /// [`EngineError::EmptyBatch`] for an empty prompt;
    /// [`EngineError::ContextFull`] when the prompt does not fit in
    /// `n_ctx`; [`EngineError::InvalidArgument`] for a bad sampler
    /// configuration; [`EngineError::TooManySequences`].
    pub fn submit(&mut self, prompt: &[u32], cfg: &GenerateConfig) -> Result<GenId> {
        self.check_prompt(0, prompt)?;
        let gate = self.gate(cfg, &[], prompt)?;
        let (seq, reused) = self.rt.new_sequence_for(prompt)?;
        Ok(self.push(seq, true, prompt, reused, gate))
    }

    /// Starts one generation per configuration, all continuing `prompt`:
    /// the prompt is prefilled once, by the first, and its sequence is then
    /// forked for the others (the cells are shared, not copied), each of
    /// which draws its first token from the same logits with its own
    /// sampler. Each generation's output is what it would be alone.
    ///
    /// # Errors
    /// As [`submit`](Scheduler::submit); [`EngineError::EmptyBatch`] for no
    /// configuration. A fork that finds no free sequence later ends that
    /// generation with [`StopReason::CacheFull`].
    pub fn submit_n(&mut self, prompt: &[u32], cfgs: &[GenerateConfig]) -> Result<Vec<GenId>> {
        self.submit_group(prompt, cfgs, None)
    }

    /// As [`submit_n`](Scheduler::submit_n), and the first generation also
    /// reports the log-probability of every prompt token after the first,
    /// with `top` alternatives each ([`Event::PromptLogprobs`]). Its prompt
    /// is evaluated whole, with no prefix reuse, since every row's logits
    /// are needed.
    ///
    /// # Errors
    /// As [`submit_n`](Scheduler::submit_n); [`EngineError::InvalidArgument`]
    /// for more than [`MAX_TOP_LOGPROBS`](crate::MAX_TOP_LOGPROBS)
    /// alternatives.
    pub fn submit_scored(
        &mut self,
        prompt: &[u32],
        cfgs: &[GenerateConfig],
        top: u8,
    ) -> Result<Vec<GenId>> {
        if top > crate::MAX_TOP_LOGPROBS {
            return Err(EngineError::InvalidArgument(format!(
                "at most {} alternatives per prompt token, not {top}",
                crate::MAX_TOP_LOGPROBS
            )));
        }
        self.submit_group(prompt, cfgs, Some(top))
    }

    fn submit_group(
        &mut self,
        prompt: &[u32],
        cfgs: &[GenerateConfig],
        score: Option<u8>,
    ) -> Result<Vec<GenId>> {
        let Some((first, rest)) = cfgs.split_first() else {
            return Err(EngineError::EmptyBatch);
        };
        self.check_prompt(0, prompt)?;
        let mut gates = Vec::with_capacity(rest.len());
        for cfg in rest {
            gates.push(self.gate(cfg, &[], prompt)?);
        }
        let leader = match score {
            None => self.submit(prompt, first)?,
            Some(_) => {
                let gate = self.gate(first, &[], prompt)?;
                let seq = self.rt.new_sequence()?;
                let id = self.push(seq, true, prompt, 0, gate);
                if let Some(g) = self.gens.last_mut() {
                    g.score_prompt = score;
                }
                id
            }
        };
        let seq = self.sequence(leader).expect("just submitted");
        let mut ids = vec![leader];
        for gate in gates {
            // Not the follower's sequence until the fork: it must not
            // release it.
            let id = self.push(seq, false, prompt, prompt.len(), gate);
            if let Some(g) = self.gens.last_mut() {
                g.phase = Phase::Follow { leader };
            }
            ids.push(id);
        }
        Ok(ids)
    }

    /// Starts generating on `seq`, a sequence the caller keeps: `prompt`
    /// is appended to what it holds, and when the generation ends the
    /// sequence holds the prompt and the generated tokens that were
    /// evaluated (a conversation continues from there).
    ///
    /// # Errors
    /// As [`submit`](Scheduler::submit), and
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// when a generation is already running on `seq`.
    pub fn submit_on(&mut self, seq: SeqId, prompt: &[u32], cfg: &GenerateConfig) -> Result<GenId> {
        let before = self.rt.history(seq)?;
        self.check_prompt(before.len(), prompt)?;
        self.check_idle(seq)?;
        let before = self.rt.history(seq)?.to_vec();
        let gate = self.gate(cfg, &before, prompt)?;
        Ok(self.push(seq, false, prompt, 0, gate))
    }

    /// The logits that followed exactly `tokens` on `seq`, when the last
    /// generation on that caller-owned sequence drew its first token from
    /// them. Logits depend only on the tokens (batch invariance), so they
    /// are valid whenever the sequence holds `tokens` again.
    pub fn prompt_logits(&self, seq: SeqId, tokens: &[u32]) -> Option<&[f32]> {
        self.stash
            .saved
            .iter()
            .find(|s| s.seq == seq && s.tokens == tokens)
            .map(|s| s.logits.as_slice())
    }

    /// Starts generating on `seq` (which the caller keeps) from `logits`,
    /// the logits that follow what the sequence holds (as
    /// [`prompt_logits`](Scheduler::prompt_logits) gives them): the first
    /// token is drawn without any forward pass, so answering again from
    /// the same point costs no prefill.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// for logits of the wrong width, an empty sequence, or a generation
    /// already running on `seq`; a bad sampler configuration.
    pub fn submit_sampled(
        &mut self,
        seq: SeqId,
        logits: Vec<f32>,
        cfg: &GenerateConfig,
    ) -> Result<GenId> {
        let before = self.rt.history(seq)?;
        if logits.len() != self.rt.n_vocab() || before.is_empty() {
            return Err(EngineError::InvalidArgument(format!(
                "{} logits for a vocabulary of {} after {} tokens",
                logits.len(),
                self.rt.n_vocab(),
                before.len()
            )));
        }
        self.check_idle(seq)?;
        let before = self.rt.history(seq)?.to_vec();
        let gate = self.gate(cfg, &before, &[])?;
        let id = self.push(seq, false, &[], 0, gate);
        if let Some(g) = self.gens.last_mut() {
            g.phase = Phase::Sample { logits };
        }
        Ok(id)
    }

    /// Refuses a second generation on a caller's sequence.
    fn check_idle(&self, seq: SeqId) -> Result<()> {
        if self
            .gens
            .iter()
            .any(|g| g.seq == seq && !matches!(g.phase, Phase::Done))
        {
            return Err(EngineError::InvalidArgument(format!(
                "a generation is already running on {seq}"
            )));
        }
        Ok(())
    }

    fn check_prompt(&self, before: usize, prompt: &[u32]) -> Result<()> {
        if prompt.is_empty() {
            return Err(EngineError::EmptyBatch);
        }
        let n_ctx = self.rt.n_ctx();
        if before + prompt.len() > n_ctx as usize {
            return Err(EngineError::ContextFull { n_ctx });
        }
        let n_vocab = self.rt.n_vocab();
        if let Some(&token) = prompt.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(EngineError::TokenOutOfRange { token, n_vocab });
        }
        Ok(())
    }

    fn push(&mut self, seq: SeqId, owns: bool, prompt: &[u32], reused: usize, gate: Gate) -> GenId {
        let id = GenId(self.next_id);
        self.next_id += 1;
        self.gens.push(Gen {
            id,
            seq,
            owns_seq: owns,
            prompt: prompt.to_vec(),
            reused,
            phase: Phase::Prefill { fed: reused },
            gate,
            events: VecDeque::new(),
            builds_before: self.rt.graph_builds(),
            t_submit: Instant::now(),
            t_first: None,
            score_prompt: None,
            prompt_scores: Vec::new(),
            spec: Default::default(),
        });
        id
    }

    /// The sequence a generation runs on.
    pub fn sequence(&self, id: GenId) -> Option<SeqId> {
        self.gens.iter().find(|g| g.id == id).map(|g| g.seq)
    }

    /// Stops a generation now: it ends with [`StopReason::Cancelled`], its
    /// cells are released at once (or left to the owner of its sequence),
    /// and a final [`Event::Done`] is queued. Does nothing for an unknown
    /// or finished generation.
    pub fn cancel(&mut self, id: GenId) {
        if let Some(i) = self.gens.iter().position(|g| g.id == id) {
            if !matches!(self.gens[i].phase, Phase::Done) {
                self.finish(i, StopReason::Cancelled);
            }
        }
    }

    /// The next event of a generation, `None` when there is none yet (or
    /// the generation is unknown). After [`Event::Done`] the generation is
    /// forgotten.
    pub fn next_event(&mut self, id: GenId) -> Option<Event> {
        let i = self.gens.iter().position(|g| g.id == id)?;
        let ev = self.gens[i].events.pop_front();
        if matches!(ev, Some(Event::Done(_))) {
            self.gens.remove(i);
        }
        ev
    }

    /// Hands back an event read with [`next_event`](Scheduler::next_event),
    /// so that its buffer carries the text of a later [`Event::Text`]: a
    /// caller that hands back every text event makes warm decode steps
    /// allocation-free. Other events are simply dropped.
    pub fn recycle(&mut self, event: Event) {
        if let Event::Text(mut text) = event {
            if self.stash.text.len() < MAX_SPARE_TEXT {
                text.clear();
                self.stash.text.push(text);
            }
        }
    }

    /// Prefix reuse and latency of a generation, available once it has
    /// produced its first token (and until its `Done` event is read).
    pub fn times(&self, id: GenId) -> Option<GenTimes> {
        let g = self.gens.iter().find(|g| g.id == id)?;
        Some(GenTimes {
            reused_tokens: g.reused,
            first_token_secs: g.t_first?.duration_since(g.t_submit).as_secs_f64(),
        })
    }

    /// Where a generation stands now: how much of its prompt is in the
    /// cache, how many tokens it has generated, and the time each part
    /// took so far (until its `Done` event is read). For progress reports
    /// while a long prompt is evaluated, and running rates.
    pub fn progress(&self, id: GenId) -> Option<GenProgress> {
        let g = self.gens.iter().find(|g| g.id == id)?;
        let evaluated = match g.phase {
            Phase::Prefill { fed } => fed,
            Phase::Follow { .. } => g.reused,
            Phase::Sample { .. } | Phase::Decode { .. } | Phase::Done => g.prompt.len(),
        };
        let now = Instant::now();
        let first = g.t_first.unwrap_or(now);
        Some(GenProgress {
            prompt_tokens: g.prompt.len(),
            reused_tokens: g.reused,
            evaluated_tokens: evaluated,
            generated_tokens: match (&g.phase, g.events.back()) {
                // The tokens went into the stats.
                (Phase::Done, Some(Event::Done(stats))) => stats.generated_tokens,
                _ => g.gate.tokens.len(),
            },
            prefill_secs: first.duration_since(g.t_submit).as_secs_f64(),
            decode_secs: now.duration_since(first).as_secs_f64(),
        })
    }
}
