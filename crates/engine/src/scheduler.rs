//! Generations you pull from, and the [`Scheduler`] that steps all of them
//! together.
//!
//! A generation is a prompt being prefilled, then tokens being sampled and
//! decoded, on one sequence of the [`Runtime`]. The scheduler does not run a
//! loop of its own: every [`step`](Scheduler::step) gathers one row from
//! each decoding generation and a prefill chunk from those still reading
//! their prompt, runs them as one batch, and turns the logits into events
//! (text, then a final [`Event::Done`]) that the caller reads with
//! [`next_event`](Scheduler::next_event). Decode rows go first and prompts
//! are cut into chunks, so a long prompt never holds back the streams that
//! are already answering.
//!
//! When a generation ends, its sequence is released: the cells stay cached
//! for a later prompt with the same beginning (prefix reuse) until their
//! room is needed. A generation started on a caller's sequence
//! ([`Scheduler::submit_on`]) leaves the sequence to its owner.

mod gen;
mod masks;
mod plan;
mod read;
mod speculate;

use std::collections::VecDeque;
use std::time::Instant;

use minfer_text::Tokenizer;

use crate::error::{EngineError, Result};
use crate::generate::{Gate, GenerateConfig, GenerationStats, StopReason, TokenLogprobs};
use crate::runtime::{Runtime, SeqId};
use crate::vocab::SharedVocab;

use gen::{Gen, Outcomes, Phase, Stash};
use masks::MaskHelper;
use plan::StepPlan;
use read::Reader;

/// Default prompt chunk: tokens of one prompt evaluated in one step.
pub const DEFAULT_CHUNK: usize = 512;

/// Most emptied text buffers [`Scheduler::recycle`] keeps.
const MAX_SPARE_TEXT: usize = 64;

/// A handle to a generation of a [`Scheduler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GenId(u64);

/// What a generation produced, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Output bytes, safe to show (text that might start a stop string is
    /// held back until that is decided; a chunk may end inside a UTF-8
    /// character, which [`Utf8Stream`](crate::generate::Utf8Stream)
    /// reassembles).
    Text(Vec<u8>),
    /// The log-probabilities of one generated token, when
    /// [`GenerateConfig::logprobs`](crate::GenerateConfig::logprobs) asks for
    /// them; it comes before any [`Event::Text`] of that token's bytes. The
    /// end-of-generation token has none; tokens of a stop string do.
    Logprobs(TokenLogprobs),
    /// The log-probabilities of the prompt's tokens from the second one on
    /// (the first has nothing before it), once the prompt is evaluated,
    /// before any event of the first generated token; only for a
    /// generation started with [`Scheduler::submit_scored`].
    PromptLogprobs(Vec<TokenLogprobs>),
    /// The generation is over; no event follows.
    Done(GenerationStats),
}

/// Counters and timings of one generation, beyond [`GenerationStats`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenTimes {
    /// Prompt tokens taken from the cache instead of computed.
    pub reused_tokens: usize,
    /// Seconds from submission to the first sampled token.
    pub first_token_secs: f64,
}

