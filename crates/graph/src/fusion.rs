//! The fusion pass: pattern rewrites applied to every freshly built graph,
//! each gated by the backend's support and by its toggle in
//! [`Fusion`], followed by the removal of nodes nothing needs.
//!
//! The pass runs on every graph, fused or not, so an A/B comparison of one
//! toggle differs by that rewrite alone. A fused node takes the name of the
//! node it replaces (the consumer), so names in dumps and traces stay
//! stable; ids are renumbered after dead nodes are removed.

use crate::builder::BuiltGraph;
use crate::ir::{KvKind, Node, NodeId, Op};
use crate::params::{BackendPlan, Fusion};

/// A rewrite the pass knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `Mul(Silu(g), up)` → `SwiGlu(g, up)`.
    SwiGlu,
    /// `KvStore{K}(Rope(k))` → `RopeKvStore(k)`.
    RopeKvStore,
}

/// Whether every backend of the plan has a kernel for the fused op of
/// `pattern` (a fused node may land on either device of a mixed plan).
pub fn backend_supports(backend: BackendPlan, pattern: Pattern) -> bool {
    match (backend, pattern) {
        (BackendPlan::Cpu | BackendPlan::Gpu { .. }, Pattern::SwiGlu | Pattern::RopeKvStore) => {
            true
        }
    }
}

/// What one run of the pass changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FusionReport {
    /// `Silu` + `Mul` pairs turned into `SwiGlu`.
    pub swiglu: usize,
    /// `Rope` + `KvStore` pairs turned into `RopeKvStore`.
    pub rope_kv_store: usize,
    /// Nodes removed because nothing needed them.
    pub removed: usize,
}

/// Whether a node must run even if no other node reads it.
fn has_effect(op: &Op) -> bool {
    matches!(op, Op::KvStore { .. } | Op::RopeKvStore { .. })
}

/// Applies the enabled rewrites that `backend` supports, then drops dead
/// nodes and renumbers the rest.
pub fn fuse(mut g: BuiltGraph, fusion: Fusion, backend: BackendPlan) -> (BuiltGraph, FusionReport) {
    let mut report = FusionReport::default();
    let n = g.nodes.len();
    let mut uses = vec![0usize; n];
    for node in &g.nodes {
        for &s in &node.srcs {
            if s < n {
                uses[s] += 1;
            }
        }
    }
    // A node read once, by the node being rewritten, and not the result.
    let sole = |uses: &[usize], s: NodeId| uses[s] == 1 && s != g.output;
    let swiglu = fusion.swiglu && backend_supports(backend, Pattern::SwiGlu);
    let rope_kv = fusion.rope_kv_store && backend_supports(backend, Pattern::RopeKvStore);
    for i in 0..n {
        let node = &g.nodes[i];
        let rewrite = match node.op {
            Op::Mul if swiglu && node.srcs.len() == 2 => {
                // Either operand order: the product is commutative, bit for bit.
                let [a, b] = [node.srcs[0], node.srcs[1]];
                let pick = [(a, b), (b, a)].into_iter().find(|&(s, other)| {
                    let sn = &g.nodes[s];
                    sn.op == Op::Silu
                        && sole(&uses, s)
                        && sn.shape == node.shape
                        && g.nodes[other].shape == node.shape
                        && s != other
                });
                pick.map(|(s, up)| (s, Op::SwiGlu, vec![g.nodes[s].srcs[0], up]))
            }
            Op::KvStore {
                layer,
                kind: KvKind::K,
            } if rope_kv && node.srcs.len() == 2 => {
                let r = node.srcs[0];
                match g.nodes[r].op {
                    // A scaled rotation runs on the CPU under a GPU plan
                    // (see `splits`), apart from the layer's cache.
                    Op::Rope(p)
                        if sole(&uses, r)
                            && g.nodes[r].srcs.len() == 2
                            && (p.is_unit() || !backend.uses_gpu()) =>
                    {
                        let rs = &g.nodes[r].srcs;
                        Some((
                            r,
                            Op::RopeKvStore { rope: p, layer },
                            vec![rs[0], rs[1], node.srcs[1]],
                        ))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((absorbed, op, srcs)) = rewrite {
            match op {
                Op::SwiGlu => report.swiglu += 1,
                _ => report.rope_kv_store += 1,
            }
            // The absorbed node loses its only reader; its own sources gain
            // the fused node as a reader in its place.
            uses[absorbed] = 0;
            let node = &mut g.nodes[i];
            node.op = op;
            node.srcs = srcs;
        }
    }
    report.removed = remove_dead(&mut g);
    (g, report)
}

/// Drops every node that neither leads to the output nor has an effect,
/// renumbers the survivors in their original order and returns how many
/// were dropped.
fn remove_dead(g: &mut BuiltGraph) -> usize {
    let n = g.nodes.len();
    let mut live = vec![false; n];
    if g.output < n {
        live[g.output] = true;
    }
    for (i, node) in g.nodes.iter().enumerate() {
        if has_effect(&node.op) {
            live[i] = true;
        }
    }
    // Sources precede their readers, so one backward sweep marks every
    // ancestor of a live node.
    for i in (0..n).rev() {
        if live[i] {
            for &s in &g.nodes[i].srcs {
                if s < n {
                    live[s] = true;
                }
            }
        }
    }
    let mut remap = vec![usize::MAX; n];
    let mut kept: Vec<Node> = Vec::with_capacity(n);
    for (i, node) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        if live[i] {
            remap[i] = kept.len();
            kept.push(node);
        }
    }
    for node in &mut kept {
        for s in &mut node.srcs {
            if *s < n {
                *s = remap[*s];
            }
        }
    }
    let removed = n - kept.len();
    g.nodes = kept;
    g.inputs.retain(|&(_, id)| id < n && live[id]);
    for (_, id) in &mut g.inputs {
        *id = remap[*id];
    }
    if g.output < n {
        g.output = remap[g.output];
    }
    removed
}
