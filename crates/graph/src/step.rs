//! One step of a built graph: the inputs checked and written into the
//! host backend's buffers, the splits run in order on their devices with
//! the copies between them, and the output read back. The cache finds or
//! builds the graph; this module runs it.

use std::time::{Duration, Instant};

use crate::backend::{Backend, GraphView, HostBackend};
use crate::entry::Entry;
use crate::error::{GraphError, Result};
use crate::ir::InputKind;
use crate::plan::{MemPlan, Slot, Transfer};
use crate::types::Device;
use crate::weights::WeightStore;

/// The data of one step, copied into the graph's input buffers. A slice
/// for an input the graph does not have is ignored (it may be empty).
#[derive(Clone, Copy, Debug, Default)]
pub struct StepInputs<'a> {
    /// `n_tokens` token ids.
    pub token_ids: &'a [i32],
    /// `n_tokens` positions, each below `n_ctx`.
    pub positions: &'a [i32],
    /// `n_tokens` KV cells the tokens write.
    pub kv_cells: &'a [i32],
    /// `n_tokens + 1` offsets into `window_cells`.
    pub window_offsets: &'a [i32],
    /// Every token's attention window, concatenated.
    pub window_cells: &'a [i32],
    /// The position of each cell of `window_cells` (read by sliding-window
    /// attention only).
    pub window_positions: &'a [i32],
    /// `n_out` rows (below `n_tokens`) whose outputs are wanted.
    pub out_ids: &'a [i32],
}

/// Where the engine's own time went in the last step, measured only when
/// [`GraphCache::set_timing`] is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepTimings {
    /// The last `prepare`: params compare and MRU update on a reuse, or
    /// the whole build on a miss.
    pub prepare: Duration,
    /// Validating and copying the step inputs.
    pub fill: Duration,
    /// The scheduler walk, kernels included.
    pub run: Duration,
    /// Time inside node kernels during the walk.
    pub kernels: Duration,
}

impl StepTimings {
    /// The walk's own cost: `run` minus the kernels.
    pub fn sched_overhead(&self) -> Duration {
        self.run.saturating_sub(self.kernels)
    }
}

/// The devices a step runs on: the host backend, and the GPU's when the
/// cache has one.
pub(crate) struct Devices<'a> {
    /// The backend whose buffers are host memory.
    pub host: &'a mut dyn HostBackend,
    /// The GPU backend, when there is one.
    pub gpu: Option<&'a mut (dyn Backend + 'static)>,
}

/// Runs built graph `e` on one step's inputs and returns its output (the
/// logits: `n_out` rows of the output width), read from the host backend
/// without a copy. Inputs are validated before anything is written,
/// positions against `n_ctx` included. `census` traces the graph's op
/// census; `timings`, when given, is filled with where the time went.
/// Allocates nothing.
pub(crate) fn run<'a>(
    e: &Entry,
    devices: Devices<'a>,
    weights: &WeightStore,
    inputs: &StepInputs,
    census: bool,
    timings: Option<&mut StepTimings>,
) -> Result<&'a [f32]> {
    let t_fill = timings.is_some().then(Instant::now);
    let Devices { host, mut gpu } = devices;
    if let Some(max) = e.plan.max_weight {
        if max.0 as usize >= weights.len() {
            return Err(GraphError::InvalidGraph(format!(
                "graph {} reads weight {} but the store holds {}",
                e.uid.0,
                max.0,
                weights.len()
            )));
        }
    }
    validate(e, inputs)?;
    let host_slots = e.plan.on(Device::Cpu);
    for &(kind, id) in &e.graph.inputs {
        host.write_i32(host_slots[id], input(inputs, kind))?;
    }
    let t_run = timings.is_some().then(Instant::now);
    if census {
        e.sched.trace(e.uid.0, e.graph.nodes.len());
    }
    let window_len = inputs.window_cells.len();
    host.set_step(window_len, e.sched.trace_key);
    let timed = timings.is_some();
    let mut kernels = Duration::ZERO;
    let mut next = 0;
    for k in 0..=e.sched.splits.len() {
        while let Some(t) = e.plan.transfers.get(next) {
            if t.before_split != k {
                break;
            }
            transfer(&mut *host, gpu.as_deref_mut(), &e.plan, t, window_len)?;
            next += 1;
        }
        let Some(split) = e.sched.splits.get(k) else {
            break;
        };
        let view = GraphView {
            uid: e.uid,
            graph: &e.graph,
            params: &e.params,
            plan: &e.plan,
            splits: &e.sched.ranges[split.device.index()],
            weights,
        };
        kernels += match split.device {
            Device::Cpu => host.run(&view, split.nodes.clone(), timed)?,
            Device::Gpu => match gpu.as_deref_mut() {
                Some(g) => g.run(&view, split.nodes.clone(), timed)?,
                None => return Err(no_gpu()),
            },
        };
    }
    if let (Some(t), Some(tf), Some(tr)) = (timings, t_fill, t_run) {
        t.fill = tr - tf;
        t.run = tr.elapsed();
        t.kernels = kernels;
    }
    host.f32_values(host_slots[e.graph.output])
}

