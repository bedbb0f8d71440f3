//! minfer for Python: the native module `minfer._minfer` under the Python
//! package in `python/minfer`.
//!
//! The module holds one thing, a server in process
//! ([`minfer_server::Local`]): the same catalog, model threads, router and
//! handlers `minfer serve` has, without a socket. The Python layer sends
//! it the requests of the OpenAI and llama-server APIs and shapes their
//! answers, so that Python gets exactly the tokens, tool calls, grammars
//! and batching the server gives. Every call that waits releases the GIL,
//! so Python threads that generate at once share forward passes. Waits are
//! bounded, so that the Python side sees Ctrl-C between them.

use std::sync::Mutex;
use std::time::Duration;

use minfer_engine::{
    CacheDir, DeviceChoice, EngineConfig, KernelTuning, KvFormat, SimdLevel, SpecConfig, Store,
    StoreConfig,
};
use minfer_server::{Local, ModelConfig, Piece, Reply, ServerConfig, TemplateChoice};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _minfer,
    MinferError,
    PyException,
    "A model that cannot be loaded, a setting that is not valid, or a request the engine refused."
);

/// The settings of a [`Server`], as Python passes them.
struct Settings {
    n_ctx: u32,
    threads: Option<usize>,
    n_parallel: usize,
    batch_size: usize,
    device: String,
    kv_type: String,
    simd: Option<String>,
    seed: Option<u64>,
    chat_template: Option<String>,
    models_dir: Option<String>,
    home: Option<String>,
    /// A draft model for speculative decoding.
    draft: Option<String>,
    /// Prompt lookup's longest n-gram (0: no lookup).
    lookup: usize,
    /// Most guesses checked per step.
    draft_max: Option<usize>,
}

impl Settings {
    fn config(&self, model: Option<String>) -> Result<ServerConfig, String> {
        let device = DeviceChoice::parse(&self.device)?;
        let kv_format = KvFormat::parse(&self.kv_type)
            .ok_or_else(|| format!("unknown KV type {:?} (f16, f32 or q8_0)", self.kv_type))?;
        let simd = SimdLevel::select(self.simd.as_deref()).map_err(|e| e.to_string())?;
        let mut engine = EngineConfig {
            n_ctx: self.n_ctx,
            n_batch: self.batch_size,
            kv_format,
            simd: Some(simd),
            device,
            cache_ram: minfer_engine::default_cache_ram(),
            // Measured once per machine and kept beside the models, as the
            // command line does.
            kernel_tuning: KernelTuning::Measured(Some(CacheDir::new(self.store_home()))),
            ..EngineConfig::default()
        };
        if let Some(t) = self.threads {
            engine.n_threads = t;
        }
        let mut per_model = ModelConfig::new(engine);
        per_model.n_parallel = self.n_parallel;
        per_model.seed = self.seed;
        per_model.chat_template = self.chat_template.clone().map(TemplateChoice::Named);
        if self.draft.is_some() || self.lookup > 0 {
            let mut spec = SpecConfig {
                lookup_max: self.lookup,
                ..SpecConfig::default()
            };
            if let Some(n) = self.draft_max {
                spec.draft_max = n;
            }
            per_model.speculation = Some((self.draft.clone(), spec));
        }
        let mut cfg = ServerConfig::new(model, per_model);
        cfg.models.dir = self.models_dir.clone().map(Into::into);
        // A Python program holds its models for its own life.
        cfg.models.idle = None;
        Ok(cfg)
    }

    /// The store's folder: `home`, else the environment's (`MINFER_HOME`,
    /// `~/.cache/minfer`).
    fn store_home(&self) -> std::path::PathBuf {
        match &self.home {
            Some(h) => h.into(),
            None => StoreConfig::from_env().home,
        }
    }

    fn store(&self) -> Store {
        let mut sc = StoreConfig::from_env();
        sc.home = self.store_home();
        sc.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Store::new(sc)
    }
}

