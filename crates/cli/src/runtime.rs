//! Options shared by the commands that run a model, and model loading.

use anyhow::Result;
use minfer_engine::{
    DeviceChoice, Engine, EngineConfig, KernelTuning, KvFormat, LoadedModel, SimdLevel, Store,
};

/// How to run a model: threads, context, kernels, KV format.
#[derive(clap::Args, Clone, Debug)]
pub struct RuntimeArgs {
    /// Threads for the compute pool (default: every core).
    #[arg(short = 't', long, value_parser = parse_threads, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    /// Context window in tokens: the KV cache holds this many positions.
    #[arg(long = "n-ctx", short = 'c', default_value_t = 4096, value_parser = parse_n_ctx, allow_negative_numbers = true)]
    pub n_ctx: u32,
    /// Most tokens one forward pass computes (llama.cpp's -b): a long
    /// prompt is evaluated in chunks of this many, and the rows of
    /// parallel requests share them. Same results at any size.
    #[arg(short = 'b', long = "batch-size", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub batch_size: u32,
    /// Kernel path: scalar, avx2, avx2-vnni (AVX2 with AVX-VNNI) or avx512
    /// (default: the best this CPU has).
    #[arg(long, env = "MINFER_SIMD")]
    pub simd: Option<String>,
    /// KV cache format: f16 (llama.cpp's default), f32 or q8_0.
    #[arg(long = "kv-type", default_value = "f16", value_parser = parse_kv)]
    pub kv_type: KvFormat,
    /// Keep the weights in the file's layout instead of repacking them at
    /// start-up for the fastest kernels (same results, slower; as
    /// llama.cpp's --no-repack).
    #[arg(long = "no-repack")]
    pub no_repack: bool,
    /// How the CPU kernels read a decode step's weights for one sequence:
    /// `measured` (the default) times the choices (kernel, prefetch
    /// distance) per weight type on this machine once and keeps them in
    /// the store folder (kernel-tuning.tsv); `fixed` uses the kernels'
    /// built-in choices. Same results either way.
    #[arg(long = "kernel-tuning", value_name = "measured|fixed", default_value = "measured", value_parser = ["measured", "fixed"])]
    pub kernel_tuning: String,
    /// Where the layers run: auto (a hardware GPU when there is one, else
    /// the CPU), cpu, gpu (the best adapter, software ones such as Mesa's
    /// lavapipe included) or gpu:N (an index from `minfer devices`).
    #[arg(long, default_value = "auto", value_parser = DeviceChoice::parse, env = "MINFER_DEVICE")]
    pub device: DeviceChoice,
    /// Layers the GPU runs, the last ones (llama.cpp's -ngl); more than the
    /// model has also puts the output layer there. Default: every layer
    /// and the output. 0 keeps everything on the CPU.
    #[arg(long = "n-gpu-layers", visible_alias = "gpu-layers", value_name = "N")]
    pub n_gpu_layers: Option<u32>,
    /// Subgroup operations in the GPU kernels, where the device has them:
    /// on (the default) or off (the portable kernels everywhere, to check
    /// one against the other).
    #[arg(long = "gpu-subgroups", value_name = "on|off", default_value = "on", value_parser = parse_on_off, env = "MINFER_GPU_SUBGROUPS")]
    pub gpu_subgroups: bool,
    /// Host memory for the prompt cache below the KV cells, in MiB
    /// (llama.cpp's --cache-ram): prefixes of finished requests are kept
    /// as their KV bytes, in blocks of 256 tokens, so a long prompt whose
    /// cells were evicted is copied back instead of recomputed (same
    /// results). Default: a quarter of physical memory, at most 8192. 0
    /// turns it off.
    #[arg(long = "cache-ram", value_name = "MIB")]
    pub cache_ram: Option<u64>,
    /// Folder for the prompt cache on disk: the same blocks as files, in a
    /// subfolder per model and KV format, so that a restarted server
    /// restores a long system prompt instead of recomputing it. Files that
    /// fail their checks are refused and removed. Costs one read of the
    /// weights at start-up. Default: no disk cache.
    #[arg(long = "cache-dir", value_name = "DIR")]
    pub cache_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub diag: crate::trace::DiagArgs,
}

