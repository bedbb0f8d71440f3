//! The model thread: it alone owns the [`Scheduler`], admits up to `-np`
//! generations, steps all of them together, and hands each request its
//! text through a channel. HTTP handlers talk to it only through [`Cmd`]s.
//!
//! A request whose receiver is gone (the client disconnected and its
//! response was dropped) is cancelled before the next step, so its
//! sequence is freed within one step.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use minfer_engine::trace::rec as trace;
use minfer_engine::{
    EngineError, Event, GenId, GenerateConfig, Pooling, Scheduler, StopReason, Utf8Stream,
};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::events::{Finish, Generated, Out, Progress, Report, Timings, TokenLogprob};
use crate::metrics::{Metrics, GAUGES};

/// KV cells kept free for each running answer to grow into when deciding
/// whether another request can start.
const GROWTH_ROOM: usize = 32;

/// A request to the model thread.
#[derive(Debug)]
pub enum Cmd {
    /// Generate for a request.
    Submit(Box<Job>),
    /// The request with this id is no longer wanted.
    Cancel(u64),
    /// The request with this id has its answer: end its generation now,
    /// as if the model had stopped (its choices end normally).
    Stop(u64),
    /// Cancel every running and queued request (end of the drain period).
    CancelAll,
    /// Stop the thread once nothing is running.
    Shutdown,
    /// A slot file action (llama-server's `/slots/{id}?action=`) between
    /// two steps.
    Slot {
        /// The slot.
        n: usize,
        /// What to do.
        action: crate::slots::SlotAction,
        /// llama-server's answer, or why not.
        reply: oneshot::Sender<Result<serde_json::Value, String>>,
    },
    /// Compute the embeddings of `inputs` (token ids) between two steps
    /// of the running generations, each input its own sequence for the
    /// length of the call ([`Runtime::embed`](minfer_engine::Runtime::embed)).
    Embed {
        /// Token ids per input.
        inputs: Vec<Vec<u32>>,
        /// How each input's token vectors become one.
        pooling: Pooling,
        /// Scale the vectors to unit length.
        normalize: bool,
        /// Where the vectors (or the engine's refusal) go.
        reply: oneshot::Sender<minfer_engine::Result<Vec<Vec<f32>>>>,
    },
}

/// One prompt of a request and its choices.
#[derive(Debug)]
pub struct Part {
    /// Prompt token ids (checked against the context at admission).
    pub prompt: Vec<u32>,
    /// What to generate, per choice; the prompt is prefilled once and
    /// shared by all of them.
    pub cfgs: Vec<GenerateConfig>,
}

/// One request to run: one or more prompts, each with one or more
/// choices, numbered in order across the prompts.
#[derive(Debug)]
pub struct Job {
    /// The request's id.
    pub id: u64,
    /// The prompts.
    pub parts: Vec<Part>,
    /// Report each prompt's own log-probabilities with this many
    /// alternatives per token (`echo` with `logprobs`).
    pub score: Option<u8>,
    /// Where the output goes.
    pub out: UnboundedSender<Out>,
    /// The slot (`id_slot`) its first prompt and answer stand for once
    /// it ends.
    pub slot: Option<usize>,
    /// What it wants reported while it runs.
    pub report: Report,
}

impl Job {
    /// Choices in all.
    pub fn choices(&self) -> usize {
        self.parts.iter().map(|p| p.cfgs.len()).sum()
    }

    /// Prompt tokens in all.
    pub fn prompt_len(&self) -> usize {
        self.parts.iter().map(|p| p.prompt.len()).sum()
    }
}

/// One choice of a running request.
struct Branch {
    gen: GenId,
    utf8: Utf8Stream,
    done: bool,
    /// The index of its prompt in the job.
    part: usize,
    /// That prompt's first token, which has no log probability.
    first: u32,
    /// Tokens of its prompt found in the prefix cache, once known.
    cached: usize,
    /// The tokens it generated, once done (kept for a slot only).
    tokens: Vec<u32>,
    /// Text events relayed so far: a speculative step hands over several
    /// tokens at once, and each piece's timings count only those before
    /// it and its own.
    relayed: usize,
}

struct Running {
    branches: Vec<Branch>,
    out: UnboundedSender<Out>,
    /// Whether its prompt is in the cache (its first token is out) and
    /// its prefix-cache hit has been counted.
    counted: bool,
    /// Tokens of its prompt.
    prompt_len: usize,
    /// Trace time of its start, when tracing.
    t_trace: Option<u64>,
    /// The slot it stands for once it ends, with its first prompt.
    slot: Option<(usize, Vec<u32>)>,
    /// What it wants reported while it runs.
    report: Report,
    /// The prompt tokens its last progress report gave as in the cache.
    reported: Option<usize>,
}

