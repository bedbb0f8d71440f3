//! Which device runs a model: the `--device` and `-ngl` choices, resolved
//! against the adapters this machine has, and the offload plan they give.

use minfer_graph::{Backend, BackendPlan};

use crate::error::{EngineError, Result};

/// Where a runtime's layers run (llama.cpp's `--device`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU only.
    #[default]
    Cpu,
    /// A GPU: adapter `index` of `minfer devices`, or the best one of any
    /// kind (software adapters such as lavapipe included) when `None`.
    Gpu {
        /// The adapter's index in the listing.
        index: Option<usize>,
    },
    /// A hardware GPU when there is one, else the CPU. Never a software
    /// adapter: those are for testing and must be asked for.
    Auto,
}

impl DeviceChoice {
    /// Parses `cpu`, `gpu`, `gpu:N` or `auto`.
    ///
    /// # Errors
    /// A message naming the accepted spellings.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceChoice::Cpu),
            "gpu" => Ok(DeviceChoice::Gpu { index: None }),
            "auto" => Ok(DeviceChoice::Auto),
            other => match other.strip_prefix("gpu:").map(str::parse::<usize>) {
                Some(Ok(i)) => Ok(DeviceChoice::Gpu { index: Some(i) }),
                _ => Err(format!(
                    "unknown device {s:?}: expected cpu, gpu, gpu:N (an index from `minfer devices`) or auto"
                )),
            },
        }
    }
}

/// One adapter as `minfer devices` prints it.
pub use minfer_gpu::{AdapterDesc, AdapterKind};

/// Every GPU adapter this machine has, in the order `gpu:N` counts them.
pub fn list_devices() -> Vec<AdapterDesc> {
    minfer_gpu::list_adapters()
}

/// The GPU backend `choice` names, opened with `opts`, and the plan for a
/// model of `n_layer` layers with `n_gpu_layers` of them offloaded
/// (`None`: all, and the output part too, as llama.cpp's default). `Auto` without a hardware GPU,
/// `Cpu`, and zero offloaded layers give the CPU plan and no backend.
///
/// # Errors
/// [`EngineError::Config`] when `gpu` was asked for and no adapter opens.
pub(crate) fn open(
    choice: DeviceChoice,
    n_gpu_layers: Option<u32>,
    n_layer: usize,
    opts: minfer_gpu::GpuOptions,
) -> Result<(BackendPlan, Option<Box<dyn Backend>>)> {
    let adapter = match choice {
        DeviceChoice::Cpu => return Ok((BackendPlan::Cpu, None)),
        DeviceChoice::Auto if !minfer_gpu::has_real_gpu() => {
            return Ok((BackendPlan::Cpu, None));
        }
        DeviceChoice::Auto => minfer_gpu::AdapterChoice::Auto,
        DeviceChoice::Gpu { index: None } => minfer_gpu::AdapterChoice::Any,
        DeviceChoice::Gpu { index: Some(i) } => minfer_gpu::AdapterChoice::Index(i),
    };
    let n_layer = n_layer as u32;
    let plan = BackendPlan::from_gpu_layers(n_gpu_layers.unwrap_or(n_layer + 1), n_layer);
    if !plan.uses_gpu() {
        return Ok((plan, None));
    }
    let gpu = minfer_gpu::Gpu::open_with(adapter, opts)
        .map_err(|e| EngineError::Config(e.to_string()))?;
    tracing::info!(
        adapter = gpu.adapter().name.as_str(),
        kind = gpu.adapter().kind.name(),
        "GPU backend"
    );
    Ok((plan, Some(Box::new(minfer_gpu::GpuBackend::new(gpu)))))
}
