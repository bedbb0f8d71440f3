//! The allocator of a [`GraphCache`](crate::GraphCache): node buffers
//! drawn from per-device, per-type pools by liveness, and the copies that
//! carry a value to the other device at a split boundary.
//!
//! Planning a graph has three parts, each its own step: validation
//! ([`validate`]: operands, types, KV row widths), liveness (the last
//! reader of every value, on each device), and buffer assignment (a walk
//! in build order taking a buffer for each value and giving it back after
//! its last reader). Scratch is not planned here: each backend sizes its
//! own when it prepares a graph.
//!
//! No node value outlives the step that computes it (the KV cache lives in
//! the backends' regions, not in node buffers), so every pool buffer is
//! free at the start of a step, and the graphs of one cache share the same
//! buffers; only one of them runs at a time. The allocator only decides
//! sizes; the backends hold the memory.

mod validate;

use std::ops::Range;

use crate::builder::BuiltGraph;
use crate::error::Result;
use crate::ir::{KvKind, NodeId, Op};
use crate::plan::{KvNeed, MemPlan, Slot, Transfer};
use crate::types::{Device, PoolSizes};
use crate::weights::WeightStore;

use validate::Kind;

/// Counters of what the allocator has created, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Node buffers created since the cache was made (never destroyed),
    /// on every device.
    pub buffers_created: usize,
    /// Bytes held by node buffers.
    pub buffer_bytes: usize,
    /// KV regions created (one K and one V per layer).
    pub kv_regions: usize,
    /// Bytes held by KV regions.
    pub kv_bytes: usize,
}

/// Node buffer sizes of one cache, per device.
#[derive(Default)]
pub struct Allocator {
    pools: [PoolSizes; 2],
    stats: AllocStats,
}

/// Free lists and buffer end-of-life marks of one device's pool during
/// planning.
struct Walk<'a> {
    pool: &'a mut PoolSizes,
    f32_free: Vec<usize>,
    i32_free: Vec<usize>,
    f32_end: Vec<usize>,
    i32_end: Vec<usize>,
}

impl<'a> Walk<'a> {
    fn new(pool: &'a mut PoolSizes) -> Self {
        Walk {
            f32_free: (0..pool.f32.len()).collect(),
            i32_free: (0..pool.i32.len()).collect(),
            f32_end: vec![0; pool.f32.len()],
            i32_end: vec![0; pool.i32.len()],
            pool,
        }
    }

    /// A buffer of `n` values of the kind of `slot_kind`, live until `end`.
    fn take(&mut self, stats: &mut AllocStats, kind: Kind, n: usize, end: usize) -> Slot {
        let (sizes, free, ends, width) = match kind {
            Kind::I32 => (&mut self.pool.i32, &mut self.i32_free, &mut self.i32_end, 4),
            _ => (&mut self.pool.f32, &mut self.f32_free, &mut self.f32_end, 4),
        };
        let best = free
            .iter()
            .enumerate()
            .filter(|&(_, &b)| sizes[b] >= n)
            .min_by_key(|&(_, &b)| sizes[b])
            .map(|(k, _)| k);
        let buf = match best {
            Some(k) => free.swap_remove(k),
            None => {
                sizes.push(n.max(1));
                ends.push(0);
                stats.buffers_created += 1;
                stats.buffer_bytes += n.max(1) * width;
                sizes.len() - 1
            }
        };
        ends[buf] = ends[buf].max(end);
        match kind {
            Kind::I32 => Slot::I32 { buf, len: n },
            _ => Slot::F32 { buf, len: n },
        }
    }

    /// Keeps the buffer of `slot` live until at least `end`.
    fn extend(&mut self, slot: Slot, end: usize) {
        match slot {
            Slot::F32 { buf, .. } => self.f32_end[buf] = self.f32_end[buf].max(end),
            Slot::I32 { buf, .. } => self.i32_end[buf] = self.i32_end[buf].max(end),
            _ => {}
        }
    }

    /// Gives back the buffer of `slot` if its last reader is node `i`.
    fn release(&mut self, slot: Slot, i: usize) {
        match slot {
            Slot::F32 { buf, .. } if self.f32_end[buf] == i && !self.f32_free.contains(&buf) => {
                self.f32_free.push(buf)
            }
            Slot::I32 { buf, .. } if self.i32_end[buf] == i && !self.i32_free.contains(&buf) => {
                self.i32_free.push(buf)
            }
            _ => {}
        }
    }
}

/// When each value is last read: overall, and by the nodes of each device.
struct Liveness {
    uses: Vec<usize>,
    last: Vec<usize>,
    last_on: [Vec<Option<usize>>; 2],
    /// The first split of each device that reads each value.
    first_split_on: [Vec<Option<usize>>; 2],
}

