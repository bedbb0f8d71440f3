//! The settings of a runtime, chosen by front ends: [`EngineConfig`] and
//! the values it holds that are not plain numbers ([`CacheDir`]), with
//! [`default_cache_ram`] to size the prompt cache to the machine.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use minfer_graph::{Fusion, KvFormat, SimdLevel};

use crate::device::DeviceChoice;
use crate::error::{EngineError, Result};

/// Settings of an [`Engine`](crate::Engine), a [`Runtime`](crate::Runtime)
/// and everything built on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Context window: KV cells per layer, and the bound on positions.
    pub n_ctx: u32,
    /// Threads of the compute pool (the caller's thread included).
    pub n_threads: usize,
    /// Longest micro-batch: longer evaluations are split into batches of
    /// at most this many tokens.
    pub n_batch: usize,
    /// Storage format of the KV cache (llama.cpp's default is F16).
    pub kv_format: KvFormat,
    /// Graph rewrites to apply.
    pub fusion: Fusion,
    /// SIMD level of the kernels; `None` picks the best this CPU has.
    pub simd: Option<SimdLevel>,
    /// Repack weight matrices at start-up into the interleaved layout the
    /// fastest kernels read (where the CPU has them); results are the same
    /// bits either way. llama.cpp's `--no-repack` turns its repacking off.
    pub repack: bool,
    /// Which device runs the layers (the CPU unless a front end asks).
    pub device: DeviceChoice,
    /// How many layers the GPU runs, the last ones (llama.cpp's `-ngl`);
    /// `None` offloads every layer and the output part.
    pub n_gpu_layers: Option<u32>,
    /// Let the GPU kernels use subgroup operations where the device has
    /// them (on by default); off runs the portable kernels (for checking
    /// one against the other).
    pub gpu_subgroups: bool,
    /// Bytes of host memory for the prompt cache below the KV cells:
    /// prefixes of released sequences kept as their K/V rows, so that a
    /// long prompt that comes back after its cells were evicted is copied
    /// back instead of recomputed (llama.cpp's `--cache-ram`). 0 (the
    /// default here; front ends size it with [`default_cache_ram`]) keeps
    /// none.
    ///
    /// [`default_cache_ram`]: crate::default_cache_ram
    pub cache_ram: usize,
    /// Folder of the prompt cache's disk tier: the same blocks as files,
    /// so that a restarted process restores what an earlier one computed.
    /// Setting it costs one read of every weight at start-up (the model's
    /// identity names the files' folder). `None` keeps nothing on disk.
    pub cache_dir: Option<CacheDir>,
    /// How the CPU kernels choose, per weight type, the tile kernel and
    /// prefetch distance of a lone token's products (a decode step of one
    /// sequence): fixed, or measured on this machine.
    pub kernel_tuning: KernelTuning,
}

/// Whether the CPU kernels' choices for a lone token's products are
/// measured on the machine (see `minfer_cpu::tuning`). Either way the
/// results are the same bits; only decode speed differs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelTuning {
    /// The kernels' fixed choices; nothing is measured (the default of a
    /// runtime built as a library, and of tests).
    #[default]
    Fixed,
    /// Measured when a runtime starts, about a tenth of a second per
    /// weight type, once per process, machine, SIMD level and thread
    /// count; with a folder, kept there in `kernel-tuning.tsv` so that
    /// later processes on the same machine measure nothing.
    Measured(Option<CacheDir>),
}

impl KernelTuning {
    /// The file a measured tuning is kept in, when it is kept.
    pub fn file(self) -> Option<PathBuf> {
        match self {
            KernelTuning::Measured(Some(dir)) => Some(dir.path().join("kernel-tuning.tsv")),
            _ => None,
        }
    }
}

impl EngineConfig {
    /// Checks the settings for a model whose K/V rows are `kv_width` values.
    ///
    /// # Errors
    /// [`EngineError::Config`] for a zero `n_ctx`, `n_threads` or
    /// `n_batch`, an `n_ctx` beyond `i32::MAX`, or a Q8_0 cache whose rows
    /// are not whole blocks.
    pub fn validate(&self, kv_width: usize) -> Result<()> {
        if self.n_ctx == 0 || self.n_ctx > i32::MAX as u32 {
            return Err(EngineError::Config(format!(
                "n_ctx {} must be between 1 and {}",
                self.n_ctx,
                i32::MAX
            )));
        }
        if self.n_threads == 0 || self.n_batch == 0 {
            return Err(EngineError::Config(format!(
                "n_threads ({}) and n_batch ({}) must be positive",
                self.n_threads, self.n_batch
            )));
        }
        if self.kv_format == KvFormat::Q8_0 && !kv_width.is_multiple_of(32) {
            return Err(EngineError::Config(format!(
                "a q8_0 KV cache needs rows of whole 32-value blocks; this model's are {kv_width}"
            )));
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            n_ctx: 4096,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            n_batch: 512,
            kv_format: KvFormat::F16,
            fusion: Fusion::ALL,
            simd: None,
            repack: true,
            device: DeviceChoice::Cpu,
            n_gpu_layers: None,
            gpu_subgroups: true,
            cache_ram: 0,
            cache_dir: None,
            kernel_tuning: KernelTuning::Fixed,
        }
    }
}

/// A folder (of the prompt cache, of the kernel tuning), interned for the life of the process so that
/// [`EngineConfig`] stays `Copy` (front ends copy it freely). Equal paths
/// share one allocation; a process names a handful at most.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CacheDir(&'static Path);

impl CacheDir {
    /// The folder `path` (not created or checked until a runtime opens it).
    pub fn new(path: impl Into<PathBuf>) -> CacheDir {
        static INTERNED: Mutex<Vec<&'static Path>> = Mutex::new(Vec::new());
        let path = path.into();
        let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = all.iter().find(|p| **p == path) {
            return CacheDir(p);
        }
        let p: &'static Path = Box::leak(path.into_boxed_path());
        all.push(p);
        CacheDir(p)
    }

    /// The folder.
    pub fn path(self) -> &'static Path {
        self.0
    }
}

impl std::fmt::Debug for CacheDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Upper bound of [`default_cache_ram`].
const MAX_DEFAULT_RAM: usize = 8 << 30;
/// [`default_cache_ram`] where the memory size is unknown.
const FALLBACK_RAM: usize = 4 << 30;

/// A RAM budget sized to the machine: a quarter of physical memory (from
/// `/proc/meminfo`), at most 8 GiB; 4 GiB where the size is unknown. Read
/// once by front ends when they build their configuration.
pub fn default_cache_ram() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s));
    match total {
        Some(bytes) => (bytes / 4).min(MAX_DEFAULT_RAM),
        None => FALLBACK_RAM,
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_is_a_quarter_of_memory_up_to_8_gib() {
        let info = "MemTotal:       24683664 kB\nMemFree: 1 kB\n";
        assert_eq!(mem_total(info), Some(24_683_664 * 1024));
        assert_eq!(mem_total("nothing"), None);
        let d = default_cache_ram();
        assert!(d > 0 && d <= MAX_DEFAULT_RAM);
    }

    #[test]
    fn cache_dirs_are_interned() {
        let a = CacheDir::new("/tmp/minfer-a");
        let b = CacheDir::new(PathBuf::from("/tmp/minfer-a"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.path(), b.path()));
        assert_ne!(a, CacheDir::new("/tmp/minfer-b"));
    }
}
