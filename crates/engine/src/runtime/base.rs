//! The [`Runtime`] itself: its state, its sequences, and the step that
//! runs rows of many of them through one forward pass. The other files of
//! [`runtime`](super) add methods for embeddings, snapshots, the prompt
//! cache's tiers and inspection.

use std::sync::Arc;

use minfer_graph::kv::{BatchPlan, KvCells, MAX_SEQS};
use minfer_graph::{BackendPlan, GraphCache, OutputKind, SimdLevel, StepInputs, StepTimings};
use minfer_models::Model;

use super::batch::{Batch, BatchEntry, Entries};
use super::tier::PromptTier;
use super::types::{CacheUsage, SeqId, StepLogits};
use crate::config::{EngineConfig, KernelTuning};
use crate::error::{EngineError, Result};

/// What the runtime keeps per sequence.
#[derive(Debug)]
pub(super) struct SeqState {
    /// Bumped when the slot is reused, so stale handles are caught.
    pub(super) generation: u32,
    /// Tokens at positions `0..len`; the length is the cursor.
    pub(super) history: Vec<u32>,
    /// Step counter value of the last use, for least-recently-used eviction.
    pub(super) last_used: u64,
    /// Released by its owner: kept only for prefix reuse, evictable.
    pub(super) idle: bool,
}

/// One model, one thread pool, one graph cache with its KV regions, and the
/// sequences that share them.
pub struct Runtime {
    pub(super) model: Arc<Model>,
    pub(super) cfg: EngineConfig,
    pub(super) simd: SimdLevel,
    /// Which device runs which layers.
    pub(super) offload: BackendPlan,
    pub(super) cache: GraphCache,
    pub(super) cells: KvCells,
    pub(super) seqs: Vec<Option<SeqState>>,
    pub(super) generations: Vec<u32>,
    pub(super) tick: u64,
    // Per-step buffers, kept so that a steady decode step allocates nothing.
    pub(super) rows: Vec<(u32, i32)>,
    pub(super) ids: Vec<i32>,
    pub(super) positions: Vec<i32>,
    pub(super) out_ids: Vec<i32>,
    pub(super) plan: BatchPlan,
    /// The wanted rows of the last step's output: logits, or hidden states
    /// for an embedding.
    pub(super) outputs: Vec<f32>,
    pub(super) offsets: Vec<usize>,
    pub(super) starts: Vec<(u32, usize)>,
    /// The prompt cache below the cells (RAM, disk), when configured.
    pub(super) tier: Option<PromptTier>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("cfg", &self.cfg)
            .field("usage", &self.usage())
            .field("cache", &self.cache)
            .finish()
    }
}