/// Liveness of the values of `g` under the device assignment `devices`.
/// A value read on a device other than its home is copied there at the
/// start of the first split that reads it.
fn liveness(g: &BuiltGraph, devices: &[Device], splits: &[(Device, Range<usize>)]) -> Liveness {
    let n = g.nodes.len();
    let mut live = Liveness {
        uses: vec![0; n],
        last: (0..n).collect(),
        last_on: [vec![None; n], vec![None; n]],
        first_split_on: [vec![None; n], vec![None; n]],
    };
    for (k, (d, range)) in splits.iter().enumerate() {
        for i in range.clone() {
            let node = &g.nodes[i];
            // A reshape reads nothing when the graph runs: its value is its
            // source's buffer, so it reads on its source's device.
            let reader = if crate::splits::runs(&node.op) {
                *d
            } else {
                devices[i]
            };
            for &s in &node.srcs {
                live.uses[s] += 1;
                live.last[s] = i;
                live.last_on[reader.index()][s] = Some(i);
                let first = &mut live.first_split_on[reader.index()][s];
                if first.is_none() {
                    *first = Some(k);
                }
            }
        }
    }
    // Inputs are filled before the walk starts and the output is read
    // after it ends, so both stay live for the whole step.
    for &(_, id) in &g.inputs {
        live.last[id] = usize::MAX;
    }
    live.last[g.output] = usize::MAX;
    live
}

impl Allocator {
    /// An allocator with empty pools.
    pub fn new() -> Self {
        Self::default()
    }

    /// What has been created so far.
    pub fn stats(&self) -> AllocStats {
        self.stats
    }

    /// The pool sizes of device `d`, for its backend to materialize.
    pub fn pool(&self, d: Device) -> &PoolSizes {
        &self.pools[d.index()]
    }

    /// Records a KV region a backend created.
    pub(crate) fn note_region(&mut self, bytes: usize) {
        self.stats.kv_regions += 1;
        self.stats.kv_bytes += bytes;
    }

    /// Plans the buffers of `g` (a fused graph), whose nodes run on
    /// `devices` in the splits `splits`.
    pub(crate) fn plan(
        &mut self,
        g: &BuiltGraph,
        weights: &WeightStore,
        devices: &[Device],
        splits: &[(Device, Range<usize>)],
    ) -> Result<MemPlan> {
        let (kinds, kv_rows) = validate::validate(g, weights)?;
        let live = liveness(g, devices, splits);
        let n = g.nodes.len();
        let mut plan = MemPlan {
            slots: [vec![Slot::None; n], vec![Slot::None; n]],
            devices: devices.to_vec(),
            inplace: vec![false; n],
            transfers: Vec::new(),
            max_weight: None,
            kv: Vec::new(),
        };
        plan.transfers = transfers(g, devices, splits, &live, &kinds);
        let [cpu_pool, gpu_pool] = &mut self.pools;
        let mut walks = [Walk::new(cpu_pool), Walk::new(gpu_pool)];
        let stats = &mut self.stats;
        let mut next_transfer = 0;
        for (k, (_, range)) in splits.iter().enumerate() {
            // Buffers for the values copied in before this split.
            while let Some(t) = plan.transfers.get(next_transfer).copied() {
                if t.before_split != k {
                    break;
                }
                let end = if t.input.is_some() {
                    usize::MAX
                } else {
                    live.last_on[t.to.index()][t.node].unwrap_or(range.start)
                };
                let len = g.nodes[t.node].n_elements();
                let slot = walks[t.to.index()].take(stats, kinds[t.node], len, end);
                plan.slots[t.to.index()][t.node] = slot;
                next_transfer += 1;
            }
            for i in range.clone() {
                let d = devices[i];
                let node = &g.nodes[i];
                let slot = match (&node.op, kinds[i]) {
                    (Op::Reshape, _) => match plan.slots[d.index()][node.srcs[0]] {
                        Slot::F32 { buf, .. } => Slot::F32 {
                            buf,
                            len: node.n_elements(),
                        },
                        Slot::I32 { buf, .. } => Slot::I32 {
                            buf,
                            len: node.n_elements(),
                        },
                        other => other,
                    },
                    (_, Kind::Token) => Slot::None,
                    (Op::Weight(id), _) => {
                        plan.max_weight = plan.max_weight.max(Some(*id));
                        Slot::Weight(*id)
                    }
                    (Op::Input(_), _) => {
                        walks[d.index()].take(stats, Kind::I32, node.n_elements(), usize::MAX)
                    }
                    _ => inplace_or_fresh(g, i, &live, &mut plan, &mut walks[d.index()], stats),
                };
                if let Kind::Weight(_) = kinds[i] {
                    // A weight is readable on every device.
                    plan.slots[0][i] = slot;
                    plan.slots[1][i] = slot;
                } else {
                    plan.slots[d.index()][i] = slot;
                }
                // A value that aliases a buffer keeps it until its own last
                // reader.
                walks[d.index()].extend(slot, live.last[i]);
                // Give back the buffers whose last reader is this node, after
                // the node took its own, so an output never overlaps a live
                // source unless the in-place rule chose so.
                for s in node.srcs.iter().copied().chain(std::iter::once(i)) {
                    for dd in Device::ALL {
                        walks[dd.index()].release(plan.slots[dd.index()][s], i);
                    }
                }
            }
        }
        // The output's copy back to the CPU.
        if let Some(t) = plan.transfers.get(next_transfer).copied() {
            let len = g.nodes[t.node].n_elements();
            let slot = walks[Device::Cpu.index()].take(stats, Kind::F32, len, usize::MAX);
            plan.slots[Device::Cpu.index()][t.node] = slot;
        }
        plan.kv = kv_needs(g, devices, &kv_rows)?;
        Ok(plan)
    }
}

