//! Adapters and the opened device: which GPUs this machine has, which one
//! a run takes, and the device and queue every kernel is dispatched on.

use std::sync::Arc;

use crate::error::{GpuError, Result};

/// What kind of device an adapter drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterKind {
    /// A graphics card with its own memory.
    Discrete,
    /// A GPU that shares the CPU's memory.
    Integrated,
    /// A GPU seen through a virtual machine.
    Virtual,
    /// A software rasterizer on the CPU (Mesa's lavapipe, SwiftShader):
    /// correct, never fast.
    Software,
    /// A device wgpu cannot classify.
    Other,
}

impl AdapterKind {
    fn from_wgpu(t: wgpu::DeviceType) -> Self {
        match t {
            wgpu::DeviceType::DiscreteGpu => AdapterKind::Discrete,
            wgpu::DeviceType::IntegratedGpu => AdapterKind::Integrated,
            wgpu::DeviceType::VirtualGpu => AdapterKind::Virtual,
            wgpu::DeviceType::Cpu => AdapterKind::Software,
            wgpu::DeviceType::Other => AdapterKind::Other,
        }
    }

    /// Lower is preferred by `--device auto`; `None` is never taken by it.
    fn auto_rank(self) -> Option<u8> {
        match self {
            AdapterKind::Discrete => Some(0),
            AdapterKind::Integrated => Some(1),
            AdapterKind::Virtual => Some(2),
            AdapterKind::Other => Some(3),
            AdapterKind::Software => None,
        }
    }

    /// A short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            AdapterKind::Discrete => "discrete",
            AdapterKind::Integrated => "integrated",
            AdapterKind::Virtual => "virtual",
            AdapterKind::Software => "software",
            AdapterKind::Other => "other",
        }
    }
}

/// One adapter as `minfer devices` lists it.
#[derive(Clone, Debug)]
pub struct AdapterDesc {
    /// Position in the enumeration (what `--device gpu:N` names).
    pub index: usize,
    /// The driver's name for the device.
    pub name: String,
    /// Discrete, integrated, software...
    pub kind: AdapterKind,
    /// The graphics API wgpu drives it through (Vulkan, Metal, Dx12).
    pub api: String,
    /// Driver name and version, as the driver reports them.
    pub driver: String,
    /// Largest buffer the device can create, in bytes.
    pub max_buffer: u64,
    /// Largest storage-buffer binding a shader can see, in bytes (tensors
    /// larger than this are split across bindings).
    pub max_binding: u64,
    /// Largest workgroup count per dimension.
    pub max_workgroups: u32,
    /// Workgroup shared memory, in bytes.
    pub shared_memory: u32,
}

/// Which adapter to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterChoice {
    /// The best real GPU; never a software adapter.
    Auto,
    /// The best adapter of any kind, software ones included.
    Any,
    /// The adapter at this enumeration index.
    Index(usize),
}

fn instance() -> wgpu::Instance {
    // Only the native APIs: the GL backend lacks the compute features the
    // kernels need, and its adapters would only confuse the listing.
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

fn describe(index: usize, a: &wgpu::Adapter) -> AdapterDesc {
    let info = a.get_info();
    let l = a.limits();
    let driver = match (info.driver.is_empty(), info.driver_info.is_empty()) {
        (true, _) => info.driver_info.clone(),
        (false, true) => info.driver.clone(),
        (false, false) => format!("{} {}", info.driver, info.driver_info),
    };
    AdapterDesc {
        index,
        name: info.name.clone(),
        kind: AdapterKind::from_wgpu(info.device_type),
        api: format!("{:?}", info.backend),
        driver,
        max_buffer: l.max_buffer_size,
        max_binding: l.max_storage_buffer_binding_size,
        max_workgroups: l.max_compute_workgroups_per_dimension,
        shared_memory: l.max_compute_workgroup_storage_size,
    }
}

fn adapters(inst: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    pollster::block_on(
        inst.enumerate_adapters(
            wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
        ),
    )
}

/// Every adapter wgpu finds, in enumeration order.
pub fn list_adapters() -> Vec<AdapterDesc> {
    let inst = instance();
    adapters(&inst)
        .iter()
        .enumerate()
        .map(|(i, a)| describe(i, a))
        .collect()
}

/// Whether `--device auto` would find a real GPU here.
///
/// On Linux a hardware GPU has a device node (a DRM render node, NVIDIA's
/// or WSL's); without one the Vulkan loader is not even started, which
/// keeps a headless server's start-up free of the loader's cost and of the
/// messages its window-system layers print when no display exists.
pub fn has_real_gpu() -> bool {
    if cfg!(target_os = "linux") && !linux_gpu_node() {
        return false;
    }
    list_adapters().iter().any(|a| a.kind.auto_rank().is_some())
}

/// Whether a GPU device node exists under `/dev`.
fn linux_gpu_node() -> bool {
    let render = std::fs::read_dir("/dev/dri").is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    });
    render
        || std::path::Path::new("/dev/nvidia0").exists()
        || std::path::Path::new("/dev/dxg").exists()
}

