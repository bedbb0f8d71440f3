//! The process-wide trace recorder: timed spans, graph-op spans and
//! counters, kept in memory per thread and written out once at the end.
//!
//! Recording has to be cheap enough to leave on for a whole run and free
//! when it is off:
//!
//! - off, every recording site costs one relaxed load of a flag
//!   ([`enabled`]); nothing is allocated and no clock is read;
//! - on, each thread appends fixed-size [`Event`]s to its own lane, a
//!   vector whose capacity is reserved when the thread records its first
//!   event, so a steady step allocates nothing (a full lane drops events
//!   and counts them rather than grow);
//! - names are `&'static str` and graph ops are (graph, node) indices;
//!   the strings behind them are registered once per built graph
//!   ([`register_graph`]) and resolved only when the trace is written.
//!
//! The recorder is global because a trace is a picture of the whole
//! process: the pool workers, the scheduler thread and a server's request
//! threads all write to it without being handed a handle.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

/// Events a lane holds by default before it starts dropping.
pub const DEFAULT_LANE_CAPACITY: usize = 1 << 18;

/// What one event records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum What {
    /// A named span; `arg` is a count that depends on the span (tokens of
    /// a forward, for example), 0 when none.
    Span {
        /// Category, for filtering in a viewer ("engine", "graph", …).
        cat: &'static str,
        /// Span name.
        name: &'static str,
        /// A span-specific count.
        arg: u64,
    },
    /// One graph node run by the thread that walks the graph.
    Op {
        /// Key from [`register_graph`].
        graph: u32,
        /// Node index in that graph.
        node: u32,
    },
    /// A pool worker's share of the node that was running when it picked
    /// up its job.
    Work {
        /// Key from [`register_graph`], or `u32::MAX` outside a graph.
        graph: u32,
        /// Node index, or `u32::MAX`.
        node: u32,
    },
    /// A sampled value (drawn as a counter track).
    Counter {
        /// Counter name.
        name: &'static str,
        /// The value at the event's start time.
        value: f64,
    },
    /// A span on a virtual track (one per server request, for example)
    /// rather than on the recording thread's own track.
    Track {
        /// Track number, chosen by the caller.
        track: u32,
        /// Span name.
        name: &'static str,
        /// A span-specific count.
        arg: u64,
    },
}

/// One recorded event: a start time and a duration in nanoseconds since the
/// recorder started (duration 0 for counters and instants).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    /// Start, in ns since [`install`].
    pub start_ns: u64,
    /// Duration in ns.
    pub dur_ns: u64,
    /// The payload.
    pub what: What,
}

/// Descriptions of one node, for resolving [`What::Op`] events.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeMeta {
    /// Node name (layer and role, e.g. `blk.3.attn_q`).
    pub name: String,
    /// Op name.
    pub op: &'static str,
    /// Output shape.
    pub shape: [usize; 2],
    /// Output element type.
    pub dtype: &'static str,
    /// Bytes of weights the node reads when it runs.
    pub weight_bytes: u64,
    /// The nodes it reads.
    pub srcs: Vec<u32>,
}

/// A registered graph: its kind ("prefill", "decode") and nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphMeta {
    /// "prefill" or "decode".
    pub kind: &'static str,
    /// Rows the graph evaluates.
    pub n_tokens: u32,
    /// Its nodes, by index.
    pub nodes: Vec<NodeMeta>,
}

/// One thread's events.
#[derive(Debug)]
pub struct Lane {
    /// Track id in the written trace (1 for the first thread to record).
    pub tid: u32,
    /// The thread's name.
    pub name: String,
    events: Mutex<Vec<Event>>,
    dropped: AtomicU64,
}

/// Everything recorded so far, taken by [`snapshot`].
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Per thread: (tid, thread name, events in recording order).
    pub lanes: Vec<(u32, String, Vec<Event>)>,
    /// Graphs by key.
    pub graphs: Vec<Arc<GraphMeta>>,
    /// Names of virtual tracks ([`What::Track`]).
    pub tracks: Vec<(u32, String)>,
    /// Events lost to full lanes.
    pub dropped: u64,
}