/// The copies each split needs, in split order, and the output's copy
/// back to the CPU (where the result is read) after the last split.
fn transfers(
    g: &BuiltGraph,
    devices: &[Device],
    splits: &[(Device, Range<usize>)],
    live: &Liveness,
    kinds: &[Kind],
) -> Vec<Transfer> {
    let n = g.nodes.len();
    let mut out = Vec::new();
    for (k, _) in splits.iter().enumerate() {
        for d in Device::ALL {
            for s in 0..n {
                let moves = devices[s] != d
                    && live.first_split_on[d.index()][s] == Some(k)
                    && matches!(kinds[s], Kind::F32 | Kind::I32);
                if moves {
                    let input = match g.nodes[s].op {
                        Op::Input(kind) => Some(kind),
                        _ => None,
                    };
                    out.push(Transfer {
                        before_split: k,
                        node: s,
                        to: d,
                        input,
                    });
                }
            }
        }
    }
    if devices[g.output] != Device::Cpu {
        out.push(Transfer {
            before_split: splits.len(),
            node: g.output,
            to: Device::Cpu,
            input: None,
        });
    }
    out
}

/// The KV regions the graph reads or writes (`kv_rows`: each layer's K
/// and V row widths, as validation found them), with their devices.
fn kv_needs(
    g: &BuiltGraph,
    devices: &[Device],
    kv_rows: &[[Option<usize>; 2]],
) -> Result<Vec<KvNeed>> {
    let mut out = Vec::new();
    for (layer, rows) in kv_rows.iter().enumerate() {
        for (kind, row) in [(KvKind::K, rows[0]), (KvKind::V, rows[1])] {
            let Some(row) = row else { continue };
            let device = kv_device(g, devices, layer, kind)?;
            out.push(KvNeed {
                layer,
                kind,
                row,
                device,
            });
        }
    }
    Ok(out)
}

/// The device of the nodes that store into or attend over a layer's
/// region; they must agree, since the region lives on one device.
fn kv_device(g: &BuiltGraph, devices: &[Device], layer: usize, kind: KvKind) -> Result<Device> {
    let mut found: Option<Device> = None;
    for (i, node) in g.nodes.iter().enumerate() {
        let touches = match node.op {
            Op::KvStore { layer: l, kind: k } => l == layer && k == kind,
            Op::RopeKvStore { layer: l, .. } => l == layer && kind == KvKind::K,
            Op::Attention(p) => p.layer == layer,
            _ => false,
        };
        if !touches {
            continue;
        }
        match found {
            Some(d) if d != devices[i] => {
                return Err(validate::err(
                    g,
                    i,
                    format!("layer {layer}'s KV region is used on both devices"),
                ))
            }
            _ => found = Some(devices[i]),
        }
    }
    Ok(found.unwrap_or(Device::Cpu))
}

/// The output slot of a compute node: its first source's buffer when the
/// in-place rule allows it, else a fresh f32 buffer.
fn inplace_or_fresh(
    g: &BuiltGraph,
    i: NodeId,
    live: &Liveness,
    plan: &mut MemPlan,
    w: &mut Walk,
    stats: &mut AllocStats,
) -> Slot {
    let node = &g.nodes[i];
    let len = node.n_elements();
    let d = plan.devices[i].index();
    if node.op.can_be_inplace() {
        let s0 = node.srcs[0];
        let src = &g.nodes[s0];
        // The op may overwrite its first source only if nothing reads that
        // value after it: it is the sole consumer, no alias of the buffer is
        // read later, the source is computed (not an input, weight or KV
        // token) and no other source of the op lives in the same buffer.
        let computed = !matches!(
            src.op,
            Op::Input(_) | Op::Weight(_) | Op::KvStore { .. } | Op::RopeKvStore { .. }
        );
        if let Some(buf) = plan.slots[d][s0].f32_buf() {
            let others_elsewhere = node.srcs[1..]
                .iter()
                .all(|&s| plan.slots[d][s].f32_buf() != Some(buf));
            if computed
                && live.uses[s0] == 1
                && w.f32_end[buf] == i
                && others_elsewhere
                && src.n_elements() == len
            {
                plan.inplace[i] = true;
                return Slot::F32 { buf, len };
            }
        }
    }
    w.take(stats, Kind::F32, len, live.last[i])
}