impl Runtime {
    /// A runtime for `model` with an empty KV cache and no sequences.
    ///
    /// # Errors
    /// [`EngineError::Config`] for a zero `n_ctx`, `n_threads` or
    /// `n_batch`, an `n_ctx` beyond `i32::MAX`, or a Q8_0 cache whose rows
    /// are not whole blocks; [`EngineError::Kernel`] when the requested
    /// SIMD level is not available on this CPU.
    pub fn new(model: Arc<Model>, cfg: EngineConfig) -> Result<Runtime> {
        cfg.validate(model.hparams.kv_width())?;
        let simd = cfg.simd.unwrap_or_else(SimdLevel::detect);
        let n_ctx = cfg.n_ctx as usize;
        let n_batch = cfg.n_batch.min(n_ctx);
        let mut plan = BatchPlan::default();
        // A window holds at most every cell once per row; a decode step of a
        // single sequence reads up to the whole context.
        plan.window_cells.reserve(n_ctx);
        plan.window_positions.reserve(n_ctx);
        plan.kv_cells.reserve(n_batch);
        plan.window_offsets.reserve(n_batch + 1);
        let mut cpu = minfer_cpu::CpuBackend::with_simd(simd, cfg.n_threads)?;
        if cfg.repack {
            pack_weights(&mut cpu, &model, cfg.kernel_tuning);
        }
        let mut cache = GraphCache::new(Box::new(cpu));
        let (plan_devices, gpu) = crate::device::open(
            cfg.device,
            cfg.n_gpu_layers,
            model.hparams.n_layer,
            minfer_gpu::GpuOptions {
                subgroups: cfg.gpu_subgroups,
            },
        )?;
        if let Some(gpu) = gpu {
            cache.set_gpu(gpu);
        }
        let compute = format!("{simd:?}, {plan_devices:?}");
        let position_bytes =
            2 * model.hparams.n_layer * cfg.kv_format.row_bytes(model.hparams.kv_width());
        let tier = PromptTier::open(&cfg, &model, position_bytes, compute)?;
        Ok(Runtime {
            tier,
            cache,
            simd,
            offload: plan_devices,
            cells: KvCells::new(n_ctx),
            seqs: (0..MAX_SEQS).map(|_| None).collect(),
            generations: vec![0; MAX_SEQS as usize],
            tick: 0,
            rows: Vec::with_capacity(n_batch),
            ids: Vec::with_capacity(n_batch),
            positions: Vec::with_capacity(n_batch),
            out_ids: Vec::with_capacity(n_batch),
            plan,
            outputs: Vec::with_capacity(model.n_vocab()),
            offsets: Vec::with_capacity(MAX_SEQS as usize + 1),
            starts: Vec::with_capacity(MAX_SEQS as usize),
            model,
            cfg,
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The configuration the runtime was created with.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Which device runs which layers.
    pub fn offload(&self) -> BackendPlan {
        self.offload
    }

    /// The GPU backend's description, when layers run on one.
    pub fn gpu_name(&self) -> Option<String> {
        self.cache.gpu_name()
    }

    /// The CPU kernels' choices for a lone token's products that differ
    /// from their built-in ones (measured on this machine, see
    /// [`KernelTuning`]), one line per weight type, e.g. `Q4_K: no
    /// prefetch, AVX2 tile`.
    pub fn kernel_choices(&self) -> Vec<String> {
        self.cache.kernels().tuning().describe()
    }

    /// The SIMD level the kernels run at.
    pub fn simd(&self) -> SimdLevel {
        self.simd
    }

    /// Width of a logits row.
    pub fn n_vocab(&self) -> usize {
        self.model.n_vocab()
    }

    /// The context window: cells shared by all sequences, and the bound on
    /// every sequence's positions.
    pub fn n_ctx(&self) -> u32 {
        self.cfg.n_ctx
    }

    /// The most sequences (live and idle) the runtime tracks at once.
    pub fn max_sequences(&self) -> usize {
        MAX_SEQS as usize
    }

    /// Cells and sequences in use.
    pub fn usage(&self) -> CacheUsage {
        let (mut live, mut idle) = (0, 0);
        for s in self.seqs.iter().flatten() {
            if s.idle {
                idle += 1;
            } else {
                live += 1;
            }
        }
        CacheUsage {
            n_ctx: self.cells.n_ctx(),
            used: self.cells.used(),
            live,
            idle,
        }
    }

    /// Graphs built so far (one per distinct shape of step).
    pub fn graph_builds(&self) -> u64 {
        self.cache.builds()
    }

    /// Steps that ran an already built graph.
    pub fn graph_reuses(&self) -> u64 {
        self.cache.reuses()
    }

    /// Rebuild the graph on every reuse and compare it with the cached one
    /// (a check that the params determine the topology; costs a build per
    /// step, for tests).
    pub fn set_verify_graphs(&mut self, on: bool) {
        self.cache.set_verify(on);
    }

    /// Keeps at least `n` built graphs cached (one per row count a
    /// workload cycles through); never shrinks.
    pub fn keep_graphs(&mut self, n: usize) {
        self.cache.keep_at_least(n);
    }

    /// Measure where each step's time goes.
    pub fn set_timing(&mut self, on: bool) {
        self.cache.set_timing(on);
    }

    /// Timings of the last micro-batch, when timing is on.
    pub fn last_step_timings(&self) -> StepTimings {
        self.cache.last_step_timings()
    }

    fn state(&self, seq: SeqId) -> Result<&SeqState> {
        match self.seqs.get(seq.slot as usize) {
            Some(Some(s)) if s.generation == seq.generation => Ok(s),
            _ => Err(EngineError::UnknownSequence(seq.slot)),
        }
    }

    pub(super) fn state_mut(&mut self, seq: SeqId) -> Result<&mut SeqState> {
        match self.seqs.get_mut(seq.slot as usize) {
            Some(Some(s)) if s.generation == seq.generation => Ok(s),
            _ => Err(EngineError::UnknownSequence(seq.slot)),
        }
    }

    fn live(&self, seq: SeqId) -> Result<&SeqState> {
        let s = self.state(seq)?;
        if s.idle {
            return Err(EngineError::UnknownSequence(seq.slot));
        }
        Ok(s)
    }

    /// The tokens `seq` holds, by position (its length is the cursor).
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] for a removed or released handle.
    pub fn history(&self, seq: SeqId) -> Result<&[u32]> {
        Ok(&self.live(seq)?.history)
    }

    /// The position the next token of `seq` gets.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] for a removed or released handle.
    pub fn n_past(&self, seq: SeqId) -> Result<u32> {
        // Histories never exceed n_ctx, which fits a u32.
        Ok(self.live(seq)?.history.len() as u32)
    }

    /// Takes a free slot, evicting the least recently used idle sequence
    /// when every slot is taken.
    fn take_slot(&mut self) -> Result<u32> {
        if let Some(i) = self.seqs.iter().position(Option::is_none) {
            return Ok(i as u32);
        }
        let victim = self
            .lru_idle()
            .ok_or(EngineError::TooManySequences { max: MAX_SEQS })?;
        self.evict(victim);
        Ok(victim)
    }

    fn lru_idle(&self) -> Option<u32> {
        self.seqs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.idle).map(|s| (s.last_used, i)))
            .min()
            .map(|(_, i)| i as u32)
    }