struct Recorder {
    epoch: Instant,
    capacity: usize,
    lanes: Mutex<Vec<Arc<Lane>>>,
    graphs: Mutex<Vec<Arc<GraphMeta>>>,
    tracks: Mutex<Vec<(u32, String)>>,
}

static ON: AtomicBool = AtomicBool::new(false);
static RECORDER: OnceLock<Recorder> = OnceLock::new();
/// The node the graph-walking thread is running, as `graph << 32 | node`,
/// read by workers when they pick up a job. Written only while tracing.
static CURRENT_OP: AtomicU64 = AtomicU64::new(u64::MAX);

thread_local! {
    static LANE: RefCell<Option<Arc<Lane>>> = const { RefCell::new(None) };
}

/// Whether tracing is on: the one check every recording site makes.
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts recording for the rest of the process, each thread's lane
/// holding up to `lane_capacity` events. Returns `false` (and changes
/// nothing) when a recorder was already installed.
pub fn install(lane_capacity: usize) -> bool {
    let mut fresh = false;
    RECORDER.get_or_init(|| {
        fresh = true;
        Recorder {
            epoch: Instant::now(),
            capacity: lane_capacity.max(16),
            lanes: Mutex::new(Vec::new()),
            graphs: Mutex::new(Vec::new()),
            tracks: Mutex::new(Vec::new()),
        }
    });
    if fresh {
        ON.store(true, Ordering::Release);
    }
    fresh
}

/// Stops recording (events already kept stay for [`snapshot`]).
pub fn stop() {
    ON.store(false, Ordering::Release);
}

/// Nanoseconds since the recorder started (0 when none is installed).
#[inline]
pub fn now_ns() -> u64 {
    RECORDER
        .get()
        .map_or(0, |r| r.epoch.elapsed().as_nanos() as u64)
}

/// Runs `f` on the calling thread's lane, creating the lane (and reserving
/// its whole capacity) on the thread's first use.
fn with_lane(rec: &Recorder, f: impl FnOnce(&Lane)) {
    LANE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let lane = slot.get_or_insert_with(|| {
            let mut lanes = rec.lanes.lock().unwrap_or_else(PoisonError::into_inner);
            let tid = lanes.len() as u32 + 1;
            let name = std::thread::current()
                .name()
                .map_or_else(|| format!("thread {tid}"), str::to_string);
            let lane = Arc::new(Lane {
                tid,
                name,
                events: Mutex::new(Vec::with_capacity(rec.capacity)),
                dropped: AtomicU64::new(0),
            });
            lanes.push(Arc::clone(&lane));
            lane
        });
        f(lane);
    });
}

/// Creates the calling thread's lane now if recording is on, so that its
/// first event later does not allocate. Pool workers call it when they
/// start: a worker may first join a job long after warm-up.
pub fn reserve_lane() {
    if !enabled() {
        return;
    }
    if let Some(rec) = RECORDER.get() {
        with_lane(rec, |_| {});
    }
}