impl Running {
    /// Reports how far its (first) prompt has come, when it asked and
    /// there is news: once before any of it is computed, then after each
    /// step that computed some.
    fn report_progress(&mut self, sched: &Scheduler) {
        if !self.report.progress {
            return;
        }
        let Some(p) = sched.progress(self.branches[0].gen) else {
            return;
        };
        if self.reported == Some(p.evaluated_tokens) {
            return;
        }
        self.reported = Some(p.evaluated_tokens);
        let progress = Progress {
            total: p.prompt_tokens,
            cache: p.reused_tokens,
            processed: p.evaluated_tokens,
            timings: Timings::of(&p),
        };
        let _ = self.out.send(Out::Progress(0, progress));
    }
}

/// The model thread's state.
pub struct Worker {
    sched: Scheduler,
    n_parallel: usize,
    metrics: Arc<Metrics>,
    waiting: VecDeque<Job>,
    running: HashMap<u64, Running>,
    shutting_down: bool,
    /// The tokens each `id_slot` stands for (with `--slot-save-path`).
    slots: Option<crate::slots::Slots>,
    /// What this worker last added to the gauges, which every model's
    /// worker adds its share to.
    shown: [u64; GAUGES],
}

impl Worker {
    /// A worker running up to `n_parallel` generations at once on `sched`.
    pub fn new(sched: Scheduler, n_parallel: usize, metrics: Arc<Metrics>) -> Worker {
        let mut w = Worker {
            sched,
            n_parallel: n_parallel.max(1),
            metrics,
            waiting: VecDeque::new(),
            running: HashMap::new(),
            shutting_down: false,
            shown: [0; GAUGES],
            slots: None,
        };
        w.publish_gauges();
        w
    }

    /// Keeps slot files for the model whose identity is `identity`.
    pub fn with_slots(mut self, identity: minfer_engine::chat::ModelIdentity) -> Worker {
        self.slots = Some(crate::slots::Slots::new(identity));
        self
    }