/// Runs any number of generations together on one [`Runtime`].
pub struct Scheduler {
    rt: Runtime,
    tok: Tokenizer,
    gens: Vec<Gen>,
    next_id: u64,
    chunk: usize,
    stash: Stash,
    /// The sampler's vocabulary, built the first time a generation needs
    /// it (a grammar or DRY); shared with the model that made the
    /// scheduler.
    vocab: SharedVocab,
    /// Speculative decoding, when on.
    spec: speculate::SpecState,
    /// The plan of the step being run, its buffers reused step after step.
    plan: StepPlan,
    /// The thread that computes grammar masks beside the forward pass,
    /// started by the first step that samples under a grammar.
    masks: Option<MaskHelper>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("active", &self.active())
            .field("chunk", &self.chunk)
            .field("runtime", &self.rt)
            .finish()
    }
}

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
            spec: speculate::SpecState::default(),
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

    /// Ends generation `i` with `reason`: flushes held-back text, queues
    /// the stats and hands the sequence back.
    fn finish(&mut self, i: usize, reason: StopReason) {
        let leader = self.gens[i].id;
        let prefilling = matches!(self.gens[i].phase, Phase::Prefill { .. });
        self.finish_one(i, reason);
        if prefilling {
            // Its followers would wait forever for the prompt.
            for j in 0..self.gens.len() {
                if matches!(self.gens[j].phase, Phase::Follow { leader: l } if l == leader) {
                    self.finish_one(j, reason);
                }
            }
        }
    }

    fn finish_one(&mut self, i: usize, reason: StopReason) {
        self.end_spec(i);
        let g = &mut self.gens[i];
        let mut flushed = Vec::new();
        g.gate.finish(reason, &mut |b: &[u8]| {
            flushed.extend_from_slice(b);
            true
        });
        if !flushed.is_empty() {
            g.events.push_back(Event::Text(flushed));
        }
        let t_first = g.t_first.unwrap_or_else(Instant::now);
        let stats = GenerationStats {
            prompt_tokens: g.prompt.len(),
            generated_tokens: g.gate.tokens.len(),
            prefill_secs: t_first.duration_since(g.t_submit).as_secs_f64(),
            decode_secs: t_first.elapsed().as_secs_f64(),
            stop_reason: reason,
            graph_builds: self.rt.graph_builds() - g.builds_before,
            tokens: std::mem::take(&mut g.gate.tokens),
            spec: g.spec.stats,
        };
        g.events.push_back(Event::Done(stats));
        g.phase = Phase::Done;
        if g.owns_seq {
            // The handle is this generation's own; it cannot be stale.
            let _ = self.rt.release(g.seq);
        }
    }

    /// Ends the generations `outcomes` says stopped (a failed one as
    /// cancelled) and returns the first failure.
    fn settle(&mut self, outcomes: Outcomes) -> Result<()> {
        for (i, reason) in outcomes.ended.into_iter().rev() {
            self.finish(i, reason);
        }
        outcomes.failure.map_or(Ok(()), Err)
    }

    /// Draws the first token of every generation that starts from saved
    /// logits ([`submit_sampled`](Scheduler::submit_sampled)); returns
    /// whether there was any.
    fn sample_saved(&mut self) -> Result<bool> {
        let n_ctx = self.rt.n_ctx();
        let mut outcomes = Outcomes::default();
        let mut any = false;
        for i in 0..self.gens.len() {
            if !matches!(self.gens[i].phase, Phase::Sample { .. }) {
                continue;
            }
            any = true;
            // `advance` sets the next phase when the generation goes on.
            let Phase::Sample { logits } = std::mem::replace(&mut self.gens[i].phase, Phase::Done)
            else {
                continue;
            };
            let r = self.gens[i].advance(&logits, &self.tok, n_ctx, &mut self.stash);
            outcomes.record(i, r);
        }
        self.settle(outcomes)?;
        Ok(any)
    }

    /// Runs one step: a decode row for every generation that has a token
    /// to evaluate, then prompt chunks while the step has room (at most
    /// `n_batch` rows in all), as one batch. Returns `false` when no
    /// generation had anything to run.
    ///
    /// A generation that cannot get a cell ends with
    /// [`StopReason::CacheFull`]; the others go on.
    ///
    /// # Errors
    /// An error of the forward pass itself (the runtime restores every
    /// sequence; the generations of the step are ended with
    /// [`StopReason::Cancelled`] so a retry does not loop on the same
    /// failure).
    pub fn step(&mut self) -> Result<bool> {
        let t = crate::trace::rec::start();
        let r = self.step_inner();
        crate::trace::rec::end(t, "engine", "step", 0);
        r
    }

    fn step_inner(&mut self) -> Result<bool> {
        let sampled = self.sample_saved()?;
        // Taken out for the step (leaving empty vectors, which allocate
        // nothing), so that it can be read while the generations change.
        let mut plan = std::mem::take(&mut self.plan);
        self.plan_rows(&mut plan);
        let r = if plan.is_empty() {
            Ok(self.end_stuck() || sampled)
        } else {
            self.prefill_draft(&plan.entries);
            self.run_plan(&mut plan).map(|()| true)
        };
        self.plan = plan;
        r
    }

    /// Runs a planned step, then samples every entry that asked for it:
    /// the forward pass, with the grammar masks of the generations that
    /// sample after it computed on the helper thread meanwhile, then the
    /// reading of its logits.
    fn run_plan(&mut self, plan: &mut StepPlan) -> Result<()> {
        let lent = self.lend_grammars(plan);
        let (n_ctx, n_vocab) = (self.rt.n_ctx(), self.rt.n_vocab());
        let builds_before = self.rt.graph_builds();
        let t_step = Instant::now();
        let stepped = self.rt.step_batch(&plan.batch);
        if lent {
            let helper = self.masks.as_ref().expect("grammars were lent to it");
            plan.loans = helper.finish();
            for (i, loan) in plan.loans.drain(..) {
                self.gens[i].gate.restore_grammar(loan);
            }
        }
        let out = match stepped {
            Ok(out) => out,
            Err(e) => {
                for p in plan.entries.iter().rev() {
                    self.finish(p.gen, StopReason::Cancelled);
                }
                return Err(e);
            }
        };
        let step_secs = t_step.elapsed().as_secs_f64();
        let reader = Reader {
            gens: &mut self.gens,
            tok: &self.tok,
            stash: &mut self.stash,
            totals: &mut self.spec.totals,
            n_ctx,
            n_vocab,
        };
        let read::Read {
            mut outcomes,
            forks,
            drops,
        } = reader.read(&plan.entries, &out);
        // Before `settle`, which releases the sequences of ended generations.
        self.roll_back(&drops);
        // A step that built a graph says nothing about the cost of its rows.
        if plan.decode_only() && self.rt.graph_builds() == builds_before {
            self.record_step(plan.decode_rows, step_secs);
        }
        // Before `settle`, which may release a leader that ended at once.
        for (i, logits) in forks {
            self.start_followers(i, &logits, &mut outcomes);
        }
        self.settle(outcomes)
    }

    /// Lends the grammar of every generation that samples after this step
    /// to the helper thread (started on first use), which computes their
    /// next masks while the forward pass runs; returns whether it got any.
    /// Without a helper thread the masks are computed when sampling.
    fn lend_grammars(&mut self, plan: &mut StepPlan) -> bool {
        for p in plan.entries.iter().filter(|p| p.samples) {
            if let Some(loan) = self.gens[p.gen].gate.lend_grammar() {
                plan.loans.push((p.gen, loan));
            }
        }
        if plan.loans.is_empty() {
            return false;
        }
        if self.masks.is_none() {
            match MaskHelper::spawn() {
                Ok(h) => self.masks = Some(h),
                Err(e) => tracing::debug!("no grammar helper thread: {e}"),
            }
        }
        match &self.masks {
            Some(helper) => {
                helper.start(std::mem::take(&mut plan.loans));
                true
            }
            None => {
                for (i, loan) in plan.loans.drain(..) {
                    self.gens[i].gate.restore_grammar(loan);
                }
                false
            }
        }
    }

    /// Forks the sequence of generation `i`, whose prompt is now in the
    /// cache, for each generation following it, and draws their first
    /// tokens from the prompt's `logits`.
    fn start_followers(&mut self, i: usize, logits: &[f32], outcomes: &mut Outcomes) {
        let leader = self.gens[i].id;
        let seq = self.gens[i].seq;
        let n_ctx = self.rt.n_ctx();
        for j in 0..self.gens.len() {
            if !matches!(self.gens[j].phase, Phase::Follow { leader: l } if l == leader) {
                continue;
            }
            match self.rt.fork(seq) {
                Ok(child) => {
                    let f = &mut self.gens[j];
                    f.seq = child;
                    f.owns_seq = true;
                    outcomes.record(j, f.advance(logits, &self.tok, n_ctx, &mut self.stash));
                }
                Err(_) => outcomes.ended.push((j, StopReason::CacheFull)),
            }
        }
        outcomes.ended.sort_by_key(|&(j, _)| j);
    }
}