    fn evict(&mut self, slot: u32) {
        // `slot < MAX_SEQS`, so the store accepts it.
        let _ = self.cells.remove(slot, 0);
        self.seqs[slot as usize] = None;
    }

    fn install(&mut self, slot: u32, history: Vec<u32>) -> SeqId {
        let generation = self.generations[slot as usize].wrapping_add(1);
        self.generations[slot as usize] = generation;
        self.tick += 1;
        self.seqs[slot as usize] = Some(SeqState {
            generation,
            history,
            last_used: self.tick,
            idle: false,
        });
        SeqId { slot, generation }
    }

    /// A new, empty sequence.
    ///
    /// # Errors
    /// [`EngineError::TooManySequences`] when every slot holds a live
    /// sequence.
    pub fn new_sequence(&mut self) -> Result<SeqId> {
        let slot = self.take_slot()?;
        let history = Vec::with_capacity(self.cfg.n_ctx as usize);
        Ok(self.install(slot, history))
    }

    /// A new sequence that will be fed `prompt`: the longest beginning of
    /// `prompt` that a live or idle sequence already holds is shared (no
    /// computation, no copy), then, when the prompt cache below the cells
    /// holds a longer beginning, its rows are copied into fresh cells (no
    /// computation either, the same bits); the returned count says how
    /// many tokens the sequence holds. At least the last token of `prompt`
    /// is left to evaluate, so its logits can be computed. Feed
    /// `prompt[reused..]` next.
    ///
    /// # Errors
    /// As [`new_sequence`](Runtime::new_sequence).
    pub fn new_sequence_for(&mut self, prompt: &[u32]) -> Result<(SeqId, usize)> {
        let target = &prompt[..prompt.len().saturating_sub(1)];
        let mut best: Option<(usize, u32)> = None;
        for (i, s) in self.seqs.iter().enumerate() {
            let Some(s) = s else { continue };
            let n = common_prefix(&s.history, target);
            if n > 0 && best.is_none_or(|(b, _)| n > b) {
                best = Some((n, i as u32));
            }
        }
        // The source counts as just used, so that taking a slot for the new
        // sequence evicts some other idle sequence first.
        if let Some((_, src)) = best {
            self.tick += 1;
            let tick = self.tick;
            if let Some(s) = self.seqs[src as usize].as_mut() {
                s.last_used = tick;
            }
        }
        let seq = self.new_sequence()?;
        let mut shared = 0;
        // With every other slot live, the source itself may have been the
        // one evicted.
        if let Some((n, src)) = best {
            if self.seqs[src as usize].is_some() && src != seq.slot {
                self.cells.share(src, seq.slot, n as i32)?;
                self.state_mut(seq)?.history.extend_from_slice(&prompt[..n]);
                shared = n;
            }
        }
        Ok((seq, self.extend_from_tiers(seq, target, shared)))
    }