/// A model server in this process: the model given (a GGUF path, a name
/// the store knows, or `hf:…`, pulled on first use), or, with none, every
/// model of the store and of `models_dir`, each loaded when a request
/// names it.
#[pyclass(frozen, module = "minfer._minfer")]
struct Server {
    local: Local,
}

#[pymethods]
impl Server {
    #[new]
    #[pyo3(signature = (model=None, *, n_ctx=4096, threads=None, n_parallel=4, batch_size=512,
                        device="auto".to_string(), kv_type="f16".to_string(), simd=None, seed=None,
                        chat_template=None, models_dir=None, home=None, draft=None, lookup=0,
                        draft_max=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Option<String>,
        n_ctx: u32,
        threads: Option<usize>,
        n_parallel: usize,
        batch_size: usize,
        device: String,
        kv_type: String,
        simd: Option<String>,
        seed: Option<i64>,
        chat_template: Option<String>,
        models_dir: Option<String>,
        home: Option<String>,
        draft: Option<String>,
        lookup: usize,
        draft_max: Option<usize>,
    ) -> PyResult<Server> {
        if n_ctx == 0 || n_parallel == 0 || batch_size == 0 || threads == Some(0) {
            return Err(PyValueError::new_err(
                "n_ctx, n_parallel, batch_size and threads must be at least 1",
            ));
        }
        let s = Settings {
            n_ctx,
            threads,
            n_parallel,
            batch_size,
            device,
            kv_type,
            simd,
            seed: seed.and_then(|s| u64::try_from(s).ok()),
            chat_template,
            models_dir,
            home,
            draft,
            lookup,
            draft_max,
        };
        let cfg = s.config(model).map_err(PyValueError::new_err)?;
        let store = s.store();
        let local = py
            .detach(|| Local::start(store, cfg))
            .map_err(|e| MinferError::new_err(e.to_string()))?;
        Ok(Server { local })
    }

    /// The id of the model loaded at start (`None` without one).
    #[getter]
    fn model(&self) -> Option<String> {
        self.local.model().map(str::to_string)
    }

    /// Sends one request (a JSON body, or empty) and returns at once; its
    /// status and body are read from the `Response`.
    fn request(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> PyResult<Response> {
        let reply = py
            .detach(|| self.local.call(method, path, body))
            .map_err(PyValueError::new_err)?;
        Ok(Response {
            reply: Mutex::new(reply),
        })
    }
}

/// A response read as it comes: its status, then its body; closing it (or
/// dropping it) before the end cancels the generation behind it.
#[pyclass(frozen, module = "minfer._minfer")]
struct Response {
    reply: Mutex<Reply>,
}

impl Response {
    fn lock(&self) -> std::sync::MutexGuard<'_, Reply> {
        self.reply.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Response {
    /// The HTTP status, waiting at most `timeout` seconds for it: `None`
    /// while the answer is being made (a non-streamed one is whole first).
    #[pyo3(signature = (timeout=0.1))]
    fn head(&self, py: Python<'_>, timeout: f64) -> Option<u16> {
        let wait = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
        py.detach(|| self.lock().head(wait))
    }

    /// Whether the body is a stream of events (known once `head` gave
    /// the status).
    #[getter]
    fn stream(&self) -> bool {
        self.lock().stream()
    }

    /// The next bytes of the body, waiting at most `timeout` seconds:
    /// `b""` when nothing came in that time, `None` at the end.
    #[pyo3(signature = (timeout=0.1))]
    fn read<'py>(&self, py: Python<'py>, timeout: f64) -> Option<Bound<'py, PyBytes>> {
        let wait = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
        let piece = py.detach(|| self.lock().next(wait));
        match piece {
            Piece::Data(b) => Some(PyBytes::new(py, &b)),
            Piece::Pending => Some(PyBytes::new(py, b"")),
            Piece::End => None,
        }
    }

    /// Ends the response now; a generation still running is cancelled.
    fn close(&self) {
        self.lock().close();
    }
}

/// The native module.
#[pymodule]
fn _minfer(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Server>()?;
    m.add_class::<Response>()?;
    m.add("MinferError", m.py().get_type::<MinferError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