/// The step's values for input `kind`.
fn input<'a>(inputs: &StepInputs<'a>, kind: InputKind) -> &'a [i32] {
    match kind {
        InputKind::TokenIds => inputs.token_ids,
        InputKind::Positions => inputs.positions,
        InputKind::KvCells => inputs.kv_cells,
        InputKind::WindowOffsets => inputs.window_offsets,
        InputKind::WindowCells => inputs.window_cells,
        InputKind::WindowPositions => inputs.window_positions,
        InputKind::OutIds => inputs.out_ids,
    }
}

/// Checks the step inputs against the graph, before anything runs.
pub(crate) fn validate(e: &Entry, inputs: &StepInputs) -> Result<()> {
    let p = &e.params;
    let (n, n_ctx) = (p.n_tokens as usize, p.compute.n_ctx as usize);
    // A position at or past the context is refused whether or not the
    // graph reads positions: it would name a cell that does not exist.
    if let Some(&pos) = inputs
        .positions
        .iter()
        .find(|&&q| usize::try_from(q).map_or(true, |q| q >= n_ctx))
    {
        return Err(GraphError::PositionOutOfRange {
            pos: pos.into(),
            n_ctx,
        });
    }
    for &(kind, id) in &e.graph.inputs {
        let cap = e.graph.nodes[id].n_elements();
        match kind {
            InputKind::TokenIds => check_len("token_ids", inputs.token_ids.len(), n)?,
            InputKind::Positions => check_len("positions", inputs.positions.len(), n)?,
            InputKind::KvCells => {
                check_len("kv_cells", inputs.kv_cells.len(), n)?;
                check_cells(inputs.kv_cells, n_ctx)?;
            }
            InputKind::WindowOffsets => {
                let o = inputs.window_offsets;
                check_len("window_offsets", o.len(), n + 1)?;
                let sorted = o.windows(2).all(|w| w[0] <= w[1]);
                let in_range = o.first().is_some_and(|&f| f >= 0)
                    && o.last()
                        .is_some_and(|&l| l as usize <= inputs.window_cells.len());
                if !sorted || !in_range {
                    return Err(GraphError::BadInput {
                        what: "window_offsets",
                        msg: format!(
                            "offsets must rise from 0 to at most {} (the window cells)",
                            inputs.window_cells.len()
                        ),
                    });
                }
            }
            InputKind::WindowCells => {
                if inputs.window_cells.len() > cap {
                    return Err(GraphError::BadInput {
                        what: "window_cells",
                        msg: format!("{} cells, room for {cap}", inputs.window_cells.len()),
                    });
                }
                check_cells(inputs.window_cells, n_ctx)?;
            }
            InputKind::WindowPositions => check_len(
                "window_positions",
                inputs.window_positions.len(),
                inputs.window_cells.len(),
            )?,
            InputKind::OutIds => {
                check_len("out_ids", inputs.out_ids.len(), p.n_out as usize)?;
                if let Some(&bad) = inputs
                    .out_ids
                    .iter()
                    .find(|&&r| usize::try_from(r).map_or(true, |r| r >= n))
                {
                    return Err(GraphError::BadInput {
                        what: "out_ids",
                        msg: format!("row {bad} is not one of the {n} tokens"),
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_len(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(GraphError::BadInput {
            what,
            msg: format!("{got} values, the graph takes {want}"),
        });
    }
    Ok(())
}

fn check_cells(cells: &[i32], n_ctx: usize) -> Result<()> {
    match cells
        .iter()
        .find(|&&c| usize::try_from(c).map_or(true, |c| c >= n_ctx))
    {
        Some(&c) => Err(GraphError::CellOutOfRange {
            cell: c.into(),
            n_ctx,
        }),
        None => Ok(()),
    }
}

pub(crate) fn no_gpu() -> GraphError {
    GraphError::Backend {
        backend: "GPU",
        msg: "the offload plan names the GPU, but the cache has no GPU backend".into(),
    }
}

/// Carries one value across a split boundary.
fn transfer(
    cpu: &mut dyn HostBackend,
    gpu: Option<&mut (dyn Backend + 'static)>,
    plan: &MemPlan,
    t: &Transfer,
    window_len: usize,
) -> Result<()> {
    let gpu = gpu.ok_or_else(no_gpu)?;
    let (cpu_slot, gpu_slot) = (plan.on(Device::Cpu)[t.node], plan.on(Device::Gpu)[t.node]);
    match t.to {
        Device::Gpu => match cpu_slot {
            Slot::I32 { .. } => {
                let v = cpu.i32_values(cpu_slot)?;
                // The window inputs are sized for the widest possible
                // windows; only their filled part is copied.
                let n = match t.input {
                    Some(InputKind::WindowCells | InputKind::WindowPositions) => {
                        window_len.min(v.len())
                    }
                    _ => v.len(),
                };
                gpu.write_i32(gpu_slot, &v[..n])
            }
            _ => gpu.write_f32(gpu_slot, cpu.f32_values(cpu_slot)?),
        },
        Device::Cpu => gpu.read_f32(gpu_slot, cpu.f32_values_mut(cpu_slot)?),
    }
}
