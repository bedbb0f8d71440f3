//! Logging and the settings read once at startup.
//!
//! Everything the process takes from its environment is read here, in
//! `main`, into one [`Startup`] value; the library crates never read the
//! environment, so nothing does in a decode step.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result};
use minfer_store::StoreConfig;

/// The environment variable holding a log filter in env-filter syntax
/// (`info`, `minfer_graph=debug,warn`); it overrides `-v`.
pub const LOG_ENV: &str = "MINFER_LOG";

/// Settings gathered at startup from the environment and global flags.
#[derive(Clone, Debug)]
pub struct Startup {
    /// `-v` count: 0 warnings only, 1 info, 2 or more debug.
    pub verbose: u8,
    /// `MINFER_LOG`, when set and not empty.
    pub log_filter: Option<String>,
    /// Whether stderr is a terminal (progress bars, colours).
    pub stderr_tty: bool,
    /// `NO_COLOR` is set (and not empty): no terminal colours.
    pub no_color: bool,
    /// The model store's settings (`MINFER_HOME`, Hugging Face variables).
    pub store: StoreConfig,
}

static STARTUP: OnceLock<Startup> = OnceLock::new();

impl Startup {
    /// Reads the environment once.
    pub fn read(verbose: u8) -> Startup {
        let stderr_tty = std::io::stderr().is_terminal();
        let mut store = StoreConfig::from_env();
        store.progress = stderr_tty;
        Startup {
            verbose,
            log_filter: std::env::var(LOG_ENV).ok().filter(|v| !v.trim().is_empty()),
            stderr_tty,
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            store,
        }
    }

    /// Installs the logger and keeps the settings for [`startup`].
    ///
    /// # Errors
    /// A `MINFER_LOG` that is not a valid filter.
    pub fn install(self) -> Result<()> {
        let filter = match &self.log_filter {
            Some(f) => tracing_subscriber::EnvFilter::try_new(f)
                .with_context(|| format!("{LOG_ENV}={f:?} is not a valid log filter"))?,
            None => tracing_subscriber::EnvFilter::new(match self.verbose {
                0 => "warn",
                1 => "info",
                _ => "debug",
            }),
        };
        // A second install (tests calling main twice) keeps the first.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(self.stderr_tty && !self.no_color)
            .with_target(self.verbose >= 2)
            .try_init();
        let _ = STARTUP.set(self);
        Ok(())
    }
}

/// The settings read at startup (defaults when `main` has not run, as in
/// unit tests).
pub fn startup() -> &'static Startup {
    STARTUP.get_or_init(|| Startup::read(0))
}

/// Runs `f`, showing a spinner labelled `label` on stderr if it takes
/// more than a second and stderr is a terminal.
pub fn with_progress<T>(label: &str, f: impl FnOnce() -> T) -> T {
    if !startup().stderr_tty {
        return f();
    }
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let label = label.to_string();
    let spinner = std::thread::spawn(move || {
        // Only a timeout means the work is still going on; the sender is
        // dropped (never used) when it ends.
        if !matches!(
            done_rx.recv_timeout(Duration::from_secs(1)),
            Err(mpsc::RecvTimeoutError::Timeout)
        ) {
            return;
        }
        let bar = indicatif::ProgressBar::new_spinner().with_message(label);
        bar.enable_steady_tick(Duration::from_millis(100));
        let _ = done_rx.recv();
        bar.finish_and_clear();
    });
    let out = f();
    drop(done_tx);
    let _ = spinner.join();
    out
}