    /// Runs until [`Cmd::Shutdown`] (and nothing left to run) or until
    /// every sender is gone.
    pub fn run(mut self, rx: Receiver<Cmd>) {
        loop {
            // Idle: wait for work without spinning.
            if self.running.is_empty() && self.waiting.is_empty() {
                if self.shutting_down {
                    return;
                }
                match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(cmd) => self.handle(cmd),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            while let Ok(cmd) = rx.try_recv() {
                self.handle(cmd);
            }
            self.drop_abandoned();
            self.admit();
            if !self.running.is_empty() {
                self.step();
            }
            self.publish_gauges();
        }
    }

    fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Submit(job) => self.waiting.push_back(*job),
            Cmd::Cancel(id) => self.cancel(id, true),
            Cmd::Stop(id) => self.end(id, StopReason::StopString, false),
            Cmd::CancelAll => {
                self.waiting.clear();
                let ids: Vec<u64> = self.running.keys().copied().collect();
                for id in ids {
                    self.cancel(id, false);
                }
            }
            Cmd::Shutdown => self.shutting_down = true,
            Cmd::Slot { n, action, reply } => {
                let r = match &mut self.slots {
                    Some(slots) => slots.act(&mut self.sched, n, &action),
                    None => {
                        Err("slot files are off: start the server with --slot-save-path".into())
                    }
                };
                let _ = reply.send(r);
            }
            Cmd::Embed {
                inputs,
                pooling,
                normalize,
                reply,
            } => {
                // A client that went away wants nothing computed.
                if reply.is_closed() {
                    return;
                }
                let rt = self.sched.runtime_mut();
                let r = if normalize {
                    rt.embed(&inputs, pooling)
                } else {
                    rt.embed_raw(&inputs, pooling)
                };
                let _ = reply.send(r);
            }
        }
    }

    /// Ends request `id` and frees its sequence now.
    fn cancel(&mut self, id: u64, disconnect: bool) {
        self.end(id, StopReason::Cancelled, disconnect);
    }

    /// Ends request `id` now, its choices with `reason`, and frees its
    /// sequence.
    fn end(&mut self, id: u64, reason: StopReason, disconnect: bool) {
        if let Some(pos) = self.waiting.iter().position(|j| j.id == id) {
            self.waiting.remove(pos);
            if disconnect {
                self.metrics.disconnects.fetch_add(1, Relaxed);
            }
            return;
        }
        let Some(r) = self.running.remove(&id) else {
            return;
        };
        if disconnect {
            self.metrics.disconnects.fetch_add(1, Relaxed);
        }
        let mut generated = 0;
        for (k, b) in r.branches.iter().enumerate().filter(|(_, b)| !b.done) {
            self.sched.cancel(b.gen);
            while let Some(ev) = self.sched.next_event(b.gen) {
                if let Event::Done(stats) = ev {
                    let why = match (disconnect, reason) {
                        (true, _) => "client went away",
                        (false, StopReason::Cancelled) => "cancelled",
                        (false, _) => "stopped: the answer was complete",
                    };
                    log_done(id, k, &stats, b.cached, Some(why));
                    generated += stats.generated_tokens;
                    let _ = r.out.send(Out::Done(k, finish(&stats, b.cached, reason)));
                }
            }
        }
        self.metrics
            .completion_tokens
            .fetch_add(generated as u64, Relaxed);
    }

    /// Choices running now.
    fn busy(&self) -> usize {
        self.running.values().map(|r| r.branches.len()).sum()
    }

    /// Cancels the requests whose clients went away.
    fn drop_abandoned(&mut self) {
        let before = self.waiting.len();
        self.waiting.retain(|j| !j.out.is_closed());
        let gone = (before - self.waiting.len()) as u64;
        self.metrics.disconnects.fetch_add(gone, Relaxed);
        let gone: Vec<u64> = self
            .running
            .iter()
            .filter(|(_, r)| r.out.is_closed())
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.cancel(id, true);
        }
    }

    /// Starts waiting requests while there are free slots and KV room.
    ///
    /// A request is started only when the cells it needs fit beside the
    /// prompts still being prefilled and some growth room for each running
    /// answer: the scheduler would otherwise start it on whatever room is
    /// left, and two prompts that do not fit together would end each other
    /// with "cache full" instead of one waiting for the other. A request
    /// alone always starts (its prompt fits the context; admission checked).
    fn admit(&mut self) {
        loop {
            let Some(job) = self.waiting.front() else {
                return;
            };
            // A request wider than `-np` was refused by its handler.
            if self.busy() + job.choices() > self.n_parallel && !self.running.is_empty() {
                return;
            }
            if !self.running.is_empty() {
                let pending: usize = self
                    .running
                    .values()
                    .filter(|r| !r.counted)
                    .map(|r| r.prompt_len)
                    .sum();
                let growth = GROWTH_ROOM * (self.busy() + job.choices());
                if pending + job.prompt_len() + growth > self.sched.runtime().room() {
                    return;
                }
            }
            let Some(job) = self.waiting.pop_front() else {
                return;
            };
            let prompt_len = job.prompt_len();
            match self.submit(&job) {
                Ok(gens) => {
                    let t_trace = trace::start();
                    if t_trace.is_some() {
                        trace::name_track(job.id as u32, format!("request {}", job.id));
                    }
                    self.metrics
                        .prompt_tokens
                        .fetch_add(prompt_len as u64, Relaxed);
                    self.running.insert(
                        job.id,
                        Running {
                            branches: gens
                                .into_iter()
                                .zip(job.parts.iter().enumerate().flat_map(|(i, p)| {
                                    let first = p.prompt.first().copied().unwrap_or(0);
                                    std::iter::repeat_n((i, first), p.cfgs.len())
                                }))
                                .map(|(gen, (part, first))| Branch {
                                    gen,
                                    utf8: Utf8Stream::new(),
                                    done: false,
                                    part,
                                    first,
                                    cached: 0,
                                    tokens: Vec::new(),
                                    relayed: 0,
                                })
                                .collect(),
                            out: job.out,
                            counted: false,
                            prompt_len,
                            t_trace,
                            slot: job.slot.zip(job.parts.first().map(|p| p.prompt.clone())),
                            report: job.report,
                            reported: None,
                        },
                    );
                    if let Some(r) = self.running.get_mut(&job.id) {
                        r.report_progress(&self.sched);
                    }
                }
                Err(e) => {
                    let _ = job.out.send(Out::Error(e.to_string()));
                }
            }
        }
    }

    /// Submits every prompt of `job`; on a failure, none stays submitted.
    fn submit(&mut self, job: &Job) -> minfer_engine::Result<Vec<GenId>> {
        let mut gens = Vec::with_capacity(job.choices());
        for part in &job.parts {
            let submitted = match job.score {
                None => self.sched.submit_n(&part.prompt, &part.cfgs),
                Some(top) => self.sched.submit_scored(&part.prompt, &part.cfgs, top),
            };
            match submitted {
                Ok(ids) => gens.extend(ids),
                Err(e) => {
                    for &g in &gens {
                        self.sched.cancel(g);
                        while self.sched.next_event(g).is_some() {}
                    }
                    return Err(e);
                }
            }
        }
        Ok(gens)
    }

    fn step(&mut self) {
        let t = Instant::now();
        let failure = self.sched.step().err();
        self.metrics
            .observe_step(t.elapsed().as_secs_f64(), self.running.len());
        if let Some(e) = &failure {
            eprintln!("minfer serve: engine step failed: {e}");
        }
        let mut finished = Vec::new();
        for (&id, r) in self.running.iter_mut() {
            // Known once the first token is out, and until `Done` is read.
            if !r.counted {
                if let Some(t) = self.sched.times(r.branches[0].gen) {
                    r.counted = true;
                    if let Some(t0) = r.t_trace {
                        trace::track_span(id as u32, "prefill", t0, r.prompt_len as u64);
                    }
                    self.metrics
                        .prefix_reused_tokens
                        .fetch_add(t.reused_tokens as u64, Relaxed);
                    for b in &mut r.branches {
                        b.cached = t.reused_tokens;
                    }
                }
            }
            r.report_progress(&self.sched);
            let mut failed = false;
            let mut scored = Vec::new();
            for (k, b) in r.branches.iter_mut().enumerate() {
                if !b.done {
                    let mut cx = Relay {
                        sched: &mut self.sched,
                        metrics: &self.metrics,
                        out: &r.out,
                        id,
                        t_trace: r.t_trace,
                        failure: failure.as_ref(),
                        keep_tokens: r.slot.is_some(),
                        timings: r.report.timings,
                    };
                    failed |= cx.relay(k, b, &mut scored);
                }
            }
            // A prompt is scored once, by its first choice; every choice
            // that continues it shows the same entries.
            for (part, entries) in scored {
                for (k, _) in r
                    .branches
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.part == part)
                {
                    let _ = r.out.send(Out::PromptLogprobs(k, entries.clone()));
                }
            }
            if failed || r.branches.iter().all(|b| b.done) {
                finished.push(id);
            }
        }
        for id in finished {
            if let Some(r) = self.running.remove(&id) {
                if let (Some(slots), Some((n, mut tokens))) = (&mut self.slots, r.slot) {
                    if r.branches.iter().all(|b| b.done) {
                        tokens.extend_from_slice(&r.branches[0].tokens);
                        slots.record(n, tokens);
                    }
                }
                // After a failure the request gets one error and nothing
                // more: its other choices stop too.
                for b in r.branches.iter().filter(|b| !b.done) {
                    self.sched.cancel(b.gen);
                    while self.sched.next_event(b.gen).is_some() {}
                }
            }
        }
    }

    fn publish_gauges(&mut self) {
        let rt = self.sched.runtime();
        let u = rt.usage();
        let sp = self.sched.spec_stats();
        let now = [
            self.running.len() as u64,
            self.waiting.len() as u64,
            u.live as u64,
            u.idle as u64,
            u.used as u64,
            rt.room() as u64,
            rt.live_cells() as u64,
            u.n_ctx as u64,
            sp.drafted,
            sp.accepted,
            sp.checks,
        ];
        self.metrics.shift_gauges(&mut self.shown, now);
        *self
            .metrics
            .prompt_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = rt.prompt_cache_stats();
    }
}