/// `--threads`: a whole number, at least 1 (checked here so that a bad
/// value is reported before a model is loaded).
fn parse_threads(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("must be a whole number >= 1".into()),
    }
}

/// `--n-ctx`: between 1 and the largest position the engine can address.
fn parse_n_ctx(s: &str) -> Result<u32, String> {
    let max = i32::MAX as u32;
    match s.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from 1 to {max}")),
    }
}

/// `--gpu-subgroups`: on or off (also 1 or 0, as the environment
/// variable was set before the flag existed).
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

fn parse_kv(s: &str) -> Result<KvFormat, String> {
    KvFormat::parse(s).ok_or_else(|| format!("unknown KV format {s:?} (expected f16, f32 or q8_0)"))
}

impl RuntimeArgs {
    /// The engine settings these options describe.
    pub fn engine_config(&self) -> Result<EngineConfig> {
        let simd = SimdLevel::select(self.simd.as_deref())?;
        let mut cfg = EngineConfig {
            n_ctx: self.n_ctx,
            n_batch: self.batch_size as usize,
            kv_format: self.kv_type,
            simd: Some(simd),
            repack: !self.no_repack,
            device: self.device,
            n_gpu_layers: self.n_gpu_layers,
            gpu_subgroups: self.gpu_subgroups,
            cache_ram: match self.cache_ram {
                Some(mib) => usize::try_from(mib)?.saturating_mul(1 << 20),
                None => minfer_engine::default_cache_ram(),
            },
            cache_dir: self.cache_dir.clone().map(minfer_engine::CacheDir::new),
            kernel_tuning: match self.kernel_tuning.as_str() {
                "fixed" => KernelTuning::Fixed,
                _ => KernelTuning::Measured(Some(minfer_engine::CacheDir::new(
                    minfer_engine::StoreConfig::from_env().home,
                ))),
            },
            ..EngineConfig::default()
        };
        if let Some(t) = self.threads {
            anyhow::ensure!(t > 0, "--threads must be at least 1");
            cfg.n_threads = t;
        }
        Ok(cfg)
    }
}

/// Resolves (pulling if needed) and loads a model with its tokenizer and
/// chat template.
pub fn load(store: &Store, spec: &str) -> Result<LoadedModel> {
    let loaded = crate::logs::with_progress(&format!("loading {spec}"), || {
        LoadedModel::load(store, spec)
    })?;
    Ok(loaded)
}

/// Logs how full the KV cache is (at the end of a command).
pub fn log_kv_usage(rt: &minfer_engine::Runtime) {
    let u = rt.usage();
    tracing::info!(
        used = u.used,
        n_ctx = u.n_ctx,
        live = u.live,
        idle = u.idle,
        graph_builds = rt.graph_builds(),
        graph_reuses = rt.graph_reuses(),
        "KV cells in use: {} of {}",
        u.used,
        u.n_ctx
    );
}

/// A single-sequence engine for a loaded model.
pub fn engine(loaded: &LoadedModel, args: &RuntimeArgs) -> Result<Engine> {
    Ok(loaded.engine(args.engine_config()?)?)
}

/// `minfer devices`: the adapters wgpu finds, one per line.
pub fn list_devices() -> Result<()> {
    let all = minfer_engine::list_devices();
    if all.is_empty() {
        println!(
            "no GPU adapter found (wgpu looked for Vulkan, Metal and DX12; on Linux, \
             Mesa's mesa-vulkan-drivers package provides lavapipe, a software one)"
        );
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for a in &all {
        println!(
            "gpu:{}  {}  [{}, {}]",
            a.index,
            a.name,
            a.kind.name(),
            a.api
        );
        println!("        driver: {}", a.driver);
        println!(
            "        largest buffer {:.0} MiB, largest binding {:.0} MiB, {} KiB workgroup memory, \
             {} workgroups per dimension",
            mib(a.max_buffer),
            mib(a.max_binding),
            a.shared_memory / 1024,
            a.max_workgroups
        );
        println!("        memory: not reported through wgpu");
        if a.kind == minfer_engine::AdapterKind::Software {
            println!("        software adapter: correct but slow; --device auto never takes it, --device gpu does");
        }
    }
    Ok(())
}