/// How a device is opened: choices a front end makes once, passed in so
/// that this crate reads no environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// Let kernels use subgroup operations on a device whose subgroups
    /// have at least 8 invocations (on by default); off runs the portable
    /// kernels on such a device too.
    pub subgroups: bool,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions { subgroups: true }
    }
}

/// An opened device: the queue kernels are submitted to and the limits
/// they are planned against.
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    desc: AdapterDesc,
    pub(crate) limits: wgpu::Limits,
    /// Whether kernels may use subgroup operations over subgroups of at
    /// least 8 invocations.
    pub(crate) subgroups: bool,
    pub(crate) kernels: crate::kernel::KernelCache,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("adapter", &self.desc).finish()
    }
}

impl Gpu {
    /// Opens the adapter `choice` names with the largest limits it offers,
    /// with the default [`GpuOptions`].
    ///
    /// # Errors
    /// As [`open_with`](Gpu::open_with).
    pub fn open(choice: AdapterChoice) -> Result<Arc<Gpu>> {
        Self::open_with(choice, GpuOptions::default())
    }

    /// Opens the adapter `choice` names with the largest limits it offers,
    /// as `opts` says.
    ///
    /// # Errors
    /// [`GpuError::NoAdapter`] when none matches (the message lists what
    /// was found), [`GpuError::Device`] when the device cannot be opened.
    pub fn open_with(choice: AdapterChoice, opts: GpuOptions) -> Result<Arc<Gpu>> {
        let inst = instance();
        let all = adapters(&inst);
        let seen = || {
            let names: Vec<String> = all
                .iter()
                .map(|a| {
                    let i = a.get_info();
                    format!(
                        "{} ({})",
                        i.name,
                        AdapterKind::from_wgpu(i.device_type).name()
                    )
                })
                .collect();
            if names.is_empty() {
                "wgpu found no Vulkan, Metal or DX12 adapter (on Linux, install a Vulkan \
                 driver: Mesa's mesa-vulkan-drivers provides lavapipe, a software one)"
                    .to_string()
            } else {
                format!("found {}", names.join(", "))
            }
        };
        let rank_any = |k: AdapterKind| k.auto_rank().unwrap_or(9);
        let pick = match choice {
            AdapterChoice::Index(i) => all.get(i).map(|a| (i, a)),
            AdapterChoice::Auto => all
                .iter()
                .enumerate()
                .filter_map(|(i, a)| {
                    let k = AdapterKind::from_wgpu(a.get_info().device_type);
                    k.auto_rank().map(|r| (r, i, a))
                })
                .min_by_key(|&(r, i, _)| (r, i))
                .map(|(_, i, a)| (i, a)),
            AdapterChoice::Any => all.iter().enumerate().min_by_key(|&(i, a)| {
                (
                    rank_any(AdapterKind::from_wgpu(a.get_info().device_type)),
                    i,
                )
            }),
        };
        let Some((index, adapter)) = pick else {
            let what = match choice {
                AdapterChoice::Auto => "no hardware GPU (software adapters need --device gpu)",
                AdapterChoice::Any => "no adapter at all",
                AdapterChoice::Index(_) => "no adapter at that index",
            };
            return Err(GpuError::NoAdapter(format!("{what}; {}", seen())));
        };
        let desc = describe(index, adapter);
        let limits = adapter.limits();
        // Subgroups of at least 8 invocations let the products share their
        // activation reads (see shaders/matmul/act_sg.wgsl) and several
        // kernels drop their barriers. `opts.subgroups` off turns them off
        // (to run the portable kernels on a device that has them).
        let subgroups = adapter.features().contains(wgpu::Features::SUBGROUP)
            && adapter.get_info().subgroup_min_size >= 8
            && opts.subgroups;
        let features = if subgroups {
            wgpu::Features::SUBGROUP
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("minfer"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| GpuError::Device {
            adapter: desc.name.clone(),
            msg: e.to_string(),
        })?;
        Ok(Arc::new(Gpu {
            device,
            queue,
            desc,
            limits,
            subgroups,
            kernels: Default::default(),
        }))
    }

    /// The adapter this device was opened on.
    pub fn adapter(&self) -> &AdapterDesc {
        &self.desc
    }

    /// Largest storage binding a kernel can see, in bytes, rounded down to
    /// a multiple of 256 so that split points are aligned.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            & !255
    }
}