impl Drop for Worker {
    /// A model that is unloaded takes its share out of the gauges.
    fn drop(&mut self) {
        self.metrics.shift_gauges(&mut self.shown, [0; GAUGES]);
    }
}

/// What relaying one request's events needs from the worker.
struct Relay<'a> {
    sched: &'a mut Scheduler,
    metrics: &'a Metrics,
    /// Where the request's events go.
    out: &'a UnboundedSender<Out>,
    /// The request's id.
    id: u64,
    /// Trace time of its start, when tracing.
    t_trace: Option<u64>,
    /// The step's failure, if it failed.
    failure: Option<&'a EngineError>,
    /// Keep each choice's generated tokens (the request names a slot).
    keep_tokens: bool,
    /// Send the choice's timings before each piece of its text.
    timings: bool,
}

impl Relay<'_> {
    /// Hands the events of choice `k` to its request, and the entries of
    /// a scored prompt to `scored`; returns `true` when the choice failed
    /// (the request then gets an error and ends).
    fn relay(
        &mut self,
        k: usize,
        b: &mut Branch,
        scored: &mut Vec<(usize, Vec<TokenLogprob>)>,
    ) -> bool {
        while let Some(ev) = self.sched.next_event(b.gen) {
            match ev {
                Event::PromptLogprobs(lps) => {
                    let tok = self.sched.tokenizer();
                    let mut entries = vec![TokenLogprob::unscored(tok, b.first)];
                    entries.extend(lps.iter().map(|lp| TokenLogprob::new(tok, lp)));
                    scored.push((b.part, entries));
                }
                Event::Text(bytes) => {
                    b.relayed += 1;
                    let s = b.utf8.push(&bytes);
                    if !s.is_empty() {
                        if let Some(mut p) =
                            self.timings.then(|| self.sched.progress(b.gen)).flatten()
                        {
                            p.generated_tokens = p.generated_tokens.min(b.relayed);
                            let _ = self.out.send(Out::Timings(k, Timings::of(&p)));
                        }
                        let _ = self.out.send(Out::Text(k, s.to_string()));
                    }
                }
                Event::Logprobs(lp) => {
                    let entry = TokenLogprob::new(self.sched.tokenizer(), &lp);
                    let _ = self.out.send(Out::Logprobs(k, entry));
                }
                Event::Done(stats) => return self.done(k, b, &stats),
            }
        }
        false
    }

    /// Ends choice `k` with `stats`; returns `true` when it failed.
    fn done(&mut self, k: usize, b: &mut Branch, stats: &minfer_engine::GenerationStats) -> bool {
        b.done = true;
        if self.keep_tokens {
            b.tokens.clone_from(&stats.tokens);
        }
        log_done(self.id, k, stats, b.cached, None);
        let rest = b.utf8.finish();
        if !rest.is_empty() {
            let _ = self.out.send(Out::Text(k, rest.to_string()));
        }
        let _ = self.out.send(Out::Generated(
            k,
            Generated {
                tokens: stats.tokens.clone(),
                prefill_secs: stats.prefill_secs,
                decode_secs: stats.decode_secs,
            },
        ));
        self.metrics
            .completion_tokens
            .fetch_add(stats.generated_tokens as u64, Relaxed);
        let m = self.metrics;
        m.prefill_micros
            .fetch_add((stats.prefill_secs * 1e6) as u64, Relaxed);
        m.decode_micros
            .fetch_add((stats.decode_secs * 1e6) as u64, Relaxed);
        m.tokens_max.fetch_max(
            (stats.prompt_tokens + stats.generated_tokens) as u64,
            Relaxed,
        );
        if let Some(t0) = self.t_trace {
            let n = stats.generated_tokens as u64;
            trace::track_span(self.id as u32, "request", t0, n);
        }
        if stats.stop_reason == StopReason::Cancelled {
            // Only a failed step cancels on its own (our cancels
            // remove the request first).
            let msg = self
                .failure
                .map_or("the generation was cancelled".to_string(), |e| {
                    format!("the engine failed: {e}")
                });
            let _ = self.out.send(Out::Error(msg));
            return true;
        }
        let _ = self
            .out
            .send(Out::Done(k, finish(stats, b.cached, stats.stop_reason)));
        false
    }
}

/// How a choice ended, from its statistics.
fn finish(stats: &minfer_engine::GenerationStats, cached: usize, reason: StopReason) -> Finish {
    Finish {
        prompt_tokens: stats.prompt_tokens,
        completion_tokens: stats.generated_tokens,
        cached_tokens: cached,
        reason,
    }
}

/// One line per finished choice at `info` (`-v`): where the time went, so
/// that an operator sees what a client waited for (a long prefill, a cache
/// hit, a client that gave up).
fn log_done(
    id: u64,
    choice: usize,
    stats: &minfer_engine::GenerationStats,
    cached: usize,
    why: Option<&str>,
) {
    let rate = if stats.decode_secs > 0.0 {
        stats.generated_tokens as f64 / stats.decode_secs
    } else {
        0.0
    };
    let end = why.map_or_else(|| format!("{:?}", stats.stop_reason), str::to_string);
    tracing::info!(
        "request {id}.{choice}: prompt {} tokens ({cached} cached), first token after {:.2} s, \
         {} tokens in {:.2} s ({rate:.1} t/s), {end}",
        stats.prompt_tokens,
        stats.prefill_secs,
        stats.generated_tokens,
        stats.decode_secs,
    );
}
