//! Store configuration, read from the environment once by the binary.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// Default Hugging Face endpoint.
pub const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

/// Where the store keeps models and how it reaches the outside world.
///
/// Built once (usually by [`StoreConfig::from_env`]) and handed to
/// [`crate::Store::new`]; nothing else in this crate reads the environment,
/// so tests and embedders can configure a store without touching globals.
#[derive(Clone)]
pub struct StoreConfig {
    /// Root directory; models live in `home/models`. `$MINFER_HOME`, default `~/.cache/minfer`.
    pub home: PathBuf,
    /// Base URL of the Hugging Face hub. `$HF_ENDPOINT`, default `https://huggingface.co`.
    pub hf_endpoint: String,
    /// Access token sent as `Authorization: Bearer ...` to the endpoint. `$HF_TOKEN`.
    pub hf_token: Option<String>,
    /// Python interpreter used to download wheels. `$MINFER_PYTHON`, default `python3`.
    pub python: String,
    /// Draw progress bars on stderr (otherwise print one line per file when it is done).
    pub progress: bool,
}

// Written by hand so that a token never ends up in logs or panic messages.
impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("home", &self.home)
            .field("hf_endpoint", &self.hf_endpoint)
            .field("hf_token", &self.hf_token.as_ref().map(|_| "<redacted>"))
            .field("python", &self.python)
            .field("progress", &self.progress)
            .finish()
    }
}

impl StoreConfig {
    /// Reads `MINFER_HOME`, `HF_ENDPOINT`, `HF_TOKEN` and `MINFER_PYTHON`,
    /// treating empty values as unset. `progress` starts out `false`; the
    /// binary decides it from whether stderr is a terminal.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let string = |name: &str| var(name).map(|v| v.to_string_lossy().into_owned());
        let home = var("MINFER_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_home(var("HOME").or_else(|| var("USERPROFILE"))));
        StoreConfig {
            home,
            hf_endpoint: string("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_HF_ENDPOINT.to_string()),
            hf_token: string("HF_TOKEN"),
            python: string("MINFER_PYTHON").unwrap_or_else(|| "python3".to_string()),
            progress: false,
        }
    }
}

/// `~/.cache/minfer`; without a home directory, `.cache/minfer` relative to
/// the working directory is the least surprising place left.
fn default_home(user_home: Option<OsString>) -> PathBuf {
    let base = user_home.map(PathBuf::from).unwrap_or_default();
    base.join(".cache").join("minfer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_home_is_under_dot_cache() {
        assert_eq!(
            default_home(Some("/home/u".into())),
            PathBuf::from("/home/u/.cache/minfer")
        );
        assert_eq!(default_home(None), PathBuf::from(".cache/minfer"));
    }

    #[test]
    fn debug_hides_the_token() {
        let cfg = StoreConfig {
            home: "/x".into(),
            hf_endpoint: DEFAULT_HF_ENDPOINT.into(),
            hf_token: Some("hf_secret".into()),
            python: "python3".into(),
            progress: false,
        };
        let s = format!("{cfg:?}");
        assert!(!s.contains("hf_secret"), "{s}");
        assert!(s.contains("redacted"), "{s}");
    }
}