    /// A new sequence that shares every cell of `parent` (nothing is
    /// recomputed or copied; the two diverge from their next tokens on).
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] for a bad parent;
    /// [`EngineError::TooManySequences`].
    pub fn fork(&mut self, parent: SeqId) -> Result<SeqId> {
        let history = self.live(parent)?.history.clone();
        let slot = self.take_slot()?;
        let n = history.len() as i32;
        self.cells.share(parent.slot, slot, n)?;
        let mut h = Vec::with_capacity(self.cfg.n_ctx as usize);
        h.extend_from_slice(&history);
        Ok(self.install(slot, h))
    }

    /// Moves the cursor of `seq` back to `pos`: tokens at positions `pos..`
    /// are forgotten and the cells only they used are freed.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`]; [`EngineError::Rollback`] when
    /// `pos` is past the cursor.
    pub fn rollback(&mut self, seq: SeqId, pos: u32) -> Result<()> {
        let n_past = self.n_past(seq)?;
        if pos > n_past {
            return Err(EngineError::Rollback { pos, n_past });
        }
        // `pos <= n_past <= n_ctx <= i32::MAX`, checked in `new`.
        self.cells.remove(seq.slot, pos as i32)?;
        self.state_mut(seq)?.history.truncate(pos as usize);
        Ok(())
    }

    /// Removes `seq` and frees the cells only it used.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] for a stale handle.
    pub fn remove(&mut self, seq: SeqId) -> Result<()> {
        self.state(seq)?;
        self.evict(seq.slot);
        Ok(())
    }

    /// Hands `seq` back: its handle becomes invalid, but its cells stay
    /// cached for [`new_sequence_for`](Runtime::new_sequence_for) until
    /// their room is needed (least recently used first). With a prompt
    /// cache configured, its whole blocks of tokens that the cache does not
    /// hold yet are copied there first, so they outlive the cells.
    ///
    /// # Errors
    /// [`EngineError::UnknownSequence`] for a stale handle.
    pub fn release(&mut self, seq: SeqId) -> Result<()> {
        self.tick += 1;
        let tick = self.tick;
        let s = self.state_mut(seq)?;
        s.idle = true;
        s.last_used = tick;
        self.save_to_tiers(seq.slot);
        Ok(())
    }

    /// Evicts every idle sequence that holds a beginning of `tokens` (an
    /// answer's last token is never fed back, so its sequence holds one
    /// token less) or more than all of them, so that a later prompt with
    /// that beginning is computed again (the prompt cache below the cells
    /// keeps what it holds). Returns how many were evicted.
    pub fn forget_idle(&mut self, tokens: &[u32]) -> usize {
        let idle: Vec<u32> = self
            .seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.as_ref().is_some_and(|s| {
                    s.idle
                        && !s.history.is_empty()
                        && (tokens.starts_with(&s.history) || s.history.starts_with(tokens))
                })
            })
            .map(|(i, _)| i as u32)
            .collect();
        for &slot in &idle {
            self.evict(slot);
        }
        idle.len()
    }

    /// Removes every sequence and frees every cell.
    pub fn clear(&mut self) {
        self.cells.clear();
        for s in &mut self.seqs {
            *s = None;
        }
    }

    /// Cells held by at least one live (not released) sequence; the other
    /// used cells belong to idle sequences and are evicted when needed.
    pub fn live_cells(&self) -> usize {
        let live: u64 = self
            .seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| !s.idle))
            .fold(0, |m, (i, _)| m | (1u64 << i));
        (0..self.cells.n_ctx())
            .filter(|&c| self.cells.cell_seqs(c) & live != 0)
            .count()
    }

    /// Cells a step of `n_new` tokens could use right now: free ones plus
    /// those only idle sequences hold.
    pub fn room(&self) -> usize {
        self.cells.n_ctx() - self.cells.used()
            + self
                .seqs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.as_ref().is_some_and(|s| s.idle))
                .map(|(i, _)| self.cells.exclusive_cells(i as u32))
                .sum::<usize>()
    }

    /// Evicts idle sequences, least recently used first, until `needed`
    /// cells are free or none is left.
    pub(super) fn make_room(&mut self, needed: usize) {
        while self.cells.n_ctx() - self.cells.used() < needed {
            match self.lru_idle() {
                Some(v) => self.evict(v),
                None => break,
            }
        }
    }

    /// Checks a step's entries before anything changes.
    fn check_entries<E: Entries + ?Sized>(&self, entries: &E) -> Result<usize> {
        if entries.count() == 0 {
            return Err(EngineError::EmptyBatch);
        }
        let n_vocab = self.n_vocab();
        let n_ctx = self.cfg.n_ctx;
        let mut seen = 0u64;
        let mut total = 0usize;
        for k in 0..entries.count() {
            let e = entries.entry(k);
            let s = self.live(e.seq)?;
            if e.tokens.is_empty() {
                return Err(EngineError::EmptyBatch);
            }
            if seen & (1 << e.seq.slot) != 0 {
                return Err(EngineError::InvalidArgument(format!(
                    "{} appears twice in one step",
                    e.seq
                )));
            }
            seen |= 1 << e.seq.slot;
            if e.first_out > e.tokens.len() {
                return Err(EngineError::InvalidArgument(format!(
                    "first output row {} of an entry of {} tokens",
                    e.first_out,
                    e.tokens.len()
                )));
            }
            if s.history.len() + e.tokens.len() > n_ctx as usize {
                return Err(EngineError::ContextFull { n_ctx });
            }
            if let Some(&token) = e.tokens.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(EngineError::TokenOutOfRange { token, n_vocab });
            }
            total += e.tokens.len();
        }
        Ok(total)
    }

    /// Evaluates one batch: every entry's tokens are appended to its
    /// sequence, all of them in one forward pass per micro-batch of at most
    /// `n_batch` rows, and the logits of the rows each entry asked for are
    /// returned.
    ///
    /// # Errors
    /// Checked before anything runs: [`EngineError::EmptyBatch`] (no
    /// entries, or an entry without tokens);
    /// [`EngineError::UnknownSequence`]; [`EngineError::InvalidArgument`]
    /// for a sequence that appears twice or a bad `first_out`;
    /// [`EngineError::ContextFull`] when a sequence would pass `n_ctx`;
    /// [`EngineError::TokenOutOfRange`]; [`EngineError::CacheFull`] when the
    /// cells all sequences share cannot hold the batch even after evicting
    /// idle sequences. A failure while running leaves every sequence as it
    /// was before the call.
    pub fn step(&mut self, entries: &[BatchEntry]) -> Result<StepLogits<'_>> {
        self.forward(entries, OutputKind::Logits)?;
        Ok(self.step_logits())
    }

    /// [`step`](Runtime::step) over a [`Batch`], which owns its tokens.
    pub(crate) fn step_batch(&mut self, batch: &Batch) -> Result<StepLogits<'_>> {
        self.forward(batch, OutputKind::Logits)?;
        Ok(self.step_logits())
    }

    /// The logits of the step just run.
    fn step_logits(&self) -> StepLogits<'_> {
        StepLogits {
            logits: &self.outputs,
            n_vocab: self.model.n_vocab(),
            offsets: &self.offsets,
        }
    }

    /// [`step`](Runtime::step) with the graph ending in `output`: the
    /// wanted rows land in `outputs`, entry `i`'s at rows
    /// `offsets[i]..offsets[i + 1]`.
    pub(super) fn forward<E: Entries + ?Sized>(
        &mut self,
        entries: &E,
        output: OutputKind,
    ) -> Result<()> {
        let total = self.check_entries(entries)?;
        self.make_room(total);
        let free = self.cells.n_ctx() - self.cells.used();
        if total > free {
            return Err(EngineError::CacheFull {
                needed: total,
                free,
            });
        }
        self.tick += 1;
        self.starts.clear();
        for k in 0..entries.count() {
            let e = entries.entry(k);
            let tick = self.tick;
            let s = self.state_mut(e.seq)?;
            s.last_used = tick;
            let start = s.history.len();
            self.starts.push((e.seq.slot, start));
        }
        self.outputs.clear();
        self.offsets.clear();
        self.offsets.push(0);
        let mut n_rows_out = 0;
        for k in 0..entries.count() {
            n_rows_out += entries.entry(k).n_out();
            self.offsets.push(n_rows_out);
        }
        if let Err(e) = self.run_micro_batches(entries, output) {
            // Forget what did run: every sequence is as the caller left it.
            for i in 0..self.starts.len() {
                let (slot, start) = self.starts[i];
                let _ = self.cells.remove(slot, start as i32);
                if let Some(s) = self.seqs[slot as usize].as_mut() {
                    s.history.truncate(start);
                }
            }
            self.outputs.clear();
            return Err(e);
        }
        Ok(())
    }

    /// Splits the entries' rows into micro-batches of at most `n_batch` and
    /// runs each.
    fn run_micro_batches<E: Entries + ?Sized>(
        &mut self,
        entries: &E,
        output: OutputKind,
    ) -> Result<()> {
        let n_batch = self.cfg.n_batch.min(self.cfg.n_ctx as usize);
        self.rows.clear();
        self.ids.clear();
        self.out_ids.clear();
        for k in 0..entries.count() {
            let e = entries.entry(k);
            for (i, &tok) in e.tokens.iter().enumerate() {
                let s = self.seqs[e.seq.slot as usize]
                    .as_mut()
                    .ok_or(EngineError::UnknownSequence(e.seq.slot))?;
                // Positions stay below n_ctx <= i32::MAX (checked above).
                let pos = s.history.len() as i32;
                s.history.push(tok);
                if i >= e.first_out {
                    self.out_ids.push(self.rows.len() as i32);
                }
                self.rows.push((e.seq.slot, pos));
                self.ids.push(tok as i32);
                if self.rows.len() == n_batch {
                    self.run_rows(output)?;
                }
            }
        }
        if !self.rows.is_empty() {
            self.run_rows(output)?;
        }
        Ok(())
    }

    /// Runs the rows gathered in `rows`/`ids`/`out_ids` as one forward and
    /// appends the wanted output rows; empties the row buffers.
    fn run_rows(&mut self, output: OutputKind) -> Result<()> {
        let n = self.rows.len();
        let wanted = self.out_ids.len();
        // A graph computes at least one output row; when none is wanted it
        // computes the last and drops it.
        if wanted == 0 {
            self.out_ids.push(n as i32 - 1);
        }
        let n_out = self.out_ids.len();
        if n_out == n {
            // Every row: the graph takes them in order without a gather.
            self.out_ids.clear();
        }
        self.cells.plan_batch(&self.rows, &mut self.plan)?;
        self.positions.clear();
        self.positions.extend(self.rows.iter().map(|&(_, p)| p));
        let params = self.params_for(n, n_out, output);
        let model = &self.model;
        let t_fwd = crate::trace::rec::start();
        let uid = self
            .cache
            .prepare(&params, &model.weights, |b| model.build_graph(b))?;
        let inputs = StepInputs {
            token_ids: &self.ids,
            positions: &self.positions,
            kv_cells: &self.plan.kv_cells,
            window_offsets: &self.plan.window_offsets,
            window_cells: &self.plan.window_cells,
            window_positions: &self.plan.window_positions,
            out_ids: &self.out_ids,
        };
        let out = self.cache.execute(uid, &model.weights, &inputs)?;
        if wanted > 0 {
            self.outputs.extend_from_slice(out);
        }
        let kind = minfer_graph::dump::kind_name(params.kind);
        crate::trace::forward_done(t_fwd, kind, n, self.cells.used());
        self.rows.clear();
        self.ids.clear();
        self.out_ids.clear();
        Ok(())
    }
}

/// Length of the common beginning of `a` and `b`.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Repacks the model's weights for the CPU kernels and, unless the
/// tuning is fixed, measures (or recalls) the kernels' choices for a lone
/// token's products over them; logs both.
fn pack_weights(cpu: &mut minfer_cpu::CpuBackend, model: &Model, tuning: KernelTuning) {
    use minfer_graph::HostBackend;
    let t0 = std::time::Instant::now();
    let bytes = cpu.pack_weights(&model.weights);
    if bytes > 0 {
        tracing::info!(
            mb = bytes as f64 / 1e6,
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "repacked weights into the interleaved layout"
        );
    }
    if tuning == KernelTuning::Fixed {
        return;
    }
    let t0 = std::time::Instant::now();
    let file = tuning.file();
    let tuned = cpu.tune(&model.weights, file.as_deref());
    if let Some(e) = &tuned.save_error {
        tracing::debug!(error = %e, "the kernel tuning was not kept on disk");
    }
    if !tuned.measured.is_empty() {
        tracing::info!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            types = ?tuned.measured,
            choices = ?cpu.tuning().describe(),
            "measured the kernels' reads of a lone token on this machine"
        );
    }
}