/// Appends `ev` to the calling thread's lane (see [`with_lane`]).
fn push(ev: Event) {
    let Some(rec) = RECORDER.get() else { return };
    with_lane(rec, |lane| {
        let mut events = lane.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() < events.capacity() {
            events.push(ev);
        } else {
            lane.dropped.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// Records a span that started at `start_ns` (from [`now_ns`]) and ends now.
#[inline]
pub fn span(cat: &'static str, name: &'static str, start_ns: u64, arg: u64) {
    if enabled() {
        let end = now_ns();
        push(Event {
            start_ns,
            dur_ns: end.saturating_sub(start_ns),
            what: What::Span { cat, name, arg },
        });
    }
}

/// The start time for a span when tracing is on, `None` (and no clock
/// read) when it is off.
#[inline]
pub fn start() -> Option<u64> {
    enabled().then(now_ns)
}

/// Records a span from `start` (taken with [`start`]) to now, if tracing
/// was on when it started.
#[inline]
pub fn end(start: Option<u64>, cat: &'static str, name: &'static str, arg: u64) {
    if let Some(t) = start {
        span(cat, name, t, arg);
    }
}

/// Records graph node `node` of graph `graph` as having run from
/// `start_ns` to now.
#[inline]
pub fn op(graph: u32, node: u32, start_ns: u64) {
    let end = now_ns();
    push(Event {
        start_ns,
        dur_ns: end.saturating_sub(start_ns),
        what: What::Op { graph, node },
    });
}

/// Tells workers which node is running (while tracing), so that their
/// share of it is labelled with the node.
#[inline]
pub fn set_current_op(graph: u32, node: u32) {
    CURRENT_OP.store(u64::from(graph) << 32 | u64::from(node), Ordering::Relaxed);
}

/// Records a worker's share of the current node, from `start_ns` to now.
#[inline]
pub fn work(start_ns: u64) {
    let cur = CURRENT_OP.load(Ordering::Relaxed);
    let end = now_ns();
    push(Event {
        start_ns,
        dur_ns: end.saturating_sub(start_ns),
        what: What::Work {
            graph: (cur >> 32) as u32,
            node: cur as u32,
        },
    });
}

/// Records a counter value at the current time.
#[inline]
pub fn counter(name: &'static str, value: f64) {
    if enabled() {
        push(Event {
            start_ns: now_ns(),
            dur_ns: 0,
            what: What::Counter { name, value },
        });
    }
}

/// Records a span on virtual track `track` (see [`name_track`]).
pub fn track_span(track: u32, name: &'static str, start_ns: u64, arg: u64) {
    if enabled() {
        let end = now_ns();
        push(Event {
            start_ns,
            dur_ns: end.saturating_sub(start_ns),
            what: What::Track { track, name, arg },
        });
    }
}

/// Names virtual track `track` (a server request, for example).
pub fn name_track(track: u32, name: String) {
    if let (true, Some(rec)) = (enabled(), RECORDER.get()) {
        let mut t = rec.tracks.lock().unwrap_or_else(PoisonError::into_inner);
        t.push((track, name));
    }
}

/// Registers a built graph's node descriptions and returns the key its
/// op events use; `None` when tracing is off.
pub fn register_graph(meta: GraphMeta) -> Option<u32> {
    let rec = RECORDER.get().filter(|_| enabled())?;
    let mut g = rec.graphs.lock().unwrap_or_else(PoisonError::into_inner);
    g.push(Arc::new(meta));
    Some(g.len() as u32 - 1)
}

/// A copy of everything recorded so far (lanes ordered by tid).
pub fn snapshot() -> Recording {
    let Some(rec) = RECORDER.get() else {
        return Recording::default();
    };
    let lanes = rec.lanes.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = Recording::default();
    for lane in lanes.iter() {
        let ev = lane.events.lock().unwrap_or_else(PoisonError::into_inner);
        out.lanes.push((lane.tid, lane.name.clone(), ev.clone()));
        out.dropped += lane.dropped.load(Ordering::Relaxed);
    }
    out.graphs = rec
        .graphs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    out.tracks = rec
        .tracks
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_counters_and_graphs_are_recorded_per_thread() {
        install(1024);
        let t = start();
        assert!(t.is_some());
        let key = register_graph(GraphMeta {
            kind: "decode",
            n_tokens: 1,
            nodes: vec![],
        })
        .unwrap();
        let t0 = now_ns();
        op(key, 0, t0);
        counter("kv_cells", 3.0);
        end(t, "engine", "decode", 1);
        std::thread::Builder::new()
            .name("other".into())
            .spawn(|| span("engine", "x", now_ns(), 0))
            .unwrap()
            .join()
            .unwrap();
        let r = snapshot();
        // Other tests of this process may have recorded (pool workers), so
        // lanes are found by thread name.
        let me = std::thread::current()
            .name()
            .unwrap_or_default()
            .to_string();
        let lane = |name: &str| r.lanes.iter().find(|l| l.1 == name).map(|l| &l.2);
        let main = lane(&me).unwrap();
        assert_eq!(main.len(), 3);
        assert!(matches!(main[2].what, What::Span { name: "decode", .. }));
        assert!(main[2].start_ns <= main[0].start_ns);
        assert_eq!(lane("other").unwrap().len(), 1);
        assert!(r.graphs.len() > key as usize);
    }
}
