//! The split scheduler: every node of a built graph assigned to a device
//! from the offload plan, and the node list cut into splits, ranges of
//! consecutive nodes on one device.
//!
//! The assignment and the splits are computed once per built graph, so a
//! step is a walk over precomputed ranges. The values a split reads from
//! the other device are copied in at its start (the allocator plans those
//! copies); a split boundary is the only place one backend waits for the
//! other.

use std::ops::Range;

use crate::builder::BuiltGraph;
use crate::ir::Op;
use crate::params::BackendPlan;
use crate::types::Device;

/// What the scheduler reports on stderr. Chosen by whoever creates the
/// cache (for example from a command-line flag); the graph layer never
/// reads the environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceConfig {
    /// Print the op census and the split layout on every execute.
    pub census: bool,
}

/// A run of consecutive nodes on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The device that runs the nodes.
    pub device: Device,
    /// The nodes, as indices into the graph's node list.
    pub nodes: Range<usize>,
}

/// The layer a node belongs to, from its name (`blk.12.attn_q` is layer
/// 12). Model code names every layer node this way.
fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("blk.")?;
    let end = rest.find('.')?;
    rest[..end].parse().ok()
}

/// Whether a node does work when the graph runs (inputs are filled before,
/// weights are read in place and reshapes alias their source).
pub fn runs(op: &Op) -> bool {
    !matches!(op, Op::Input(_) | Op::Weight(_) | Op::Reshape)
}

/// The device of every node under `plan`.
///
/// Layer nodes go where the plan puts their layer. Step inputs live on
/// the CPU, which fills them. Nodes before the first layer (the embedding
/// lookup) run on the CPU, nodes after the last layer on the plan's output
/// device, and the few unnamed nodes between layers (the row selection
/// before the last layer's FFN) with their first computed source. A
/// reshape stays with its source, whose buffer it aliases; a weight has no
/// device of its own (each backend reads its own resident copy) and is
/// given its first reader's, which only matters for dumps.
pub fn assign(g: &BuiltGraph, plan: BackendPlan) -> Vec<Device> {
    let n = g.nodes.len();
    if !plan.uses_gpu() {
        return vec![Device::Cpu; n];
    }
    let layers: Vec<Option<usize>> = g.nodes.iter().map(|x| layer_of(&x.name)).collect();
    let first = layers.iter().position(Option::is_some);
    let last = layers.iter().rposition(Option::is_some);
    let mut dev = vec![Device::Cpu; n];
    for (i, node) in g.nodes.iter().enumerate() {
        dev[i] = match (&node.op, layers[i]) {
            (Op::Input(_), _) => Device::Cpu,
            (Op::Weight(_), _) => Device::Cpu,
            (Op::Reshape, _) => dev[node.srcs[0]],
            // The routed experts stay on the CPU, with their weights (as
            // llama.cpp's `--cpu-moe`): the bulk of such a model lives
            // there, and a step reads only the chosen experts.
            (Op::MoeFfn(_), _) => Device::Cpu,
            // The GPU's RoPE kernels compute pure rotations: frequency
            // factors and a magnitude factor are applied on the CPU.
            (Op::Rope(p), _) if node.srcs.len() == 3 || !p.is_unit() => Device::Cpu,
            (_, Some(l)) => plan.layer_device(l),
            _ if first.is_none_or(|f| i < f) => Device::Cpu,
            _ if last.is_some_and(|l| i > l) => plan.output_device(),
            _ => node
                .srcs
                .iter()
                .find(|&&s| !matches!(g.nodes[s].op, Op::Input(_) | Op::Weight(_)))
                .map_or(Device::Cpu, |&s| dev[s]),
        };
    }
    // Weights: their first reader's device (informational).
    for (i, node) in g.nodes.iter().enumerate() {
        for &s in &node.srcs {
            if matches!(g.nodes[s].op, Op::Weight(_)) && s < i {
                dev[s] = dev[i];
            }
        }
    }
    dev
}

/// The execution order of one built graph.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Each node's device.
    pub devices: Vec<Device>,
    /// The splits, in order; nodes that do no work never start a split.
    pub splits: Vec<Split>,
    /// The node ranges of each device's splits.
    pub ranges: [Vec<Range<usize>>; 2],
    /// Number of nodes per op name, sorted by name.
    pub census: Vec<(&'static str, usize)>,
    /// The key the trace recorder knows this graph by, when the graph was
    /// built while tracing.
    pub trace_key: Option<u32>,
}

impl Schedule {
    /// Assigns every node under `plan` and cuts the node list where the
    /// device of the working nodes changes.
    pub fn new(g: &BuiltGraph, plan: BackendPlan) -> Self {
        let devices = assign(g, plan);
        let mut splits: Vec<Split> = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            // A node that does no work joins the current split whatever its
            // device, so inputs and weights never cut the list.
            let d = match splits.last() {
                Some(s) if !runs(&node.op) => s.device,
                _ => devices[i],
            };
            match splits.last_mut() {
                Some(s) if s.device == d => s.nodes.end = i + 1,
                _ => splits.push(Split {
                    device: d,
                    nodes: i..i + 1,
                }),
            }
        }
        let mut ranges: [Vec<Range<usize>>; 2] = [Vec::new(), Vec::new()];
        for s in &splits {
            ranges[s.device.index()].push(s.nodes.clone());
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
            devices,
            splits,
            ranges,
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
            eprint!(" {}[{}..{})", s.device.name(), s.nodes.start, s.nodes.end);
        }
        eprintln!();
    }
}

#[cfg(test)]
mod tests {
    use super::layer_of;

    #[test]
    fn layer_numbers_come_from_node_names() {
        assert_eq!(layer_of("blk.12.attn_q"), Some(12));
        assert_eq!(layer_of("blk.0.ffn_down"), Some(0));
        assert_eq!(layer_of("blk.x.attn_q"), None);
        assert_eq!(layer_of("output_norm"), None);
        assert_eq!(layer_of("blk.3"), None);
    }
}
