//! The scheduler: a built graph cut into ranges of consecutive nodes that
//! run on the same backend (splits), walked node by node each step.
//!
//! The splits and the op census are computed once per built graph, so a
//! step is a plain walk over precomputed ranges. With the CPU as the only
//! backend there is one split; the split boundary is where cross-backend
//! copies and synchronization will go when a second backend exists.

use std::ops::Range;
use std::time::{Duration, Instant};

use minfer_kernels::trace;

use crate::alloc::MemPlan;
use crate::builder::BuiltGraph;
use crate::error::Result;
use crate::exec::{exec_node, runs, ExecCtx};
use crate::params::BackendPlan;

/// What the scheduler reports on stderr. Chosen by whoever creates the
/// cache (for example from a command-line flag); the graph layer never
/// reads the environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceConfig {
    /// Print the op census and the split layout on every execute.
    pub census: bool,
}

/// A run of consecutive nodes on one backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The backend that runs the nodes.
    pub backend: BackendPlan,
    /// The nodes, as indices into the graph's node list.
    pub nodes: Range<usize>,
}

/// The execution order of one built graph.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub splits: Vec<Split>,
    /// Number of nodes per op name, sorted by name.
    pub census: Vec<(&'static str, usize)>,
    /// The key the trace recorder knows this graph by, when the graph was
    /// built while tracing.
    pub trace_key: Option<u32>,
}

impl Schedule {
    /// Assigns every node to the plan's backend and cuts the node list
    /// where the backend changes.
    pub fn new(g: &BuiltGraph, backend: BackendPlan) -> Self {
        // Every node goes to the plan's single backend; a plan that places
        // some nodes elsewhere would assign per node here.
        let assign = |_: usize| backend;
        let mut splits: Vec<Split> = Vec::new();
        for i in 0..g.nodes.len() {
            let b = assign(i);
            match splits.last_mut() {
                Some(s) if s.backend == b => s.nodes.end = i + 1,
                _ => splits.push(Split {
                    backend: b,
                    nodes: i..i + 1,
                }),
            }
        }
        let mut census: Vec<(&'static str, usize)> = Vec::new();
        for node in &g.nodes {
            let name = node.op.name();
            match census.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => census.push((name, 1)),
            }
        }
        census.sort_unstable();
        Schedule {
            splits,
            census,
            trace_key: None,
        }
    }

    /// Prints the census and the splits of graph `uid` on stderr.
    pub fn trace(&self, uid: u64, n_nodes: usize) {
        eprint!("[minfer graph {uid}] {n_nodes} nodes:");
        for (name, count) in &self.census {
            eprint!(" {name}={count}");
        }
        eprint!("\n[minfer graph {uid}] splits:");
        for s in &self.splits {
            eprint!(" {:?}[{}..{})", s.backend, s.nodes.start, s.nodes.end);
        }
        eprintln!();
    }

    /// Runs every node of every split in order. When `timed`, returns the
    /// time spent inside node kernels (the rest of the walk is the
    /// scheduler's own cost).
    pub fn run(
        &self,
        cx: &mut ExecCtx,
        g: &BuiltGraph,
        plan: &MemPlan,
        timed: bool,
    ) -> Result<Duration> {
        let mut kernels = Duration::ZERO;
        // Checked once per walk, so tracing off costs one branch per node.
        let key = self.trace_key.filter(|_| trace::enabled());
        for split in &self.splits {
            match split.backend {
                BackendPlan::Cpu => {
                    for i in split.nodes.clone() {
                        if !runs(&g.nodes[i].op) {
                            continue;
                        }
                        if let Some(key) = key {
                            trace::set_current_op(key, i as u32);
                            let t = trace::now_ns();
                            exec_node(cx, g, plan, i)?;
                            trace::op(key, i as u32, t);
                        } else if timed {
                            let t = Instant::now();
                            exec_node(cx, g, plan, i)?;
                            kernels += t.elapsed();
                        } else {
                            exec_node(cx, g, plan, i)?;
                        }
                    }
                }
            }
        }
        Ok(kernels)
    }
}
